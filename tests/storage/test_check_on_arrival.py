"""Checksums without a second pass (issue 23): a cold read of values whose chunks still need
their CRC-32C reads each chunk from the disk once, checks it in the buffer it landed in, and
takes the values from there; before, the check read the chunk and the values were read again.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

import mrecord.format.value_crcs as value_crcs
import mrecord.storage.readahead as readahead
from mrecord import DatasetReader, FileWriter
from mrecord.errors import ChecksumError
from mrecord.storage.verified import clear_verified

ROWS = 40


@pytest.fixture(autouse=True)
def _whole_chunk_checksums(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about chunks checked whole: their files get no CRC per value
    (format 1.3; those are tests/storage/test_value_checks.py's)."""
    monkeypatch.setattr(value_crcs, "VALUE_CRC_MIN_BYTES", 1 << 62)


def _value(i: int) -> bytes:
    """Row i's value: 40-48 KB (above DIRECT_MIN_BYTES), different in every row."""
    return i.to_bytes(4, "little") * ((40_000 + 97 * i) // 4)


def _write(path: Path, page_size: int) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(page_size)
        writer.write_raw_data([{"id": i, "blob": _value(i)} for i in range(ROWS)])


def _chunks(reader: DatasetReader) -> list[tuple[int, int]]:
    shard = reader.shards[0]
    col = shard.field_index("blob")
    column = shard.meta.chunks[:, col]
    return list(zip(column["offset"].tolist(), column["length"].tolist(), strict=True))


@pytest.mark.parametrize("beyond_memory", [True, False])
def test_a_cold_first_read_reads_each_chunk_once(
    tmp_path: Path,
    cold: None,
    preads: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
    beyond_memory: bool,
) -> None:
    """One value per chunk (pages of 32 KiB hold one 40 KB row): the chunks are read once
    each, whether the values go by direct I/O (beyond memory) or through the page cache."""
    path = tmp_path / "d.mrecord"
    _write(path, 32 << 10)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: beyond_memory)
    ids = np.random.default_rng(0).permutation(ROWS)
    with DatasetReader.open(path, verify="once") as reader:
        chunks = _chunks(reader)
        assert len(chunks) == ROWS  # one row per page
        preads.clear()
        for as_arrays in (True, False):
            block = reader.read_rows(ids[:20] if as_arrays else ids[20:], bytes_as_arrays=as_arrays)
            want = ids[:20] if as_arrays else ids[20:]
            assert [bytes(v) for v in block.columns["blob"]] == [_value(int(i)) for i in want]
        assert reader.shards[0].all_verified(reader.shards[0].field_index("blob"))
    read = sum(n for _, n in preads)
    stored = sum(length for _, length in chunks)
    # Each chunk once (direct reads round out to whole pages: at most a page more each);
    # checking them first and reading the values again read twice as much.
    assert stored <= read <= stored + ROWS * 8192, (read, stored)


def test_values_of_one_chunk_in_a_block_read_it_once(
    tmp_path: Path, cold: None, preads: list[tuple[int, int]]
) -> None:
    """Pages of 1 MiB hold ~24 rows: a block of 6 rows of one chunk reads that chunk once."""
    path = tmp_path / "d.mrecord"
    _write(path, 1 << 20)
    with DatasetReader.open(path, verify="once") as reader:
        chunks = _chunks(reader)
        offset, length = chunks[0]
        ids = [5, 0, 17, 3, 11, 2]
        preads.clear()
        block = reader.read_rows(ids)
        assert list(block.columns["blob"]) == [_value(i) for i in ids]
    # (the small id chunk next to it is checked by its own read)
    mine = [n for at, n in preads if offset - 4096 < at < offset + length and n > 4096]
    assert len(mine) == 1 and sum(mine) >= length, (mine, length)


def test_chunks_longer_than_the_arrival_buffer_are_checked_in_pieces(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk above ARRIVAL_MAX_BYTES is checked the bounded-memory way; same values, and
    damage still raises."""
    path = tmp_path / "d.mrecord"
    _write(path, 1 << 20)
    monkeypatch.setattr(readahead, "ARRIVAL_MAX_BYTES", 1000)
    ids = np.random.default_rng(1).permutation(ROWS)
    with DatasetReader.open(path, verify="once") as reader:
        block = reader.read_rows(ids)
        assert list(block.columns["blob"]) == [_value(int(i)) for i in ids]


@pytest.mark.parametrize("verify", ["once", "always"])
@pytest.mark.parametrize("limit", [readahead.ARRIVAL_MAX_BYTES, 1000])
def test_a_damaged_value_checked_on_arrival_raises_and_is_never_handed_out(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch, verify: str, limit: int
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, 32 << 10)
    with DatasetReader.open(path) as reader:
        offset, length = _chunks(reader)[7]
    data = bytearray(path.read_bytes())
    data[offset + length - 5] ^= 0x01  # inside row 7's value
    path.write_bytes(bytes(data))
    clear_verified()
    monkeypatch.setattr(readahead, "ARRIVAL_MAX_BYTES", limit)
    with DatasetReader.open(path, verify=verify) as reader:
        good = reader.read_rows([1, 2, 3])  # other chunks are fine
        assert list(good.columns["blob"]) == [_value(i) for i in (1, 2, 3)]
        with pytest.raises(ChecksumError, match=r"page 7, field 'blob'"):
            reader.read_rows([4, 7, 9])
        col = reader.shards[0].field_index("blob")
        assert not reader.shards[0].verified_chunks(np.array([7]), col)[0]
        with pytest.raises(ChecksumError):
            reader.read_rows([7])  # still damaged on the next read


def test_chunks_a_block_shares_go_through_the_page_cache_beyond_memory(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond memory a random order's chunks are read direct (their other rows come much
    later); a block that takes a few rows of each chunk, shuffled (Shuffle.BLOCK), reads
    the chunks it does not take whole through the page cache, where the next blocks find
    them, and the chunks it takes whole direct; a block in file order reads direct."""
    import mrecord.reader.dataset_reader as dataset_reader

    path = tmp_path / "d.mrecord"
    _write(path, 128 << 10)  # 4 rows a page
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    # the path without the chunk buffers (MRECORD_CHUNK_BUFFERS=0, and the reads they do
    # not take); with them a block-local read takes whole chunks (test_chunk_buffers.py)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    calls: list[tuple[str, list[int], bool]] = []
    real = readahead.read_checked
    real_in_place = readahead.read_checked_in_place

    def spy(
        shard: object, col: int, chunks: list[tuple[int, list[object]]], direct: bool, *rest: int
    ) -> list[int]:
        calls.append(("copied", sorted(page for page, _ in chunks), direct))
        return real(shard, col, chunks, direct, *rest)  # type: ignore[arg-type]

    def spy_in_place(
        shard: object, col: int, chunks: list[tuple[int, object]], direct: bool, *rest: int
    ) -> list[int]:
        calls.append(("in place", sorted(page for page, _ in chunks), direct))
        return real_in_place(shard, col, chunks, direct, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset_reader, "read_checked", spy)
    monkeypatch.setattr(dataset_reader, "read_checked_in_place", spy_in_place)
    with DatasetReader.open(path, verify="once") as reader:
        pages = reader.shards[0].page_starts_list
        assert pages[:5] == [0, 4, 8, 12, 16]
        spread = [0, 17, 26, 39]  # one row of each of four chunks: a random order
        shared = [4, 9, 12, 5, 13, 8, 14, 15]  # two rows of pages 1 and 2, all of page 3
        in_order = [28, 29, 30, 31, 32, 33]  # shuffle=False: page 7 whole, page 8 begun
        for ids in (spread, shared, in_order):
            block = reader.read_rows(ids)
            assert list(block.columns["blob"]) == [_value(i) for i in ids]
    nothing: list[tuple[str, list[int], bool]] = [("copied", [], False), ("copied", [], True)]
    calls = [call for call in calls if call not in nothing]
    assert calls[0] == ("copied", [0, 4, 6, 9], True)
    # a chunk taken whole is read direct into the block's buffer, the others through the
    # page cache
    assert calls[1:3] == [("copied", [1, 2], False), ("in place", [3], True)]
    # In file order the next block takes the rest of page 8 right away: direct, as the
    # page cache filled by a sequential epoch is reclaimed at a high cost in a memory group.
    assert calls[3:] == [("copied", [8], True), ("in place", [7], True)]


def test_chunks_taken_whole_are_read_into_the_blocks_buffer_not_copied(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In file order beyond memory each chunk is taken whole: it is read direct into the
    block's own buffer and checked there, each value a view of where the read put it (its
    place in a page the same as in the file), where before it was read into an I/O
    thread's buffer and every value copied out (a third of a file-order epoch's CPU)."""
    import mrecord.reader.dataset_reader as dataset_reader

    path = tmp_path / "d.mrecord"
    _write(path, 128 << 10)  # 4 rows a page
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    ids = list(range(4, 16))  # pages 1-3, whole
    with DatasetReader.open(path, verify="once") as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        block = reader.read_rows(ids, bytes_as_arrays=True)
        values = list(block.columns["blob"])
        assert [bytes(v) for v in values] == [_value(i) for i in ids]
        assert shard.verified_chunks(np.array([1, 2, 3]), col).all()
        for row, value in zip(ids, values, strict=True):
            page = row // 4
            head = shard.parse_head(page, col)
            assert head is not None
            at = shard.chunk_place(page, col)[0] + head.data_start + head.offsets[row % 4]
            assert value.ctypes.data % mmap.PAGESIZE == at % mmap.PAGESIZE, row
