"""Readers and sources in other processes, and random access by index.

``DatasetReader`` and every source pickle by path and reopen lazily in the child (fork
and spawn); ``reader[i]`` and ``reader.__getitems__(ids)`` make a reader a map-style
source for grain, torch and plain Python.
"""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import (
    DatasetReader,
    FileWriter,
    GeneratorDataset,
    MindDataset,
    NumpySlicesDataset,
    Shuffle,
    config,
)
from mrecord.errors import ArgumentError, ForeignShardError, RowIndexError

ROWS = 40


def write(folder: Path, shift: int = 0) -> Path:
    writer = FileWriter(folder / "d.mrecord", shard_num=2, overwrite=True)
    writer.add_schema(
        {"x": {"type": "int64"}, "s": {"type": "string"}, "v": {"type": "float32", "shape": [-1]}}
    )
    writer.set_page_size(1024)
    writer.write_raw_data(
        [{"x": i + shift, "s": str(i), "v": np.full(i % 4, i, np.float32)} for i in range(ROWS)]
    )
    writer.commit()
    return folder / "d.mrecord0"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("procs"))


@given(st.lists(st.integers(-ROWS, ROWS - 1), max_size=20))
def test_getitems_is_getitem_of_each(dataset: Path, ids: list[int]) -> None:
    """__getitems__(ids) equals [reader[i] for i in ids]: same values, negative ids too."""
    with DatasetReader.open(dataset) as reader:
        many = reader.__getitems__(ids)
        assert [int(r["x"]) for r in many] == [i % ROWS for i in ids]
        for got, i in zip(many, ids, strict=True):
            one = reader[i]
            assert got["s"] == one["s"]
            np.testing.assert_array_equal(got["v"], one["v"])


def test_getitem_bounds(dataset: Path) -> None:
    """Out of range is an IndexError (so `for row in reader` ends), also an ArgumentError."""
    with DatasetReader.open(dataset) as reader:
        assert int(reader[-ROWS]["x"]) == 0
        for bad in (ROWS, -ROWS - 1):
            with pytest.raises(IndexError, match="out of range"):
                reader[bad]
        with pytest.raises(RowIndexError):
            reader.__getitems__([0, -ROWS - 1])
        with pytest.raises(ArgumentError):
            reader.read_row(ROWS)
        with pytest.raises(TypeError):
            reader["x"]  # type: ignore[index]
        # the old iteration protocol (__getitem__ until IndexError), which mypy does not model
        assert [int(r["x"]) for r in reader] == list(range(ROWS))  # type: ignore[attr-defined]


def test_unpickled_reader_opens_only_when_read(dataset: Path) -> None:
    with DatasetReader.open(dataset, columns=["x"]) as reader:
        copy = pickle.loads(pickle.dumps(reader))
    assert copy._shards is None  # nothing opened yet
    assert len(copy) == ROWS and copy.column_names == ["x"]
    assert copy[5] == {"x": 5}
    assert copy._shards is not None
    copy.close()


def test_pickled_reader_refuses_a_dataset_rewritten_since(tmp_path: Path) -> None:
    first = write(tmp_path)
    with DatasetReader.open(first) as reader:
        blob = pickle.dumps(reader)
    write(tmp_path, shift=100)
    copy = pickle.loads(blob)
    with pytest.raises(ForeignShardError, match="changed"):
        copy[0]


def _first_rows(obj: Any) -> list[int]:
    """In the child: the first rows' x of a reader or a dataset."""
    if isinstance(obj, DatasetReader):
        return [int(r["x"]) for r in obj.__getitems__([0, 1, -1])]
    it = obj.create_tuple_iterator(num_epochs=1, output_numpy=True)
    return [int(row[0]) for row in it][:3]


class _Squares:
    """A picklable random-access source for GeneratorDataset."""

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> tuple[int]:
        return (i * i,)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_reader_and_sources_run_in_child_processes(dataset: Path, method: str) -> None:
    config.set_seed(3)
    mind = MindDataset(str(dataset), columns_list=["x"], shuffle=Shuffle.GLOBAL)
    want_mind = _first_rows(mind)
    objects = [
        (DatasetReader.open(dataset), [0, 1, ROWS - 1]),
        (mind, want_mind),
        (GeneratorDataset(_Squares(), ["sq"], shuffle=False), [0, 1, 4]),
        (NumpySlicesDataset({"a": np.arange(10) * 2}, shuffle=False), [0, 2, 4]),
    ]
    # config is per process: a spawned child sets the seed itself, as every rank does.
    context = get_context(method)
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=config.set_seed, initargs=(3,)
    ) as pool:
        for obj, want in objects:
            assert pool.submit(_first_rows, obj).result() == want, obj


def test_grain_map_dataset_and_data_loader_read_a_reader(dataset: Path) -> None:
    grain = pytest.importorskip("grain")
    with DatasetReader.open(dataset, columns=["x"]) as reader:
        mapped = grain.MapDataset.source(reader).map(lambda row: int(row["x"]) * 2)
        assert list(mapped) == [2 * i for i in range(ROWS)]
        loader = grain.DataLoader(
            data_source=reader,
            sampler=grain.samplers.IndexSampler(
                ROWS, shard_options=grain.sharding.NoSharding(), shuffle=False, num_epochs=1
            ),
            worker_count=1,  # a child process: the reader travels there pickled
        )
        assert [int(row["x"]) for row in loader] == list(range(ROWS))
