"""The head index (format 1.4, issue 23): a copy of every value table and head of a shard,
stored together after the pages, so that a random first epoch reads a chunk's head with
the others in one request instead of one small request per chunk before its value.

Expected regions are cut from the file's own bytes in front of each chunk (located from
the chunk directory by this test) and their CRCs computed with the ``crc32c`` package,
never by mrecord's head index code.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mrecord.writer.shard_writer as shard_writer
from mrecord import DatasetReader, FileWriter
from mrecord.format.layout import HEADER_SIZE
from mrecord.format.metadata import ShardMetadata
from mrecord.maintenance.verify import verify_dataset
from mrecord.storage.readahead import hint_heads
from mrecord.storage.shard import ShardFile
from mrecord.storage.shard_output import PageRun, assemble_shard, write_tail
from mrecord.storage.verified import clear_verified

ROWS = 60


def _blob(i: int) -> bytes:
    return i.to_bytes(4, "little") * ((40_000 + 83 * i) // 4)  # 40-45 KB, each different


def _array(i: int) -> np.ndarray:
    return np.full((i % 5 + 300, 2), i, dtype=np.float32)


def _rows(lo: int, hi: int) -> list[dict[str, object]]:
    return [
        {"id": i, "blob": _blob(i), "arr": _array(i), "packed": bytes(5000), "tag": f"t{i}"}
        for i in range(lo, hi)
    ]


def _write(path: Path, rows: int = ROWS, page_size: int = 200_000) -> None:
    with FileWriter(path) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "arr": {"type": "float32", "shape": [-1, 2]},
                "packed": {"type": "bytes", "compression": "zstd"},
                "tag": {"type": "string"},  # values under 1 KB: no table
            }
        )
        writer.set_page_size(page_size)
        writer.write_raw_data(_rows(0, rows))


def _expected_region(path: Path, first_page: int, stop_page: int) -> bytes:
    """As docs/FORMAT.md says, in directory order: each tabled chunk's table and head as
    they lie in the file, and each small chunk (at most 4,096 bytes and a 64th of its
    page's stored bytes) whole."""
    data = path.read_bytes()
    with ShardFile(path, verify="never") as shard:
        meta = shard.meta
    out = b""
    for page in range(first_page, stop_page):
        n = int(meta.page_rows[page])
        page_bytes = int(meta.chunks[page]["length"].sum())
        for col, field in enumerate(meta.schema.fields):
            record = meta.chunks[page, col]
            start, length = int(record["offset"]), int(record["length"])
            if int(record["flags"]) & 1:
                ndim = 2 if field.name == "arr" else 0
                out += data[start - 4 * (n + 1) : start + 8 * (n + 1) + 8 * n * ndim]
            elif length <= 4096 and 64 * length <= page_bytes:
                out += data[start : start + length]
    return out


def _head_problems(path: Path) -> list[str]:
    """What ``mrecord verify`` finds wrong with the data file (the page runs assembled
    here have no ``.db``: that one problem is not this test's)."""
    return [p for p in verify_dataset(path).problems if ".db' is missing" not in p]


def test_a_new_shard_holds_every_table_and_head_in_one_region(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        meta = shard.meta
        assert meta.format_version == (1, 4)
        assert meta.num_pages > 4
        tabled = meta.chunks["flags"] & 1
        assert tabled[:, 1].all() and tabled[:, 2].all()  # blob, arr
        assert not tabled[:, [0, 3, 4]].any()  # fixed, compressed, small values
        assert (meta.chunks["length"][:, [0, 3, 4]] <= 4096).all()  # copied whole
        [entry] = meta.head_index
    data = path.read_bytes()
    expected = _expected_region(path, 0, meta.num_pages)
    assert entry.first_page == 0
    assert data[entry.offset : entry.offset + entry.length] == expected
    assert entry.crc32 == crc32c.crc32c(expected)
    pages_end = int((meta.chunks["offset"] + meta.chunks["length"]).max())
    assert pages_end <= entry.offset  # after the pages, before the metadata


def test_an_append_adds_an_entry_for_its_pages(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, rows=30)
    with ShardFile(path) as shard:
        before = shard.meta.num_pages
    with FileWriter.open_for_append(path) as writer:
        writer.write_raw_data(_rows(30, 50))
    with ShardFile(path) as shard:
        meta = shard.meta
        first, second = meta.head_index
    data = path.read_bytes()
    assert (first.first_page, second.first_page) == (0, before)
    assert data[first.offset : first.offset + first.length] == _expected_region(path, 0, before)
    assert data[second.offset : second.offset + second.length] == _expected_region(
        path, before, meta.num_pages
    )
    clear_verified()
    with DatasetReader.open(path) as reader:
        got = reader.read_rows(np.arange(50)[::-1], columns=["blob", "arr"])
    assert list(got.columns["blob"]) == [_blob(i) for i in range(49, -1, -1)]
    assert all(
        np.array_equal(a, _array(i))
        for a, i in zip(got.columns["arr"], range(49, -1, -1), strict=True)
    )


def test_a_cold_read_asks_the_disk_for_no_head_the_index_holds(tmp_path: Path) -> None:
    """What a lookahead hints before a block (hint_heads) is the reads its reading thread
    would wait on: with the index none for the heads; without it (1.3) one a chunk."""
    indexed, plain = tmp_path / "i.mrecord", tmp_path / "p.mrecord"
    _write(indexed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shard_writer, "HEAD_INDEX", False)
        _write(plain)
    clear_verified()
    with ShardFile(indexed) as a, ShardFile(plain) as b:
        assert not b.meta.head_index
        pages = np.arange(a.meta.num_pages)
        assert hint_heads(b, pages, ["blob", "arr"]) > 0
        assert hint_heads(a, pages, ["blob", "arr"]) == 0
        assert a.cached_heads(1)(2) is not None  # parsed from the index on the way
    for path in (indexed, plain):
        clear_verified()
        order = np.random.default_rng(3).permutation(ROWS)
        with DatasetReader.open(path) as reader:
            got = reader.read_rows(order, columns=["blob"])
        assert list(got.columns["blob"]) == [_blob(int(i)) for i in order]


def test_a_damaged_index_is_ignored_by_readers_and_reported_by_verify(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        [entry] = shard.meta.head_index
    raw = bytearray(path.read_bytes())
    raw[entry.offset + 5] ^= 0xFF  # the first table's first value CRC, in the copy only
    path.write_bytes(bytes(raw))
    clear_verified()
    with ShardFile(path) as shard:
        assert shard.head_index_intact() is False
        assert shard.parse_indexed([0], 1) == [0]  # nothing taken from it
    order = np.random.default_rng(4).permutation(ROWS)
    with DatasetReader.open(path) as reader:
        got = reader.read_rows(order, columns=["blob", "arr"])
    assert list(got.columns["blob"]) == [_blob(int(i)) for i in order]
    report = verify_dataset(path)
    assert len(report.problems) == 1
    assert "head index" in report.problems[0] and "damaged" in report.problems[0]


def _written_to_forge(path: Path) -> tuple[ShardMetadata, int, bytearray]:
    """Write the test dataset at ``path``: its metadata, where the metadata starts, and
    the file's bytes to change (then :func:`_forge`)."""
    _write(path)
    with ShardFile(path) as shard:
        return shard.meta, shard._trailer.metadata_offset, bytearray(path.read_bytes())


def _forge(path: Path, raw: bytearray, meta: ShardMetadata, metadata_offset: int) -> None:
    """Write ``raw``'s pages and changed index region back to ``path`` with metadata whose
    head index entry has the region's new CRC: an index consistent in itself."""
    [entry] = meta.head_index
    region = bytes(raw[entry.offset : entry.offset + entry.length])
    forged = meta.with_pages(
        meta.page_rows, meta.chunks, head_index=(entry._replace(crc32=crc32c.crc32c(region)),)
    )
    path.write_bytes(bytes(raw[:metadata_offset]))
    fd = os.open(path, os.O_RDWR)
    try:
        write_tail(fd, metadata_offset, metadata_offset, forged)
    finally:
        os.close(fd)


def test_verify_reports_an_index_that_disagrees_with_the_chunks(tmp_path: Path) -> None:
    """An index whose CRC matches but whose copy differs from the chunk (a writer's bug)
    is named by ``mrecord verify``; the pages are still checked against their own tables."""
    path = tmp_path / "d.mrecord"
    meta, metadata_offset, raw = _written_to_forge(path)
    [entry] = meta.head_index
    first_copy = int(meta.chunks[0, 0]["length"])  # page 0's "id" chunk, copied whole
    raw[entry.offset + first_copy + 5] ^= 0xFF  # then the blob's table: row 0's CRC
    _forge(path, raw, meta, metadata_offset)
    clear_verified()
    report = verify_dataset(path)
    assert len(report.problems) == 1, report.problems
    assert "page 0, field 'blob'" in report.problems[0]
    assert "differs from the chunk's own" in report.problems[0]


def test_pages_assembled_from_other_files_get_one_index(tmp_path: Path) -> None:
    """The Ray sink and a parallel conversion build a shard from page runs of finished
    files (``assemble_shard``): the new file's index holds the runs' tables and heads."""
    a, b = tmp_path / "a.mrecord", tmp_path / "b.mrecord"
    _write(a, page_size=150_000)
    _write(b, page_size=250_000)
    target = tmp_path / "t.mrecord"
    with ShardFile(a) as sa, ShardFile(b) as sb:
        runs = [PageRun(a, sa.meta, 1, 4), PageRun(b, sb.meta, 0, 2)]
        assemble_shard(target, runs, sa.meta)
    with ShardFile(target) as shard:
        [entry] = shard.meta.head_index
        pages = shard.meta.num_pages
    data = target.read_bytes()
    assert data[entry.offset : entry.offset + entry.length] == _expected_region(target, 0, pages)
    assert _head_problems(target) == []


def test_a_whole_file_renamed_into_place_keeps_its_index(tmp_path: Path) -> None:
    a = tmp_path / "a.mrecord"
    _write(a)
    target = tmp_path / "t.mrecord"
    with ShardFile(a) as sa:
        meta = sa.meta
    assemble_shard(target, [PageRun(a, meta, 0, meta.num_pages)], meta)
    with ShardFile(target) as shard:
        assert shard.meta.head_index == meta.head_index
        assert shard.head_index_intact() is True
    assert _head_problems(target) == []


@pytest.mark.parametrize(
    "entries",
    [
        [[0, 10, 5, 0]],  # inside the header
        [[0, HEADER_SIZE, 1 << 40, 0]],  # past the pages
        [[2, HEADER_SIZE, 4, 0]],  # a first page past the shard's one page
        [[0, HEADER_SIZE, 4, 0], [0, HEADER_SIZE, 4, 0]],  # first pages not increasing
        [[0, HEADER_SIZE, 4]],  # three numbers
        [[0, HEADER_SIZE, 4, -1]],  # not a CRC
    ],
)
def test_an_entry_outside_the_pages_or_malformed_is_refused(
    tmp_path: Path, entries: list[list[int]]
) -> None:
    import msgpack

    from mrecord.errors import MetadataError

    path = tmp_path / "d.mrecord"
    _write(path, rows=4)
    with ShardFile(path) as shard:
        meta = shard.meta
        end = shard._trailer.metadata_offset
    assert meta.num_pages == 1
    doc = msgpack.unpackb(meta.encode(), raw=False)
    doc["head_index"] = entries
    with pytest.raises(MetadataError, match="head_index"):
        ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), end)


def test_a_damaged_table_in_front_of_its_chunk_is_named_beside_the_intact_copy(
    tmp_path: Path,
) -> None:
    """The file's own table of page 0 damaged (row 2's CRC), its copy in the index
    intact: ``mrecord verify`` names both the copy that no longer matches and row 2 (the
    pages are checked against their own tables); a reader checks row 2's intact value
    against the intact copy and serves it."""
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        offset = int(shard.meta.chunks[0, 1]["offset"])
        n = int(shard.meta.page_rows[0])
    data = bytearray(path.read_bytes())
    data[offset - 4 * (n + 1) + 4 * 3] ^= 0x80
    path.write_bytes(bytes(data))
    clear_verified()
    problems = verify_dataset(path).problems
    assert len(problems) == 2, problems
    assert "page 0, field 'blob': the head index's copy" in problems[0]
    assert "checksum mismatch in page 0, field 'blob', row 2 " in problems[1]
    with DatasetReader.open(path, verify="always") as reader:
        assert list(reader.read_rows([2], columns=["blob"]).columns["blob"]) == [_blob(2)]


def test_the_warm_test_sample_gives_the_values_own_spans_from_the_index(
    tmp_path: Path,
) -> None:
    """row_ranges(parse_heads=False) reads no head; with the index it needs none to know
    where the rows' values lie: the sample is their own spans, not a page standing in."""
    from mrecord.storage.readahead import row_ranges

    path = tmp_path / "d.mrecord"
    _write(path, page_size=300_000)
    clear_verified()
    with ShardFile(path, verify="never") as shard:
        col = shard.field_index("blob")
        pages = np.array([1, 2], dtype=np.int64)
        slots = np.array([0, 1], dtype=np.int64)
        sampled = row_ranges(shard, pages, slots, ["blob"], parse_heads=False)
        for p, s in zip(pages.tolist(), slots.tolist(), strict=True):
            offset = shard.chunk_place(p, col)[0]
            head = shard.cached_heads(col)(p)
            assert head is not None
            lo = offset + head.data_start + head.offsets[s]
            hi = offset + head.data_start + head.offsets[s + 1]
            assert any(a <= lo and hi <= a + n for a, n in sampled)
        assert sum(n for _, n in sampled) <= 2 * len(_blob(ROWS)) + 4 * 4096  # 2 values


def test_a_small_chunk_is_read_from_its_copy_in_the_index(tmp_path: Path) -> None:
    """The "id" column's chunks (8 bytes a row beside ~200 KB of blobs a page) are copied
    whole: a read takes the ids from the copies (checked by each chunk's CRC), asks the
    disk for none of them, and so serves them even when the file's own chunk is damaged,
    which a read under ``verify="always"`` (the file's bytes, every read) still reports."""
    from mrecord.errors import ChecksumError
    from mrecord.storage.readahead import row_ranges

    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        offset = int(shard.meta.chunks[1, 0]["offset"])
        first = int(shard.page_starts[1])
        ids = np.arange(shard.meta.num_rows)
        pages = np.searchsorted(shard.page_starts, ids, side="right") - 1
        slots = ids - shard.page_starts[pages]
        assert row_ranges(shard, pages, slots, ["id"]) == []  # nothing to read for ids
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01  # the file's chunk of page 1, first row's id
    path.write_bytes(bytes(raw))
    clear_verified()
    order = np.random.default_rng(5).permutation(ROWS)
    with DatasetReader.open(path) as reader:
        assert list(reader.read_rows(order, columns=["id"]).columns["id"]) == order.tolist()
        assert reader.read_row(first)["id"] == first
    clear_verified()
    with (
        DatasetReader.open(path, verify="always") as reader,
        pytest.raises(ChecksumError, match="page 1, field 'id'"),
    ):
        reader.read_rows(order, columns=["id"])


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=40),
    page_size=st.sampled_from([2_000, 20_000, 300_000]),
    appended=st.integers(0, 12),
)
def test_any_dataset_indexes_what_lies_in_its_file_and_reads_the_same(
    sizes: list[int], page_size: int, appended: int
) -> None:
    """Any row sizes (values over and under the 1 KiB that gets a table), page sizes (a
    page's small chunks copied or not) and an append: every region is the documented
    bytes of its pages, and a random read with the index (heads and ids from it) gives
    what a read of the same rows written without one gives."""

    def row(i: int, n: int) -> dict[str, object]:
        return {"id": i, "blob": bytes([i % 251]) * n, "tag": f"r{i}"}

    rows = [row(i, n) for i, n in enumerate(sizes)]
    more = [row(len(rows) + i, 1500 + 37 * i) for i in range(appended)]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {True: Path(tmp) / "i.mrecord", False: Path(tmp) / "p.mrecord"}
        for indexed, path in paths.items():
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(shard_writer, "HEAD_INDEX", indexed)
                with FileWriter(path) as writer:
                    writer.add_schema(
                        {
                            "id": {"type": "int64"},
                            "blob": {"type": "bytes"},
                            "tag": {"type": "string"},
                        }
                    )
                    writer.set_page_size(page_size)
                    writer.write_raw_data(rows)
                if more:
                    with FileWriter.open_for_append(path) as writer:
                        writer.write_raw_data(more)
        with ShardFile(paths[True]) as shard:
            meta = shard.meta
        data = paths[True].read_bytes()
        bounds = [e.first_page for e in meta.head_index] + [meta.num_pages]
        for k, entry in enumerate(meta.head_index):
            expected = _expected_region(paths[True], bounds[k], bounds[k + 1])
            assert data[entry.offset : entry.offset + entry.length] == expected
            assert entry.crc32 == crc32c.crc32c(expected)
        assert sum(e.length for e in meta.head_index) == len(
            _expected_region(paths[True], 0, meta.num_pages)
        )
        order = np.random.default_rng(len(sizes)).permutation(len(rows) + len(more))
        got = {}
        for indexed, path in paths.items():
            clear_verified()
            with DatasetReader.open(path) as reader:
                block = reader.read_rows(order)
                got[indexed] = [list(block.columns[c]) for c in ("id", "blob", "tag")]
        assert got[True] == got[False]
        assert got[True][1] == [(rows + more)[i]["blob"] for i in order]


def test_a_head_copy_that_differs_never_slices_an_intact_chunk(tmp_path: Path) -> None:
    """A forged (or mis-written) index, consistent in itself: page 0's blob head moved by
    one byte, the head's CRC in the copied table and the region's CRC made to match. A
    cold read checks each value against the copy's table and refuses the shifted ones; a
    read that takes the chunk whole (checked by its own CRC) compares the heads first and
    raises, rather than slicing intact bytes in the wrong places."""
    import struct

    from mrecord.errors import ChecksumError, CorruptFileError

    path = tmp_path / "d.mrecord"
    meta, metadata_offset, raw = _written_to_forge(path)
    [entry] = meta.head_index
    n = int(meta.page_rows[0])
    table_at = entry.offset + int(meta.chunks[0, 0]["length"])  # after page 0's id copy
    head_at = table_at + 4 * (n + 1)
    head = bytearray(raw[head_at : head_at + 8 * (n + 1)])
    struct.pack_into("<Q", head, 8, struct.unpack_from("<Q", head, 8)[0] + 1)
    raw[head_at : head_at + len(head)] = head
    struct.pack_into("<I", raw, table_at, crc32c.crc32c(bytes(head)))
    _forge(path, raw, meta, metadata_offset)
    clear_verified()
    with DatasetReader.open(path) as reader, pytest.raises(ChecksumError, match="page 0"):
        reader.read_rows([1, 0], columns=["blob"])
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        blob = shard.meta.schema.fields[1]
        assert shard.parse_head(0, 1) is not None  # from the copy
        with pytest.raises(CorruptFileError, match="head index's copy of its head differs"):
            shard.var_page(0, blob)


def test_a_device_error_reading_a_region_is_a_storage_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EIO while ``mrecord verify`` reads a chunk's own head to compare with its copy: a
    typed StorageError naming the file and the bytes, not a bare OSError."""
    import errno

    from mrecord.errors import StorageError

    path = tmp_path / "d.mrecord"
    _write(path)

    def failing(fd: int, n: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    with ShardFile(path) as shard:
        monkeypatch.setattr(os, "pread", failing)
        with pytest.raises(StorageError, match=r"d\.mrecord") as caught:
            shard.read_region(64, 100)
    assert "bytes 64-164" in str(caught.value)


def _heads_of(shard: ShardFile, col: int, pages: list[int]) -> dict[int, object]:
    heads = shard.cached_heads(col)
    return {
        page: (head.offsets, head.data_start, shard._value_tables[(page, col)].tolist())
        for page in pages
        if (head := heads(page)) is not None
    }


def test_heads_parsed_together_are_those_parsed_one_at_a_time(tmp_path: Path) -> None:
    """``parse_indexed`` of many pages takes a bytes column's heads from the index as one
    array: the same heads and value tables as one page at a time, the same pages left to
    be read from their chunks (a copy damaged in itself, a column without tables)."""
    path = tmp_path / "d.mrecord"
    meta, metadata_offset, raw = _written_to_forge(path)
    pages = list(range(meta.num_pages))
    assert len(pages) >= 8 and len(set(meta.page_rows.tolist())) > 1  # two row counts
    [entry] = meta.head_index
    blob = 1
    with ShardFile(path, verify="once") as shard:  # where page 3's blob copy lies
        shard.parse_indexed([3], blob)
        at = shard._index_starts[3][blob] + 4 * (int(meta.page_rows[3]) + 1)
    raw[entry.offset + at + 8] ^= 0x10  # its second offset: the table's head CRC differs
    _forge(path, raw, meta, metadata_offset)
    for col in (blob, 4):  # 4: the strings, no tables
        clear_verified()
        with ShardFile(path, verify="once") as shard:
            left_together = shard.parse_indexed(pages, col)
            together = _heads_of(shard, col, pages)
        clear_verified()
        with ShardFile(path, verify="once") as shard:
            left_alone = [page for page in pages if shard.parse_indexed([page], col)]
            alone = _heads_of(shard, col, pages)
        assert sorted(left_together) == left_alone
        assert together == alone
    assert left_alone == pages  # the strings
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        assert shard.parse_indexed(pages, blob) == [3]


def test_a_fixed_column_from_the_index_is_built_once_and_only_from_intact_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``indexed_column``: every value of a fixed-width column in row order from the
    index's copies of its chunks, built once however many reading threads ask at once;
    None (the file's chunks are read) when one copy differs from its chunk's CRC."""
    import threading

    path = tmp_path / "d.mrecord"
    meta, metadata_offset, raw = _written_to_forge(path)
    clear_verified()
    builds = []
    real = ShardFile._build_indexed_column

    def counted(self: ShardFile, col: int) -> object:
        builds.append(col)
        return real(self, col)

    monkeypatch.setattr(ShardFile, "_build_indexed_column", counted)
    with ShardFile(path, verify="once") as shard:
        got: list[object] = []
        threads = [
            threading.Thread(target=lambda: got.append(shard.indexed_column(0))) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert builds == [0]
    for column in got:
        assert isinstance(column, np.ndarray)
        assert column.tolist() == list(range(ROWS))
    [entry] = meta.head_index
    raw[entry.offset + 8 * 3] ^= 1  # page 0's id copy (first in the region): row 3's id
    _forge(path, raw, meta, metadata_offset)
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        assert shard.indexed_column(0) is None
    with DatasetReader.open(path) as reader:  # and a read takes the intact chunk's value
        assert list(reader.read_rows([3], columns=["id"]).columns["id"]) == [3]


def test_long_strings_heads_parsed_together_read_back(tmp_path: Path) -> None:
    """A string column with values long enough for value tables takes the together path
    too: the same heads as one page at a time, and a cold random read gives the strings
    written."""
    path = tmp_path / "s.mrecord"
    texts = [f"{i:05d}" + "xyz" * (400 + i % 37) for i in range(90)]
    with FileWriter(path) as writer:
        writer.add_schema({"s": {"type": "string"}})
        writer.set_page_size(8_000)
        writer.write_raw_data([{"s": t} for t in texts])
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        assert len(pages) >= 8 and bool(shard.meta.chunks[0, 0]["flags"] & 1)  # tabled
        assert shard.parse_indexed(pages, 0) == []
        together = _heads_of(shard, 0, pages)
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        assert all(not shard.parse_indexed([page], 0) for page in pages)
        alone = _heads_of(shard, 0, pages)
    assert together == alone and len(together) == len(pages)
    clear_verified()
    order = np.random.default_rng(1).permutation(len(texts))
    with DatasetReader.open(path) as reader:
        assert list(reader.read_rows(order).columns["s"]) == [texts[i] for i in order]
