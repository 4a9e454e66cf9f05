"""GeneratorDataset and NumpySlicesDataset: source kinds, sampling, sharding, errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mrecord import config
from mrecord.errors import ArgumentError, OperationError, PipelineError
from mrecord.pipeline import GeneratorDataset, NumpySlicesDataset


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    config.reset()


class Squares:
    """A random-access source: row i is (i, i * i)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return np.array(i), np.array(i * i)


def ids(ds: Any, epochs: int = 1) -> list[int]:
    return [int(row[0]) for row in ds.create_tuple_iterator(num_epochs=epochs)]


def test_random_access_in_order_with_shuffle_false() -> None:
    ds = GeneratorDataset(Squares(5), ["i", "sq"], shuffle=False)
    assert ds.get_dataset_size() == 5
    assert [[int(v) for v in r] for r in ds.create_tuple_iterator(num_epochs=1)] == [
        [0, 0],
        [1, 1],
        [2, 4],
        [3, 9],
        [4, 16],
    ]


def test_random_access_shuffles_by_default_reproducibly() -> None:
    config.set_seed(3)
    ds = GeneratorDataset(Squares(100), ["i", "sq"])
    first = ids(ds)
    assert sorted(first) == list(range(100)) and first != list(range(100))
    config.set_seed(3)
    assert ids(ds) == first


def test_sharding_is_strided_and_wraps_like_mindspore() -> None:
    # reference README: N=10, k=3 -> [0,3,6,9], [1,4,7,0], [2,5,8,1]
    shards = [
        ids(GeneratorDataset(Squares(10), ["i", "sq"], shuffle=False, num_shards=3, shard_id=s))
        for s in range(3)
    ]
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]


def test_shard_id_out_of_range_gives_mindspore_message() -> None:
    message = r"Input shard_id is not within the required interval of \[0, 1\]\."
    with pytest.raises(ValueError, match=message):
        GeneratorDataset(Squares(10), ["i", "sq"], num_shards=2, shard_id=2)


def test_num_samples_and_index_sampler() -> None:
    ds = GeneratorDataset(Squares(10), ["i", "sq"], shuffle=False, num_samples=4)
    assert ds.get_dataset_size() == 4 and ids(ds) == [0, 1, 2, 3]
    picked = GeneratorDataset(Squares(10), ["i", "sq"], sampler=[7, 2, 2])
    assert ids(picked) == [7, 2, 2]


def test_parallel_reads_keep_the_order() -> None:
    ds = GeneratorDataset(Squares(300), ["i", "sq"], shuffle=False, num_parallel_workers=3)
    assert ids(ds) == list(range(300))


@pytest.mark.parametrize(
    "kwargs",
    [{"shuffle": True}, {"num_shards": 2, "shard_id": 0}, {"sampler": [0, 1]}],
)
def test_iterable_source_refuses_shuffle_shard_sampler(kwargs: dict[str, Any]) -> None:
    def gen() -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(3))

    with pytest.raises(ArgumentError, match="random-access"):
        GeneratorDataset(gen, ["x"], **kwargs)


def test_generator_function_runs_every_epoch() -> None:
    def gen() -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(3))

    ds = GeneratorDataset(gen, ["x"])
    it = ds.create_tuple_iterator(num_epochs=2)
    assert [int(r[0]) for r in it] == [0, 1, 2]
    assert [int(r[0]) for r in it] == [0, 1, 2]
    assert ds.get_dataset_size() == 3  # no __len__: counted with a pass


def test_one_shot_iterator_cannot_serve_a_second_epoch() -> None:
    ds = GeneratorDataset(iter([(1,), (2,)]), ["x"]).repeat(2)
    with pytest.raises(PipelineError, match="one-shot"):
        ids(ds)


def test_iterable_num_samples_takes_the_first_rows() -> None:
    def gen() -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(10))

    ds = GeneratorDataset(gen, ["x"], num_samples=3)
    assert ids(ds) == [0, 1, 2] and ds.get_dataset_size() == 3
    # a list is random access: num_samples with shuffle=False takes the first rows too
    listed = GeneratorDataset([(i,) for i in range(10)], ["x"], num_samples=3, shuffle=False)
    assert ids(listed) == [0, 1, 2]


def test_exception_in_iterable_names_the_item() -> None:
    def gen() -> Iterator[tuple[int]]:
        yield (0,)
        yield (1,)
        raise RuntimeError("disk gone")

    with pytest.raises(OperationError, match="item 2") as e:
        ids(GeneratorDataset(gen, ["x"]))
    assert str(e.value.__cause__) == "disk gone"


def test_item_with_wrong_width_is_reported() -> None:
    with pytest.raises(PipelineError, match=r"index 0 has 1 value\(s\) but column_names has 2"):
        ids(GeneratorDataset([(1,)], ["a", "b"], shuffle=False))


def test_column_types_cast() -> None:
    ds = GeneratorDataset([(1,), (2,)], ["x"], column_types=[np.float32], shuffle=False)
    assert ds.output_types() == [np.dtype(np.float32)]


def test_numpy_slices_names_and_errors() -> None:
    tup = NumpySlicesDataset((np.arange(3), np.arange(3) * 2), shuffle=False)
    assert tup.get_col_names() == ["column_0", "column_1"]
    assert [[int(v) for v in r] for r in tup.create_tuple_iterator(num_epochs=1)][-1] == [2, 4]
    named = NumpySlicesDataset([5, 6], column_names=["v"], shuffle=False)
    assert ids(named) == [5, 6]
    with pytest.raises(ArgumentError, match="same length"):
        NumpySlicesDataset({"a": [1, 2], "b": [1]})
