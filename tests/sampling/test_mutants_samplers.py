"""What users of ``mrecord.sampling.samplers`` rely on, checked exactly (issue 29's mutation pass).

Each sampler's ids at its edges (no rows, one row, ``num_samples`` 0 / equal / larger), the
child-sampler rules, ``get_num_samples`` and ``num_rows_for``, every argument check with its
whole message, and the orders of a seed pinned: a resumed job must see the same epoch again, so
a sampler's order for a (seed, epoch) may not change between versions.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from mrecord.errors import ArgumentError, SamplerError, UnsupportedArgumentError, WrongTypeError
from mrecord.sampling.samplers import (
    DatasetSampler,
    DistributedSampler,
    PKSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    SubsetSampler,
    WeightedRandomSampler,
    chain_sampler,
)
from mrecord.sampling.shuffle import Shuffle, shuffle_order
from mrecord.sampling.shuffle.block import BlockLayout


def ids(sampler: Sampler, counts: list[int], seed: int = 1, epoch: int = 0, **kw: Any) -> list[int]:
    """The sampler's order as a list."""
    return [int(i) for i in sampler.build_order(counts, seed=seed, epoch=epoch, **kw).to_array()]


def raises(kind: type[Exception], message: str) -> Any:
    """``pytest.raises`` matching the whole message."""
    return pytest.raises(kind, match="^" + re.escape(message) + "$")


LABELS = np.array([2, 1, 2, 1, 0, 2, 1, 2])


# ------------------------------------------------------------------ num_samples


def test_num_samples_checks_name_the_value() -> None:
    with raises(WrongTypeError, "Argument num_samples with value 2.0 is not of type [int], "
                "but got <class 'float'>."):
        SequentialSampler(num_samples=2.0)  # type: ignore[arg-type]
    with raises(ArgumentError, "num_samples should be a non-negative integer value, "
                "but got num_samples: -1."):
        RandomSampler(num_samples=-1)
    with raises(ArgumentError, "num_samples should be a positive integer value, "
                "but got num_samples: 0."):
        WeightedRandomSampler([1.0], num_samples=0)
    assert SequentialSampler(num_samples=0).num_samples == 0
    assert SequentialSampler(num_samples=np.int64(3)).num_samples == 3  # type: ignore[arg-type]
    assert type(SequentialSampler(num_samples=np.int64(3)).num_samples) is int  # type: ignore[arg-type]
    assert WeightedRandomSampler([1.0], num_samples=1).num_samples == 1


@pytest.mark.parametrize(
    ("num_samples", "expected"), [(None, [0, 1, 2, 3]), (0, [0, 1, 2, 3]), (1, [0]),
                                  (3, [0, 1, 2]), (4, [0, 1, 2, 3]), (9, [0, 1, 2, 3])]
)
def test_num_samples_takes_the_first_ids(num_samples: int | None, expected: list[int]) -> None:
    assert ids(SequentialSampler(num_samples=num_samples), [4]) == expected
    assert SequentialSampler(num_samples=num_samples).num_rows_for(4) == len(expected)
    assert ids(SubsetSampler([0, 1, 2, 3], num_samples=num_samples), [4]) == expected
    assert SubsetSampler([0, 1, 2, 3], num_samples=num_samples).num_rows_for(4) == len(expected)


# ------------------------------------------------------------------ children


def test_add_child_refusals_are_whole() -> None:
    parent = SequentialSampler()
    with raises(WrongTypeError, "sampler must be a mrecord sampler (SequentialSampler, "
                "RandomSampler, ...), got 3 (int)"):
        parent.add_child(3)  # type: ignore[arg-type]
    child = SequentialSampler()
    parent.add_child(child)
    assert parent.get_child() is child
    with raises(SamplerError, "Cannot add child sampler, this sampler already has a child."):
        parent.add_child(SequentialSampler())
    with raises(SamplerError, "Cannot add a sampler as a child of itself (a cycle)."):
        child.add_child(parent)
    with raises(SamplerError, "Cannot add a sampler as a child of itself (a cycle)."):
        lone = SequentialSampler()
        lone.add_child(lone)
    assert SequentialSampler().get_child() is None


def test_a_partial_shuffle_cannot_be_a_child_and_shuffled_parents_need_global() -> None:
    with raises(SamplerError, "A child sampler's shuffle cannot be Shuffle.PARTIAL."):
        SequentialSampler().add_child(DatasetSampler(Shuffle.PARTIAL))
    with raises(SamplerError, "A sampler with a child sampler must shuffle with Shuffle.GLOBAL "
                "(or not at all), got shuffle <Shuffle.FILES: 'files'>."):
        DistributedSampler(2, 0, shuffle=Shuffle.FILES).add_child(SequentialSampler())
    for ok in (DatasetSampler(None), DatasetSampler(Shuffle.GLOBAL)):
        ok.add_child(SequentialSampler())
        assert ok.get_child() is not None
    DatasetSampler(None).add_child(DatasetSampler(Shuffle.GLOBAL))


@pytest.mark.parametrize(
    ("own", "child", "expected"), [(None, None, None), (3, None, 3), (None, 4, 4), (3, 4, 3),
                                   (5, 4, 4)]
)
def test_get_num_samples_combines_with_the_child(
    own: int | None, child: int | None, expected: int | None
) -> None:
    parent = SequentialSampler(num_samples=own)
    assert parent.get_num_samples() == own
    parent.add_child(RandomSampler(num_samples=child))
    assert parent.get_num_samples() == expected


def test_subset_get_num_samples_defaults_to_its_indices() -> None:
    assert SubsetSampler([4, 5, 6]).get_num_samples() == 3
    assert SubsetSampler([4, 5, 6], num_samples=2).get_num_samples() == 2
    sub = SubsetSampler([4, 5, 6])
    sub.add_child(SequentialSampler(num_samples=2))
    assert sub.get_num_samples() == 2
    sub = SubsetSampler([0, 1])
    sub.add_child(SequentialSampler(num_samples=5))
    assert sub.get_num_samples() == 2
    sub = SubsetSampler([0, 1])
    sub.add_child(SequentialSampler())
    assert sub.get_num_samples() == 2


def test_a_parent_samples_positions_of_its_childs_order() -> None:
    parent = SubsetSampler([2, 0])
    parent.add_child(SequentialSampler(start_index=3))
    assert ids(parent, [4, 3]) == [5, 3]
    assert parent.num_rows_for(7) == 2
    seq = SequentialSampler(num_samples=2)
    seq.add_child(SubsetSampler([6, 1, 4]))
    assert ids(seq, [7]) == [6, 1]
    assert seq.num_rows_for(7) == 2
    # The child's order is keyed with a seed of its own: pinned (a resumed job sees it again).
    parent2 = RandomSampler()
    parent2.add_child(SequentialSampler(1))
    assert ids(parent2, [6]) == [3, 2, 5, 1, 4]
    child_random = SequentialSampler()
    child_random.add_child(RandomSampler())
    assert ids(child_random, [4, 3]) == ids(RandomSampler(), [4, 3], seed=_child_seed(1))


def _child_seed(seed: int) -> int:
    from mrecord.sampling.permutation import derive_key

    return derive_key(seed, "child")


def test_a_pk_parent_sees_the_labels_of_its_childs_rows_only() -> None:
    pk = PKSampler(1)
    pk.add_child(SubsetSampler([4, 1, 0]))
    # rows 4, 1, 0 have labels 0, 1, 2: one row of each class, in class order.
    assert ids(pk, [8], labels=lambda: LABELS) == [4, 1, 0]
    assert pk.num_rows_for(8, labels=lambda: LABELS) == 3


def test_num_rows_for_checks_total_rows() -> None:
    for bad in (-1, 2.0, "3"):
        with raises(ArgumentError, f"total_rows must be an int >= 0, got {bad!r}"):
            SequentialSampler().num_rows_for(bad)  # type: ignore[arg-type]
    assert SequentialSampler().num_rows_for(0) == 0
    assert SequentialSampler().num_rows_for(np.int64(5)) == 5  # type: ignore[arg-type]


def test_repr_names_the_arguments() -> None:
    parent = RandomSampler()
    parent.add_child(SequentialSampler(num_samples=2))
    assert repr(parent) == (
        "RandomSampler(num_samples=None, child=SequentialSampler(num_samples=2))"
    )
    assert repr(DistributedSampler(2, 1, num_samples=3)) == (
        "DistributedSampler(num_shards=2, shard_id=1, shuffle=True, num_samples=3, offset=-1)"
    )
    assert repr(DatasetSampler(Shuffle.GLOBAL, 2, 1, num_padded=1)) == (
        "DatasetSampler(mode=<Shuffle.GLOBAL: 'global'>, num_shards=2, shard_id=1, "
        "num_samples=None, num_padded=1)"
    )


def test_chain_sampler() -> None:
    new = SubsetSampler([1, 0])
    assert chain_sampler(new, None) is new
    assert new.get_child() is None
    current = SequentialSampler(start_index=2)
    assert chain_sampler(new, current) is new
    assert new.get_child() is current
    assert ids(new, [5]) == [3, 2]
    with raises(WrongTypeError, "add_sampler needs a mrecord sampler, got 'x' (str)"):
        chain_sampler("x", None)  # type: ignore[arg-type]


# ------------------------------------------------------------------ sequential


def test_sequential_sampler_edges() -> None:
    assert ids(SequentialSampler(), [0]) == []
    assert ids(SequentialSampler(start_index=5), [0, 0]) == []
    assert ids(SequentialSampler(start_index=2), [2, 2]) == [2, 3]
    assert ids(SequentialSampler(start_index=3), [4]) == [3]
    assert ids(SequentialSampler(start_index=1, num_samples=2), [5]) == [1, 2]
    with raises(SamplerError, "Invalid parameter, start_index must be less than the number of "
                "rows 4, but got start_index: 4."):
        ids(SequentialSampler(start_index=4), [4])
    with raises(WrongTypeError, "Argument start_index with value 1.0 is not of type [int], "
                "but got <class 'float'>."):
        SequentialSampler(start_index=1.0)  # type: ignore[arg-type]
    with raises(ArgumentError, "start_index should be a positive integer value or 0, "
                "but got start_index: -1."):
        SequentialSampler(start_index=-1)
    assert SequentialSampler(start_index=0).start_index == 0
    assert SequentialSampler(start_index=3).num_rows_for(5) == 2
    assert SequentialSampler(start_index=7).num_rows_for(5) == 0
    assert SequentialSampler(start_index=1, num_samples=2).num_rows_for(5) == 2
    assert SequentialSampler(start_index=3, num_samples=4).num_rows_for(5) == 2


# ------------------------------------------------------------------ random


def test_random_sampler_orders_are_pinned() -> None:
    assert ids(RandomSampler(), [4, 3]) == [2, 1, 4, 5, 3, 0, 6]
    assert ids(RandomSampler(num_samples=3), [4, 3]) == [2, 1, 4]
    assert ids(RandomSampler(replacement=True), [4, 3]) == [2, 2, 5, 4, 1, 0, 4]
    assert ids(RandomSampler(replacement=True, num_samples=3), [4, 3]) == [2, 2, 5]
    assert ids(RandomSampler(), [4, 3], epoch=1) != ids(RandomSampler(), [4, 3])


def test_random_sampler_edges() -> None:
    assert ids(RandomSampler(), [0]) == []
    assert ids(RandomSampler(replacement=True), [0]) == []
    assert ids(RandomSampler(replacement=True, num_samples=4), [0]) == []
    assert ids(RandomSampler(), [1]) == [0]
    assert ids(RandomSampler(replacement=True, num_samples=3), [1]) == [0, 0, 0]
    assert len(ids(RandomSampler(replacement=True, num_samples=9), [2])) == 9
    assert RandomSampler(replacement=True, num_samples=9).num_rows_for(2) == 9
    assert RandomSampler(replacement=True, num_samples=9).num_rows_for(0) == 0
    assert RandomSampler(replacement=True).num_rows_for(4) == 4
    assert RandomSampler(num_samples=9).num_rows_for(2) == 2
    assert RandomSampler(num_samples=1).num_rows_for(2) == 1
    assert RandomSampler().num_rows_for(3) == 3
    assert RandomSampler().replacement is False
    with raises(WrongTypeError, "replacement should be a boolean value, but got replacement: 1."):
        RandomSampler(replacement=1)  # type: ignore[arg-type]


# ------------------------------------------------------------------ subsets


def test_subset_indices_checks_are_whole() -> None:
    assert SubsetSampler(3).indices.tolist() == [3]  # type: ignore[arg-type]
    assert SubsetSampler(np.int32(2)).indices.tolist() == [2]  # type: ignore[arg-type]
    assert SubsetSampler(i for i in [4, 0]).indices.tolist() == [4, 0]
    assert SubsetSampler([]).indices.dtype == np.int64
    with raises(WrongTypeError, "SubsetSampler: indices must be a list of ints, got 'ab'"):
        SubsetSampler("ab")  # type: ignore[arg-type]
    with raises(WrongTypeError, "SubsetRandomSampler: indices must be a list of ints, got b'a'"):
        SubsetRandomSampler(b"a")  # type: ignore[arg-type]
    with raises(WrongTypeError, "SubsetSampler: indices must be a list of ints, got 1.5"):
        SubsetSampler(1.5)  # type: ignore[arg-type]
    with raises(WrongTypeError, "SubsetSampler: Type of indices element must be int, but got "
                "list[1]: 2.0, type: <class 'float'>."):
        SubsetSampler([1, 2.0])  # type: ignore[list-item]
    with raises(ArgumentError, "SubsetSampler: indices must be >= 0, but got list[2]: -1."):
        SubsetSampler([1, 0, -1])
    with raises(SamplerError, "SubsetSampler: indices[2] = 5 is out of range for a dataset of "
                "5 rows; use indices in [0, 4]."):
        ids(SubsetSampler([1, 4, 5, 9]), [5])
    with raises(SamplerError, "SubsetRandomSampler: indices[0] = 3 is out of range for a "
                "dataset of 3 rows; use indices in [0, 2]."):
        ids(SubsetRandomSampler([3]), [3])


def test_subset_samplers_edges_and_pinned_order() -> None:
    assert ids(SubsetSampler([4, 4, 0]), [5]) == [4, 4, 0]
    assert ids(SubsetSampler([]), [0]) == []
    assert ids(SubsetSampler([]), [3]) == []
    assert SubsetSampler([1, 1, 1]).num_rows_for(0) == 3
    assert ids(SubsetRandomSampler([5, 1, 3, 0]), [7]) == [0, 3, 1, 5]
    assert ids(SubsetRandomSampler([5, 1, 3, 0], num_samples=2), [7]) == [0, 3]
    assert ids(SubsetRandomSampler([]), [2]) == []
    assert ids(SubsetRandomSampler([6]), [7]) == [6]


# ------------------------------------------------------------------ weighted


def test_weighted_checks_are_whole() -> None:
    with raises(WrongTypeError, "type of weights element must be number, but got w[1]: 'a', "
                "type: <class 'str'>."):
        WeightedRandomSampler([1.0, "a"])  # type: ignore[list-item]
    with raises(WrongTypeError, "type of weights element must be number, but got w[0]: True, "
                "type: <class 'bool'>."):
        WeightedRandomSampler([True])
    with raises(ArgumentError, "weights size should not be 0"):
        WeightedRandomSampler([])
    with raises(ArgumentError, "weights must be finite numbers, got [1.0, inf]"):
        WeightedRandomSampler([1.0, float("inf")])
    with raises(ArgumentError, "weights should not contain negative numbers."):
        WeightedRandomSampler([1.0, -0.5])
    with raises(ArgumentError, "elements of weights should not be all zeros."):
        WeightedRandomSampler([0.0, 0])
    with raises(WrongTypeError, "replacement should be a boolean value, but got replacement: 0."):
        WeightedRandomSampler([1.0], replacement=0)  # type: ignore[arg-type]
    with raises(ArgumentError, "num_samples=3 is more than the 2 rows with a positive weight; "
                "without replacement each row can be drawn once."):
        WeightedRandomSampler([1.0, 0.0, 2.0], num_samples=3, replacement=False)
    with raises(ArgumentError, "num_samples=3 is more than the 2 rows with a positive weight; "
                "without replacement each row can be drawn once."):
        WeightedRandomSampler([1.0, 0.0, 2.0], replacement=False)
    with raises(SamplerError, "WeightedRandomSampler has 3 weights but the dataset has 2 rows; "
                "give one weight per row (or fewer)."):
        ids(WeightedRandomSampler([1, 1, 1]), [2])


def test_weighted_accepts_numbers_and_pins_its_draws() -> None:
    assert WeightedRandomSampler(2.5).weights.tolist() == [2.5]  # type: ignore[arg-type]
    assert WeightedRandomSampler((1, np.float32(2))).weights.tolist() == [1.0, 2.0]  # type: ignore[arg-type]
    assert WeightedRandomSampler(np.array([1, 3])).weights.tolist() == [1.0, 3.0]
    assert WeightedRandomSampler([1.0, 0.0, 2.0], num_samples=2, replacement=False).replacement \
        is False
    assert WeightedRandomSampler([1.0]).replacement is True
    draws = ids(WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], num_samples=6), [5])
    assert draws == [2, 1, 2, 1, 2, 1]
    assert ids(WeightedRandomSampler([1, 1, 1, 1], num_samples=3, replacement=False), [5]) == [
        2, 1, 0
    ]
    assert ids(WeightedRandomSampler([0, 0, 1]), [3]) == [2, 2, 2]
    assert ids(WeightedRandomSampler([0, 1]), [3]) == [1, 1]
    assert WeightedRandomSampler([1, 1, 1]).num_rows_for(9) == 3
    assert WeightedRandomSampler([1, 1, 1], num_samples=5).num_rows_for(0) == 5


# ------------------------------------------------------------------ PK


def test_pk_checks_are_whole() -> None:
    with raises(WrongTypeError, "Argument num_val with value 1.0 is not of type [int], "
                "but got <class 'float'>."):
        PKSampler(1.0)  # type: ignore[arg-type]
    with raises(ArgumentError, "num_val should be a positive integer value, but got num_val: 0."):
        PKSampler(0)
    with raises(UnsupportedArgumentError, "Not supported to specify num_class for PKSampler."):
        PKSampler(1, num_class=2)
    with raises(WrongTypeError, "shuffle should be a boolean value, but got shuffle: 1."):
        PKSampler(1, shuffle=1)  # type: ignore[arg-type]
    with raises(WrongTypeError, "Argument class_column with value 3 is not of type "
                "[<class 'str'>], but got <class 'int'>."):
        PKSampler(1, class_column=3)  # type: ignore[arg-type]
    with raises(SamplerError, "PKSampler needs the values of class_column 'y' for every row, "
                "but the dataset did not provide them (pass labels=)."):
        ids(PKSampler(1, class_column="y"), [3])
    with raises(SamplerError, "PKSampler: class_column 'label' must hold one scalar per row "
                "(3 rows), got an array of shape (2,)."):
        ids(PKSampler(1), [3], labels=lambda: [0, 1])
    with raises(SamplerError, "PKSampler: class_column 'label' must hold one scalar per row "
                "(2 rows), got an array of shape (2, 2)."):
        ids(PKSampler(1), [2], labels=lambda: [[0, 1], [1, 0]])
    with raises(SamplerError, "PKSampler's row count depends on the classes in the data; "
                "call num_rows_for(total_rows, labels=...)."):
        PKSampler(1).num_rows_for(3)
    pk = PKSampler(np.int64(2), class_column="y")  # type: ignore[arg-type]
    assert (pk.num_val, type(pk.num_val), pk.num_class, pk.shuffle, pk.class_column) == (
        2, int, None, False, "y"
    )


def test_pk_orders() -> None:
    labels = lambda: LABELS  # noqa: E731
    # classes 0: [4]; 1: [1, 3, 6]; 2: [0, 2, 5, 7]
    assert ids(PKSampler(2), [8], labels=labels) == [4, 4, 1, 3, 0, 2]
    assert ids(PKSampler(1), [8], labels=labels) == [4, 1, 0]
    assert ids(PKSampler(4), [8], labels=labels) == [4, 4, 4, 4, 1, 3, 6, 1, 0, 2, 5, 7]
    assert ids(PKSampler(2, num_samples=3), [8], labels=labels) == [4, 4, 1]
    assert ids(PKSampler(2, shuffle=True), [8], labels=labels) == [3, 1, 4, 4, 7, 0]
    assert ids(PKSampler(2), [0], labels=lambda: []) == []
    assert ids(PKSampler(3), [3], labels=lambda: np.array([[5], [5], [5]])) == [0, 1, 2]
    assert PKSampler(2).num_rows_for(8, labels=labels) == 6
    assert PKSampler(2, num_samples=5).num_rows_for(8, labels=labels) == 5
    shuffled = ids(PKSampler(3, shuffle=True), [8], labels=labels)
    assert sorted(LABELS[shuffled].tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len(set(shuffled)) == 1 + 3 + 3  # distinct rows where the class has enough


# ------------------------------------------------------------------ shuffle modes, shards


def test_mode_sampler_checks_are_whole() -> None:
    with raises(WrongTypeError, "Argument num_padded with value 1.0 is not of type [int], "
                "but got <class 'float'>."):
        DatasetSampler(None, num_padded=1.0)  # type: ignore[arg-type]
    with raises(ArgumentError, "num_padded is invalid, num_padded=-1."):
        DatasetSampler(None, num_padded=-1)
    with raises(ArgumentError, "partial_window must be >= 1 rows, got 0"):
        DatasetSampler(None, partial_window=0)
    with raises(ArgumentError, "adaptive_threshold must be >= 1 rows, got 0"):
        DatasetSampler(None, adaptive_threshold=0)
    s = DatasetSampler(Shuffle.PARTIAL, 3, 2, num_samples=4, num_padded=np.int64(2),  # type: ignore[arg-type]
                       partial_window=7, adaptive_threshold=9)
    assert (s.mode, s.num_shards, s.shard_id, s.num_samples, s.num_padded, s.offset,
            s.partial_window, s.adaptive_threshold) == (Shuffle.PARTIAL, 3, 2, 4, 2, -1, 7, 9)
    assert type(s.num_padded) is int


def test_distributed_checks_are_whole() -> None:
    with raises(WrongTypeError, "Argument num_shards with value 2.0 is not of type [int], "
                "but got <class 'float'>."):
        DistributedSampler(2.0, 0)  # type: ignore[arg-type]
    with raises(WrongTypeError, "Argument shard_id with value '0' is not of type [int], "
                "but got <class 'str'>."):
        DistributedSampler(2, "0")  # type: ignore[arg-type]
    with raises(WrongTypeError, "shuffle should be a boolean value or Shuffle enum, but got "
                "shuffle: 'global'."):
        DistributedSampler(2, 0, shuffle="global")  # type: ignore[arg-type]
    with raises(WrongTypeError, "Argument offset with value 0.5 is not of type [int], "
                "but got <class 'float'>."):
        DistributedSampler(2, 0, offset=0.5)  # type: ignore[arg-type]
    for bad in (-2, 3):
        with raises(SamplerError, "offset should be no more than num_shards=2 (or -1 for no "
                    f"offset), but got offset: {bad}."):
            DistributedSampler(2, 0, offset=bad)
    for ok in (-1, 0, 2):
        assert DistributedSampler(2, 0, offset=ok).offset == ok
    d = DistributedSampler(2, 1, shuffle=False, num_samples=2, offset=np.int64(1))  # type: ignore[arg-type]
    assert (d.mode, d.num_shards, d.shard_id, d.num_samples, d.offset, d.shuffle) == (
        None, 2, 1, 2, 1, False
    )
    assert type(d.offset) is int
    assert DistributedSampler(2, 0).mode is Shuffle.GLOBAL
    assert DistributedSampler(2, 0, shuffle=Shuffle.FILES).mode is Shuffle.FILES


def test_distributed_orders() -> None:
    assert ids(DistributedSampler(2, 0, shuffle=False), [7]) == [0, 2, 4, 6]
    assert ids(DistributedSampler(2, 1, shuffle=False), [7]) == [1, 3, 5, 0]
    assert ids(DistributedSampler(2, 1, shuffle=False, num_samples=2), [7]) == [1, 3]
    assert DistributedSampler(2, 1, shuffle=False, num_samples=2).num_rows_for(7) == 2
    assert DistributedSampler(2, 1, shuffle=False).num_rows_for(7) == 4
    assert DistributedSampler(3, 2, shuffle=False).num_rows_for(7) == 3
    assert ids(DistributedSampler(2, 0), [7]) == [4, 0, 2, 3]
    assert ids(DistributedSampler(3, 1, shuffle=False, offset=0), [7]) == [3, 4]
    assert DistributedSampler(3, 1, shuffle=False, offset=0).num_rows_for(7) == 2
    assert ids(DistributedSampler(1, 0, shuffle=False), [2, 1]) == [0, 1, 2]


def test_dataset_sampler_padding() -> None:
    assert ids(DatasetSampler(None, 2, 1, num_padded=1), [3]) == [1, 3]
    assert DatasetSampler(None, 2, 1, num_padded=1).num_rows_for(3) == 2
    assert DatasetSampler(None, 2, 0, num_padded=1).num_rows_for(3) == 2
    with pytest.raises(SamplerError):
        DatasetSampler(None, 2, 0, num_padded=2).num_rows_for(3)
    assert DatasetSampler(None, 2, 0, num_samples=1).num_rows_for(5) == 1


# ------------------------------------------------------------------ what reaches the modes


COUNTS = [5, 4, 3]  # 12 rows in three files


def _mode(mode: Shuffle, seed: int = 3, epoch: int = 0, **kw: Any) -> list[int]:
    return [int(i) for i in shuffle_order(mode, np.array(COUNTS), seed, epoch, **kw).to_array()]


def test_the_block_layout_reaches_the_shuffle_also_through_a_parent() -> None:
    layout = BlockLayout(block_rows=2, window_blocks=2)
    block = _mode(Shuffle.BLOCK, layout=layout)
    assert block != _mode(Shuffle.BLOCK)
    assert ids(DatasetSampler(Shuffle.BLOCK), COUNTS, seed=3, layout=layout) == block
    parent = SequentialSampler()
    parent.add_child(DatasetSampler(Shuffle.BLOCK))
    child_seed = _child_seed(3)
    assert ids(parent, COUNTS, seed=3, layout=layout) == _mode(
        Shuffle.BLOCK, seed=child_seed, layout=layout
    )


def test_partial_window_and_adaptive_threshold_reach_the_shuffle() -> None:
    partial = DatasetSampler(Shuffle.PARTIAL, partial_window=3)
    assert ids(partial, COUNTS, seed=3) == _mode(Shuffle.PARTIAL, partial_window=3)
    assert _mode(Shuffle.PARTIAL, partial_window=3) != _mode(Shuffle.PARTIAL)
    adaptive = DatasetSampler(Shuffle.ADAPTIVE, partial_window=3, adaptive_threshold=11)
    above = _mode(Shuffle.ADAPTIVE, partial_window=3, adaptive_threshold=11)
    assert above == _mode(Shuffle.PARTIAL, partial_window=3)
    assert ids(adaptive, COUNTS, seed=3) == above


def test_block_shards_are_contiguous_runs_of_one_block_order() -> None:
    layout = BlockLayout(block_rows=2, window_blocks=2)
    block = _mode(Shuffle.BLOCK, layout=layout)
    shards = [ids(DatasetSampler(Shuffle.BLOCK, 2, s), COUNTS, seed=3, layout=layout)
              for s in (0, 1)]
    assert shards == [block[:6], block[6:]]
    assert ids(DatasetSampler(Shuffle.BLOCK, 1, 0), COUNTS, seed=3, layout=layout) == block


def test_adaptive_storage_measurements_count_on_one_host_only() -> None:
    measured = BlockLayout(block_rows=2, window_blocks=2, adaptive=True)
    block = _mode(Shuffle.BLOCK, layout=measured.without_adaptive())
    one_host = ids(DatasetSampler(Shuffle.ADAPTIVE), COUNTS, seed=3, layout=measured)
    assert one_host == block
    for s in (0, 1):
        # Ranks cannot agree on measured numbers: two shards split the GLOBAL order.
        got = ids(DatasetSampler(Shuffle.ADAPTIVE, 2, s), COUNTS, seed=3, layout=measured)
        assert got == ids(DatasetSampler(Shuffle.GLOBAL, 2, s), COUNTS, seed=3)


def test_a_shuffled_parent_keys_its_order_with_seed_and_epoch() -> None:
    for epoch in (0, 1):
        parent = DistributedSampler(2, 0)
        parent.add_child(SequentialSampler())
        assert ids(parent, [7], seed=5, epoch=epoch) == ids(
            DistributedSampler(2, 0), [7], seed=5, epoch=epoch
        )
    assert ids(DistributedSampler(2, 0), [7], seed=5, epoch=1) != ids(
        DistributedSampler(2, 0), [7], seed=5, epoch=0
    )


def test_a_mode_sampler_refuses_a_partial_child_too() -> None:
    with raises(SamplerError, "A child sampler's shuffle cannot be Shuffle.PARTIAL."):
        DatasetSampler(None).add_child(DatasetSampler(Shuffle.PARTIAL))
    with raises(SamplerError, "A child sampler's shuffle cannot be Shuffle.PARTIAL."):
        DistributedSampler(2, 0).add_child(DistributedSampler(2, 0, shuffle=Shuffle.PARTIAL))


def test_a_child_gets_the_labels() -> None:
    parent = SequentialSampler()
    parent.add_child(PKSampler(1))
    assert ids(parent, [8], labels=lambda: LABELS) == [4, 1, 0]
    assert parent.num_rows_for(8, labels=lambda: LABELS) == 3
    pk = PKSampler(1)
    pk.add_child(SequentialSampler())
    with raises(SamplerError, "PKSampler needs the values of class_column 'label' for every "
                "row, but the dataset did not provide them (pass labels=)."):
        ids(pk, [8])


def test_more_edges() -> None:
    assert ids(DatasetSampler(None), [2, 1]) == [0, 1, 2]
    assert (DatasetSampler(None).num_shards, DatasetSampler(None).num_padded) == (1, 0)
    with raises(SamplerError, "Input num_shards is not within the required interval of "
                "[1, 2147483647]. Got num_shards=0."):
        DistributedSampler(0, 0, offset=1)
    with raises(SamplerError, "offset should be no more than num_shards=1 (or -1 for no "
                "offset), but got offset: 2."):
        DistributedSampler(1, 0, offset=2)
    assert ids(PKSampler(2), [1], labels=lambda: [7]) == [0, 0]
    assert WeightedRandomSampler([1, 3]).weights.dtype == np.float64


def test_sharded_block_keeps_the_measured_block_sizes() -> None:
    measured = BlockLayout(block_rows=2, window_blocks=2, adaptive=True)
    block = _mode(Shuffle.BLOCK, layout=measured.without_adaptive())
    assert block != _mode(Shuffle.BLOCK)
    shards = [ids(DatasetSampler(Shuffle.BLOCK, 2, s), COUNTS, seed=3, layout=measured)
              for s in (0, 1)]
    assert shards == [block[:6], block[6:]]
