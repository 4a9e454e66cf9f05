"""A variable-shape column's value index (``mrecord.storage.value_index``): where every
row's value lies, built once every chunk is checked, and the random reads that use it
give the values as written, each its own writeable array."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.errors import ChecksumError
from mrecord.reader import dataset_reader
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import value_index


def _write(
    path: Path, values: list[np.ndarray], schema_shape: list[int], shards: int = 1, **field: object
) -> None:
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema(
            {
                "a": {"type": str(values[0].dtype), "shape": schema_shape, **field},
                "i": {"type": "int32"},
            }
        )
        writer.set_page_size(2048)  # many pages, a few rows each
        writer.write_raw_data({"a": values, "i": np.arange(len(values), dtype=np.int32)})


def _values(rng: np.random.Generator, rows: int, rank: int, dtype: str) -> list[np.ndarray]:
    trailing = [2, 3][: rank - 1]
    return [
        (rng.random((int(k), *trailing)) * 100).astype(dtype) for k in rng.integers(4, 40, rows)
    ]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 400),
    rank=st.integers(1, 3),
    dtype=st.sampled_from(["float32", "int64", "uint8"]),
    seed=st.integers(0, 2**16),
)
def test_the_index_says_where_every_value_lies(
    tmp_path_factory: pytest.TempPathFactory, rows: int, rank: int, dtype: str, seed: int
) -> None:
    """Each row's start and shape from the index cut out exactly the value written."""
    rng = np.random.default_rng(seed)
    values = _values(rng, rows, rank, dtype)
    path = tmp_path_factory.mktemp("index") / "ds"
    _write(path, values, [-1] * rank)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        col = shard.field_index("a")
        assert shard.value_index(col) is None  # nothing checked yet: not built
        reader.read_rows(np.arange(rows))  # checks every chunk (policy "once")
        index = shard.value_index(col)
        assert index is not None and shard.value_index(col) is index  # built once
        data = shard.file_bytes
        for row, value in enumerate(values):
            start = int(index.starts[row])
            assert tuple(index.shapes[row].tolist()) == value.shape
            assert bytes(data[start : start + value.nbytes]) == value.tobytes()


@settings(max_examples=20, deadline=None)
@given(
    rank=st.integers(1, 3),
    fixed=st.booleans(),
    shards=st.sampled_from([1, 2]),
    data=st.data(),
)
def test_random_reads_through_the_index_give_each_value_as_written(
    tmp_path_factory: pytest.TempPathFactory,
    rank: int,
    fixed: bool,
    shards: int,
    data: st.DataObject,
) -> None:
    """Reads of many random rows (repeats included) once the index is built: values as
    written, each writeable and sharing memory with no other value and not with the file;
    one shard or two (a read's rows of each shard put back in their places)."""
    rng = np.random.default_rng(rank)
    values = _values(rng, 600, rank, "float32")
    path = tmp_path_factory.mktemp("reads") / "ds"
    _write(path, values, [-1, *[2, 3][: rank - 1]] if fixed else [-1] * rank, shards)
    if shards > 1:
        path = path.with_name("ds0")
    ids = data.draw(st.lists(st.integers(0, 599), min_size=1, max_size=300))
    built: list[object] = []
    original = value_index.build_value_index

    def counting(*args: object) -> object:
        built.append(original(*args))  # type: ignore[arg-type]
        return built[-1]

    with (
        mock.patch.object(dataset_reader, "GROUPED_MIN_ROWS", 1),
        mock.patch("mrecord.storage.shard.build_value_index", counting),
        DatasetReader.open(path) as reader,
    ):
        reader.read_rows(np.arange(600))  # every chunk checked
        got = reader.read_rows(ids).columns["a"]
        assert built and built[0] is not None, "the read did not use the value index"
        assert isinstance(got, list)
        maps = [shard.file_bytes for shard in reader.shards]
        for k, (i, value) in enumerate(zip(ids, got, strict=True)):
            np.testing.assert_array_equal(value, values[i])
            assert value.shape == values[i].shape and value.flags.writeable
            assert not any(np.shares_memory(value, file_map) for file_map in maps)
            for other in got[:k]:
                assert not np.shares_memory(value, other)


def test_no_index_where_every_read_checks_its_chunks_or_chunks_are_compressed(
    tmp_path: Path,
) -> None:
    """``verify="always"`` checks each read's chunks: no index skips that. A compressed
    column has no plain values to point at."""
    values = _values(np.random.default_rng(1), 300, 2, "float32")
    _write(tmp_path / "plain", values, [-1, 2])
    _write(tmp_path / "zstd", values, [-1, 2], compression="zstd")
    with DatasetReader.open(tmp_path / "plain", verify="always") as reader:
        reader.read_rows(np.arange(300))
        assert reader.shards[0].value_index(reader.shards[0].field_index("a")) is None
    with DatasetReader.open(tmp_path / "zstd") as reader:
        reader.read_rows(np.arange(300))
        got = reader.read_rows(np.arange(300)[::-1]).columns["a"]
        assert reader.shards[0].value_index(reader.shards[0].field_index("a")) is None
        assert isinstance(got, list)
        for i, value in zip(range(299, -1, -1), got, strict=True):
            np.testing.assert_array_equal(value, values[i])


def test_an_index_larger_than_its_share_of_the_column_is_not_built(tmp_path: Path) -> None:
    """Values of a byte: an index of 12 bytes a row would outweigh them."""
    values = [np.zeros((1,), np.uint8) for _ in range(2000)]
    _write(tmp_path / "ds", values, [-1])
    with DatasetReader.open(tmp_path / "ds") as reader:
        reader.read_rows(np.arange(2000))
        shard = reader.shards[0]
        assert shard.all_verified(shard.field_index("a"))
        assert shard.value_index(shard.field_index("a")) is None


def test_a_damaged_chunk_is_never_indexed(tmp_path: Path) -> None:
    """The index waits for every chunk's check: a damaged one raises ChecksumError on
    the read that meets it, and no later read locates values through an index."""
    values = _values(np.random.default_rng(2), 400, 2, "float32")
    _write(tmp_path / "ds", values, [-1, 2])
    shard_path = tmp_path / "ds"
    with DatasetReader.open(shard_path) as reader:
        shard = reader.shards[0]
        col = shard.field_index("a")
        offset = (
            int(shard.meta.chunks[3, col]["offset"]) + int(shard.meta.chunks[3, col]["length"]) - 1
        )
    raw = bytearray(shard_path.read_bytes())
    raw[offset] ^= 0xFF
    shard_path.write_bytes(bytes(raw))
    with DatasetReader.open(shard_path) as reader:
        with pytest.raises(ChecksumError):
            reader.read_rows(np.arange(400))
        shard = reader.shards[0]
        assert shard.value_index(shard.field_index("a")) is None
        with pytest.raises(ChecksumError):
            reader.read_rows(np.arange(400)[::-1].copy())
