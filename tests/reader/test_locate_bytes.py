"""``DatasetReader.locate_bytes``: the places it hands out hold exactly the values
``read_rows`` reads, compressed values are marked -1, and damaged chunks are refused."""

from __future__ import annotations

import mmap
import os
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


_BIG = 40_000  # values of a chunk with a CRC-32C each, checked one by one (BY_VALUE_MIN_BYTES)


def _big_values(path: Path) -> list[tuple[int, int]]:
    """Ten pages of eight 40 KB values; each page's value byte ranges."""
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.set_page_size(8 * _BIG)
        writer.write_raw_data([{"blob": bytes([i]) * _BIG} for i in range(80)])
    with DatasetReader.open(path, verify="never") as reader:
        _, offsets, lengths = reader.locate_bytes(list(range(80)), "blob")
    return list(zip(offsets.tolist(), lengths.tolist(), strict=True))


def test_one_value_of_a_cold_chunk_is_read_alone_to_be_located(tmp_path: Path) -> None:
    """A same-host reader of ``mrecord serve`` in a random order asks for a few rows of
    each chunk: ``locate_bytes`` checked each chunk whole first, so a row of 100 KB
    cost its 1 MiB chunk: with the server in a 300 MB memory group over 2.4 GB of
    images, 146 rows/s where HTTP reads 6,727. A chunk with a CRC-32C per value (format
    1.3) now has just the rows asked read and checked."""
    path = tmp_path / "big.mrecord"
    ranges = _big_values(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        with DatasetReader.open(path) as reader:
            shard = reader.shards[0]
            shard.mm.madvise(mmap.MADV_DONTNEED)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if any(pages is None or pages.any() for pages in _resident(shard, ranges)):
                pytest.skip(f"this file system keeps {path} in memory (tmpfs?)")
            where = reader.locate_bytes([19], "blob")  # page 2, slot 3
            resident = _resident(shard, ranges)
            value = reader.read_rows([19], columns=["blob"]).columns["blob"][0]
    finally:
        os.close(fd)
    assert (where[1][0], where[2][0]) == ranges[19]
    assert value == bytes([19]) * _BIG
    assert resident[19].all()  # the value asked for was read (and checked)
    # Nor any other row of its chunk or the chunks beside it: no page but those it
    # shares with row 19 (the last chunk's rows lie by the trailer, read at open).
    others = [row for row in range(72) if row != 19 and resident[row][1:-1].any()]
    assert others == []


def test_a_damaged_value_is_refused_and_its_neighbours_located(tmp_path: Path) -> None:
    """Checked one by one, a damaged value still never gets a place; an intact row of
    the same chunk does (as ``read_rows`` reads it)."""
    path = tmp_path / "big.mrecord"
    ranges = _big_values(path)
    data = bytearray(path.read_bytes())
    data[ranges[21][0] + 100] ^= 0x01
    path.write_bytes(bytes(data))
    for verify in ("once", "always"):
        with DatasetReader.open(path, verify=verify) as reader:
            assert reader.locate_bytes([20], "blob")[1].tolist() == [ranges[20][0]]
            with pytest.raises(ChecksumError, match="row 21"):
                reader.locate_bytes([20, 21], "blob")
    with DatasetReader.open(path, verify="never") as reader:
        assert reader.locate_bytes([21], "blob")[1].tolist() == [ranges[21][0]]


def _resident(shard: ShardFile, ranges: list[tuple[int, int]]) -> list[np.ndarray]:
    """Each value's pages: in the page cache or not (``mincore``)."""
    from mrecord.storage.readahead import resident_pages

    found = [resident_pages(shard, offset, length) for offset, length in ranges]
    return [np.zeros(1, dtype=bool) if pages is None else pages.astype(bool) for pages in found]
