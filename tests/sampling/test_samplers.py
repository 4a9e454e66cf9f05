"""mrecord.sampling.samplers: MindSpore's samplers and dataset argument rules."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ArgumentError, SamplerError
from mrecord.sampling.arguments import sampler_from_args
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
)
from mrecord.sampling.shuffle import Shuffle

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "cases" / "mindspore_cases.json").read_text()
)
ERRORS = {"RuntimeError": RuntimeError, "ValueError": ValueError, "TypeError": TypeError}


def cases(name: str) -> list[dict[str, Any]]:
    found = [c for c in CASES if c["name"] == name]
    assert found, name
    return found


def ids(sampler: Sampler, counts: list[int], seed: int = 0, epoch: int = 0, **kw: Any) -> list[int]:
    return [int(i) for i in sampler.build_order(counts, seed=seed, epoch=epoch, **kw).to_array()]


def from_args(**kw: Any) -> Sampler:
    args: dict[str, Any] = {"shuffle": None, "num_shards": None, "shard_id": None}
    args["num_samples"] = None
    args.update(kw)
    return sampler_from_args(**args)


# ------------------------------------------------------------ MindSpore reference cases


@pytest.mark.parametrize("case", cases("sequential_sampler"), ids=str)
def test_sequential_sampler_case(case: dict[str, Any]) -> None:
    a = case["args"]
    sampler = SequentialSampler(start_index=a["start_index"], num_samples=a["num_samples"])
    assert ids(sampler, [a["n"]]) == case["expect"]
    assert sampler.num_rows_for(a["n"]) == len(case["expect"])


@pytest.mark.parametrize("case", cases("subset_sampler"), ids=str)
def test_subset_sampler_case(case: dict[str, Any]) -> None:
    a = case["args"]
    assert ids(SubsetSampler(a["indices"]), [a["n"]]) == case["expect"]


@pytest.mark.parametrize("case", cases("child_sampler"), ids=str)
def test_child_sampler_case(case: dict[str, Any]) -> None:
    a = case["args"]
    parent = SequentialSampler(**a["parent"])
    child = SequentialSampler(**a["child"])
    parent.add_child(child)
    assert parent.get_child() is child
    assert ids(parent, [a["n"]]) == case["expect"]["ids"]
    assert parent.get_num_samples() == case["expect"]["get_num_samples"]
    assert parent.num_rows_for(a["n"]) == len(case["expect"]["ids"])


@pytest.mark.parametrize("case", cases("get_num_samples"), ids=str)
def test_get_num_samples_case(case: dict[str, Any]) -> None:
    parent = SequentialSampler(num_samples=case["args"]["parent"])
    parent.add_child(SequentialSampler(num_samples=case["args"]["child"]))
    assert parent.get_num_samples() == case["expect"]


@pytest.mark.parametrize("case", cases("num_samples_noshuffle"), ids=str)
def test_num_samples_without_shuffle_case(case: dict[str, Any]) -> None:
    a = case["args"]
    sampler = from_args(shuffle=False, num_samples=a["num_samples"])
    assert ids(sampler, [a["n"]]) == case["expect"]


@pytest.mark.parametrize("case", cases("shard_noshuffle"), ids=lambda c: str(c["args"]))
def test_sharding_cases_through_samplers(case: dict[str, Any]) -> None:
    n, k = case["args"]["n"], case["args"]["num_shards"]
    via_args = [ids(from_args(shuffle=False, num_shards=k, shard_id=s), [n]) for s in range(k)]
    via_sampler = [ids(DistributedSampler(k, s, shuffle=False), [n]) for s in range(k)]
    assert via_args == via_sampler == case["expect"]
    assert [DistributedSampler(k, s).num_rows_for(n) for s in range(k)] == [
        len(e) for e in case["expect"]
    ]


@pytest.mark.parametrize("case", cases("padded"), ids=lambda c: str(c["args"]))
def test_padded_cases_through_sampler_from_args(case: dict[str, Any]) -> None:
    a = case["args"]
    n, k = a["n"], a["num_shards"]
    got = []
    for s in range(k):
        sampler = from_args(shuffle=False, num_shards=k, shard_id=s, num_padded=a["num_padded"])
        got.append([i if i < n else a["padded_sample"]["id"] for i in ids(sampler, [n])])
        assert sampler.num_rows_for(n) == len(case["expect"][s])
    assert got == case["expect"]


def test_error_sampler_with_shards_case() -> None:
    (case,) = cases("err_sampler_with_shards")
    with pytest.raises(ERRORS[case["error"]]) as info:
        from_args(sampler=SequentialSampler(), num_shards=2, shard_id=0)
    assert str(info.value) == case["message"]
    assert isinstance(info.value, SamplerError)


def test_error_shard_id_out_of_range_case() -> None:
    (case,) = cases("err_shard_id_out_of_range")
    a = case["args"]
    with pytest.raises(ERRORS[case["error"]]) as info:
        from_args(num_shards=a["num_shards"], shard_id=a["shard_id"])
    assert str(info.value) == case["message"]
    # DistributedSampler itself raises the RuntimeError kind (MindSpore's docs), same words.
    with pytest.raises(SamplerError) as info2:
        DistributedSampler(a["num_shards"], a["shard_id"])
    assert str(info2.value) == case["message"]


# ------------------------------------------------------------ sampler_from_args rules


def test_sampler_from_args_rules() -> None:
    seq = SequentialSampler()
    assert from_args(sampler=seq) is seq
    with pytest.raises(SamplerError, match="sampler and shuffle cannot"):
        from_args(sampler=seq, shuffle=True)
    with pytest.raises(SamplerError, match="sampler and num_samples cannot"):
        from_args(sampler=seq, num_samples=3)
    with pytest.raises(SamplerError, match="num_padded"):
        from_args(sampler=seq, num_padded=2)
    with pytest.raises(TypeError, match="sampler"):
        from_args(sampler="sequential")
    with pytest.raises(SamplerError, match="requires shard_id"):
        from_args(num_shards=2)
    with pytest.raises(SamplerError, match="shard_id is specified but num_shards is not"):
        from_args(shard_id=0)
    with pytest.raises(ValueError, match=r"num_shards is not within .*\[1, 2147483647\]"):
        from_args(num_shards=0, shard_id=0)
    with pytest.raises(TypeError, match="num_shards"):
        from_args(num_shards=2.0, shard_id=0)
    with pytest.raises(TypeError, match="shuffle must be of boolean"):
        from_args(shuffle="global")
    with pytest.raises(ValueError, match="num_samples"):
        from_args(num_samples=-1)
    for mode in (Shuffle.FILES, Shuffle.INFILE):
        with pytest.raises(
            ValueError, match=re.escape("'Shuffle.FILES' or 'Shuffle.INFILE' and 'num_samples'")
        ):
            from_args(shuffle=mode, num_samples=3)
    with pytest.raises(ArgumentError, match="num_padded"):
        from_args(num_shards=2, shard_id=0, num_padded=-1)


@pytest.mark.parametrize(
    ("shuffle", "mode"),
    [
        (True, Shuffle.GLOBAL),
        (False, None),
        (None, Shuffle.ADAPTIVE),
        (Shuffle.FILES, Shuffle.FILES),
    ],
)
def test_sampler_from_args_maps_shuffle(shuffle: Any, mode: Shuffle | None) -> None:
    sampler = from_args(shuffle=shuffle)
    assert isinstance(sampler, DatasetSampler)
    assert sampler.mode is mode


def test_shuffle_with_num_samples_samples_without_replacement() -> None:
    # MindSpore samples with replacement here; mrecord never repeats a row.
    for epoch in range(5):
        got = ids(from_args(shuffle=True, num_samples=50), [60, 40], seed=3, epoch=epoch)
        assert len(got) == 50 and len(set(got)) == 50
        assert all(0 <= i < 100 for i in got)


def test_padding_error_surfaces_from_the_sampler() -> None:
    sampler = from_args(shuffle=False, num_shards=5, shard_id=0, num_padded=4)
    with pytest.raises(SamplerError, match="padded samples: 14 can not be divisible"):
        sampler.build_order([10], seed=0, epoch=0)
    with pytest.raises(SamplerError, match="padded samples: 14"):
        sampler.num_rows_for(10)


@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    k=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    shuffle=st.sampled_from([True, False, None, *Shuffle]),
)
def test_shuffled_shards_split_one_permutation(
    counts: list[int], k: int, seed: int, shuffle: Any
) -> None:
    n = sum(counts)
    num_padded = (-n) % k
    shards = [
        ids(
            from_args(shuffle=shuffle, num_shards=k, shard_id=s, num_padded=num_padded),
            counts,
            seed=seed,
            epoch=2,
        )
        for s in range(k)
    ]
    assert sorted(i for shard in shards for i in shard) == list(range(n + num_padded))


# ------------------------------------------------------------ individual samplers


def test_sequential_sampler() -> None:
    assert ids(SequentialSampler(), [2, 3]) == [0, 1, 2, 3, 4]
    assert ids(SequentialSampler(num_samples=0), [3]) == [0, 1, 2]  # 0 means all (MindSpore)
    with pytest.raises(SamplerError, match="start_index"):
        ids(SequentialSampler(start_index=5), [5])
    with pytest.raises(ValueError, match="start_index"):
        SequentialSampler(start_index=-1)
    with pytest.raises(TypeError, match="start_index"):
        SequentialSampler(start_index=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_samples"):
        SequentialSampler(num_samples=-2)
    with pytest.raises(TypeError, match="num_samples"):
        SequentialSampler(num_samples="3")  # type: ignore[arg-type]


def test_random_sampler() -> None:
    first = ids(RandomSampler(), [10, 10], seed=1, epoch=0)
    assert sorted(first) == list(range(20))
    assert first == ids(RandomSampler(), [10, 10], seed=1, epoch=0)
    assert first != ids(RandomSampler(), [10, 10], seed=1, epoch=1)
    drawn = ids(RandomSampler(replacement=True, num_samples=500), [10], seed=1)
    assert len(drawn) == 500 and set(drawn) == set(range(10))
    assert len(ids(RandomSampler(num_samples=30), [10])) == 10
    assert RandomSampler(num_samples=30).num_rows_for(10) == 10
    assert RandomSampler(True, 30).num_rows_for(10) == 30
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(replacement=1)  # type: ignore[arg-type]


def test_subset_samplers() -> None:
    assert ids(SubsetSampler([3, 3, 0], num_samples=2), [4]) == [3, 3]
    assert ids(SubsetSampler(2), [4]) == [2]  # type: ignore[arg-type]
    rand = ids(SubsetRandomSampler([9, 4, 7, 1, 0, 2, 5]), [10], seed=4)
    assert sorted(rand) == [0, 1, 2, 4, 5, 7, 9]
    with pytest.raises(SamplerError, match=r"indices\[1\] = 10 is out of range"):
        ids(SubsetSampler([1, 10]), [10])
    with pytest.raises(TypeError, match=r"list\[1\]"):
        SubsetSampler([1, 2.0])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="indices"):
        SubsetRandomSampler([-1])


def test_weighted_random_sampler() -> None:
    drawn = ids(WeightedRandomSampler([0, 1, 0, 3], num_samples=4000), [6], seed=2)
    counts = Counter(drawn)
    assert set(counts) == {1, 3}
    assert 0.2 < counts[1] / 4000 < 0.3  # expected 1/4
    assert len(ids(WeightedRandomSampler([1, 1, 1]), [3])) == 3
    no_repeat = ids(WeightedRandomSampler([1, 2, 3, 0], 3, replacement=False), [4], seed=5)
    assert sorted(no_repeat) == [0, 1, 2]
    with pytest.raises(ValueError, match="size should not be 0"):
        WeightedRandomSampler([])
    with pytest.raises(ValueError, match="negative"):
        WeightedRandomSampler([1, -1])
    with pytest.raises(ValueError, match="all zeros"):
        WeightedRandomSampler([0, 0])
    with pytest.raises(TypeError, match=r"w\[1\]"):
        WeightedRandomSampler([1, "2"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler([1], num_samples=0)
    with pytest.raises(ValueError, match="positive weight"):
        WeightedRandomSampler([1, 0], num_samples=2, replacement=False)
    with pytest.raises(SamplerError, match="3 weights"):
        ids(WeightedRandomSampler([1, 1, 1]), [2])


def labels_of(values: list[int]) -> Callable[[], np.ndarray]:
    return lambda: np.array(values)


def test_pk_sampler_returns_distinct_rows_per_class() -> None:
    # Rows as in the reference datasets: cls = id % 3. MindSpore returned one row 6 times.
    cls = [i % 3 for i in range(10)]
    assert ids(PKSampler(2, class_column="cls"), [10], labels=labels_of(cls)) == [0, 3, 1, 4, 2, 5]
    shuffled = ids(PKSampler(3, shuffle=True), [10], seed=7, labels=labels_of(cls))
    assert len(shuffled) == 9 and len(set(shuffled)) == 9
    assert sorted(Counter(i % 3 for i in shuffled).values()) == [3, 3, 3]
    # A class with fewer rows than num_val repeats its rows.
    assert ids(PKSampler(3), [4], labels=labels_of([0, 1, 1, 0])) == [0, 3, 0, 1, 2, 1]
    assert ids(PKSampler(2, num_samples=3), [10], labels=labels_of(cls)) == [0, 3, 1]
    assert PKSampler(2).num_rows_for(10, labels=labels_of(cls)) == 6
    with pytest.raises(SamplerError, match="'label'"):
        ids(PKSampler(2), [10])
    with pytest.raises(SamplerError, match="labels"):
        PKSampler(2).num_rows_for(10)
    with pytest.raises(NotImplementedError):
        PKSampler(2, num_class=3)
    with pytest.raises(ValueError, match="num_val"):
        PKSampler(0)
    with pytest.raises(TypeError, match="shuffle"):
        PKSampler(1, shuffle=1)  # type: ignore[arg-type]


def test_distributed_sampler_validation() -> None:
    with pytest.raises(TypeError, match="num_shards"):
        DistributedSampler(2.0, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shard_id"):
        DistributedSampler(2, "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shuffle"):
        DistributedSampler(2, 0, shuffle=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_samples"):
        DistributedSampler(2, 0, num_samples=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="offset"):
        DistributedSampler(2, 0, offset="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_samples"):
        DistributedSampler(2, 0, num_samples=-1)
    for bad in [(0, 0), (-1, 0), (2, -1), (2, 2), (2, 3)]:
        with pytest.raises(RuntimeError):
            DistributedSampler(*bad)
    with pytest.raises(SamplerError, match="offset"):
        DistributedSampler(2, 0, offset=3)


def test_distributed_sampler_num_samples_caps_each_shard() -> None:
    assert ids(DistributedSampler(2, 1, shuffle=False, num_samples=2), [10]) == [1, 3]
    assert DistributedSampler(2, 1, num_samples=2).num_rows_for(10) == 2


def test_distributed_sampler_with_offset_gives_contiguous_blocks() -> None:
    blocks = [ids(DistributedSampler(3, s, shuffle=False, offset=1), [5]) for s in range(3)]
    # Virtual positions 1..5 of the rows; shard x gets the v % 3 == x count, in blocks.
    assert blocks == [[0], [1, 2], [3, 4]]


def test_child_sampler_rules() -> None:
    parent = RandomSampler()
    parent.add_child(SubsetSampler([8, 6, 4, 2]))
    got = ids(parent, [10], seed=1)
    assert sorted(got) == [2, 4, 6, 8]
    with pytest.raises(SamplerError, match="already has a child"):
        parent.add_child(SequentialSampler())
    with pytest.raises(TypeError, match="sampler"):
        SequentialSampler().add_child([1, 2])  # type: ignore[arg-type]
    with pytest.raises(SamplerError, match="PARTIAL"):
        SequentialSampler().add_child(DistributedSampler(2, 0, shuffle=Shuffle.PARTIAL))
    with pytest.raises(SamplerError, match="GLOBAL"):
        DistributedSampler(2, 0, shuffle=Shuffle.FILES).add_child(SequentialSampler())
    a, b = SequentialSampler(), SequentialSampler()
    a.add_child(b)
    with pytest.raises(SamplerError, match="cycle"):
        b.add_child(a)


def test_distributed_parent_shards_its_child_output() -> None:
    parent = DistributedSampler(2, 1, shuffle=False)
    parent.add_child(SubsetSampler([9, 8, 7, 6, 5]))
    assert ids(parent, [10]) == [8, 6, 9]  # positions 1, 3, then wraparound to 0
    assert parent.num_rows_for(10) == 3


def test_pk_child_sees_labels_of_child_rows() -> None:
    parent = PKSampler(1)
    parent.add_child(SubsetSampler([5, 4, 3]))
    # child rows 5, 4, 3 have classes 2, 1, 0: one row per class, classes sorted.
    assert ids(parent, [6], labels=labels_of([i % 3 for i in range(6)])) == [3, 4, 5]


SAMPLERS: list[Callable[[], Sampler]] = [
    SequentialSampler,
    lambda: SequentialSampler(2, 5),
    RandomSampler,
    lambda: RandomSampler(num_samples=7),
    lambda: RandomSampler(True, 9),
    lambda: SubsetSampler([0, 0, 1]),
    lambda: SubsetRandomSampler([1, 0], num_samples=1),
    lambda: WeightedRandomSampler([1, 2], 5),
    lambda: DistributedSampler(3, 2),
    lambda: DistributedSampler(4, 0, shuffle=Shuffle.INFILE, num_samples=2),
    lambda: DistributedSampler(3, 1, shuffle=False, offset=2),
    lambda: from_args(shuffle=None, num_shards=2, shard_id=1),
]


@pytest.mark.parametrize("make", SAMPLERS)
@given(counts=st.lists(st.integers(0, 20), min_size=1, max_size=4), epoch=st.integers(0, 3))
def test_num_rows_for_matches_the_order(
    make: Callable[[], Sampler], counts: list[int], epoch: int
) -> None:
    sampler = make()
    n = sum(counts)
    try:
        order = sampler.build_order(counts, seed=11, epoch=epoch)
    except SamplerError:
        return  # e.g. a subset index past the end of a small dataset
    assert sampler.num_rows_for(n) == len(order)
    ids_ = order.to_array()
    assert ids_.dtype == np.int64
    assert ((ids_ >= 0) & (ids_ < max(n, 1))).all()
    assert np.array_equal(ids_, sampler.build_order(counts, seed=11, epoch=epoch).to_array())
