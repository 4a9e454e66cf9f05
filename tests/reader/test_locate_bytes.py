"""``DatasetReader.locate_bytes``: the places it hands out hold exactly the values
``read_rows`` reads, compressed values are marked -1, and damaged chunks are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.errors import ChecksumError, RowIndexError, SchemaError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import ShardFile

ROWS = 300


def _value(i: int) -> bytes:
    return bytes([i % 251]) * (i * 37 % 700) + i.to_bytes(4, "little")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shards; ``plain`` stored as it is, ``packed`` compressed with zstd."""
    path = tmp_path_factory.mktemp("locate") / "d"
    with FileWriter(path, shard_num=3) as writer:
        writer.add_schema(
            {
                "i": {"type": "int64"},
                "plain": {"type": "bytes"},
                "packed": {"type": "bytes", "compression": "zstd"},
            }
        )
        writer.set_page_size(4096)
        writer.write_raw_data(
            [{"i": i, "plain": _value(i), "packed": _value(i) * 3} for i in range(ROWS)]
        )
    return path.with_name("d0")


@settings(max_examples=30, deadline=None)
@given(ids=st.lists(st.integers(0, ROWS - 1), max_size=80))
def test_places_hold_the_values_read_rows_reads(dataset: Path, ids: list[int]) -> None:
    with DatasetReader.open(dataset) as reader:
        files = [path.read_bytes() for path in reader.files]
        shard, offset, length = reader.locate_bytes(ids, "plain")
        expected = reader.read_rows(ids, columns=["plain"]).columns["plain"]
    assert shard.dtype == offset.dtype == length.dtype == np.int64
    assert len(shard) == len(ids)
    for k, value in enumerate(expected):
        assert shard[k] >= 0  # stored plain: every value has a place
        got = files[shard[k]][offset[k] : offset[k] + length[k]]
        assert got == value


def test_compressed_values_are_marked_to_be_read(dataset: Path) -> None:
    ids = [5, 150, 299, 5]
    with DatasetReader.open(dataset) as reader:
        shard, _, length = reader.locate_bytes(ids, "packed")
        values = reader.read_rows(ids, columns=["packed"]).columns["packed"]
    assert shard.tolist() == [-1, -1, -1, -1]
    assert length.tolist() == [len(v) for v in values]


def test_bad_arguments_say_what_is_wrong(dataset: Path) -> None:
    with DatasetReader.open(dataset) as reader:
        with pytest.raises(RowIndexError, match="300"):
            reader.locate_bytes([1, ROWS], "plain")
        with pytest.raises(SchemaError, match="'i' is"):
            reader.locate_bytes([1], "i")
        with pytest.raises(SchemaError, match="nope"):
            reader.locate_bytes([1], "nope")
        empty = reader.locate_bytes([], "plain")
    assert [len(a) for a in empty] == [0, 0, 0]


def test_a_damaged_chunk_is_refused_not_located(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with FileWriter(path) as writer:
        writer.add_schema({"i": {"type": "int64"}, "raw": {"type": "bytes"}})
        writer.set_page_size(1024)
        writer.write_raw_data([{"i": i, "raw": bytes(200)} for i in range(60)])
    with ShardFile(path) as shard:
        rec = shard.meta.chunks[2, 1].copy()
        damaged_row = int(shard.page_starts[2])
    data = bytearray(path.read_bytes())
    data[int(rec["offset"]) + 40] ^= 0x10
    path.write_bytes(bytes(data))
    for verify in ("once", "always"):
        with DatasetReader.open(path, verify=verify) as reader:
            assert reader.locate_bytes([0], "raw")[0].tolist() == [0]  # page 0 is intact
            with pytest.raises(ChecksumError):
                reader.locate_bytes([damaged_row], "raw")
