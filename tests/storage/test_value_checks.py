"""A CRC-32C per value (format 1.3, issue 23): a random first epoch beyond memory reads each
value once. Before, a chunk's only checksum covered the whole chunk, so the first value read
from a chunk read all of it, and each later value of that chunk was read again (twice the
dataset from the disk). The expected tables here are computed from the values written, with
the ``crc32c`` package, never by mrecord's own table code.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import crc32c
import msgpack
import numpy as np
import pytest

import mrecord.format.value_crcs as value_crcs
import mrecord.reader.dataset_reader as dataset_reader
from mrecord import DatasetReader, FileWriter
from mrecord.errors import ChecksumError
from mrecord.format.schema import FieldKind
from mrecord.maintenance.verify import verify_dataset
from mrecord.storage.shard import ShardFile
from mrecord.storage.shard_output import PageRun, assemble_shard
from mrecord.storage.verified import clear_verified

ROWS = 48


def _blob(i: int) -> bytes:
    """Row i's bytes: 40-44 KB, different in every row."""
    return i.to_bytes(4, "little") * ((40_000 + 83 * i) // 4)


def _array(i: int) -> np.ndarray:
    return np.full((i % 5 + 300, 2), i, dtype=np.float32)  # 2.4-2.4 KB a value


def _write(path: Path, page_size: int = 1 << 20, rows: int = ROWS) -> None:
    with FileWriter(path) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "name": {"type": "string"},
                "arr": {"type": "float32", "shape": [-1, 2]},
                "packed": {"type": "bytes", "compression": "zstd"},
            }
        )
        writer.set_page_size(page_size)
        writer.write_raw_data(
            [
                {
                    "id": i,
                    "blob": _blob(i),
                    "name": f"row {i}",
                    "arr": _array(i),
                    "packed": bytes(5000),  # compresses: stored zstd, no table
                }
                for i in range(rows)
            ]
        )


def _file_metadata(path: Path) -> dict[str, Any]:
    """The shard's metadata, decoded from the file's bytes as FORMAT.md describes."""
    data = path.read_bytes()
    offset, length = struct.unpack_from("<QQ", data, len(data) - 32)
    doc = msgpack.unpackb(data[offset : offset + length], raw=False)
    assert isinstance(doc, dict)
    return doc


def test_large_values_get_a_crc_each_right_before_their_chunk(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    data = path.read_bytes()
    assert struct.unpack_from("<HH", data, 8) == (1, 4)  # format 1.4 (1.3's tables, and
    doc = _file_metadata(path)  # a head index: tests/storage/test_head_index.py)
    assert doc["format_version"] == [1, 4]
    page_rows = np.frombuffer(doc["page_rows"], dtype="<u4").tolist()
    records = doc["chunks"]
    assert isinstance(records, bytes) and len(records) == 32 * 5 * len(page_rows)
    first = 0
    tabled = {"blob": 0, "arr": 0}
    for page, n in enumerate(page_rows):
        rows = range(first, first + n)
        for col, name in enumerate(["id", "blob", "name", "arr", "packed"]):
            record = records[32 * (5 * page + col) : 32 * (5 * page + col + 1)]
            offset, length, _, crc, codec, flags = struct.unpack_from("<QQQIBB", record)
            assert offset % 64 == 0 and record[30:] == b"\0\0"
            # the chunk's own CRC still covers the whole chunk (a 1.2 reader checks it)
            assert crc32c.crc32c(data[offset : offset + length]) == crc
            if name in ("id", "name", "packed"):  # fixed, 6-byte strings, compressed
                assert flags == 0, (page, name)
                continue
            assert flags == 1 and codec == 0, (page, name)
            tabled[name] += 1
            table = np.frombuffer(data[offset - 4 * (n + 1) : offset], dtype="<u4").tolist()
            values = [_blob(i) if name == "blob" else _array(i).tobytes() for i in rows]
            head_length = 8 * (n + 1) + (16 * n if name == "arr" else 0)
            assert table[0] == crc32c.crc32c(data[offset : offset + head_length])
            assert table[1:] == [crc32c.crc32c(v) for v in values]
        first += n
    assert tabled == {"blob": len(page_rows), "arr": len(page_rows)}


def test_small_values_get_no_table(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"b": {"type": "bytes"}})
        writer.write_raw_data([{"b": bytes(1023)}, {"b": bytes(1024)}])  # 1,023.5 on average
    with ShardFile(path) as shard:
        assert not shard.has_value_crcs(0, 0)
        assert int(shard.meta.chunks[0, 0]["offset"]) == 64  # nothing before the chunk


def test_values_of_1_kib_on_average_get_a_table(tmp_path: Path) -> None:
    """The threshold is the average over the chunk (here all of it in the last value)."""
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"b": {"type": "bytes"}})
        writer.write_raw_data([{"b": b""}, {"b": b"\x07" * 2048}])  # 1,024 on average
    data = path.read_bytes()
    with ShardFile(path) as shard:
        assert shard.has_value_crcs(0, 0)
        offset = int(shard.meta.chunks[0, 0]["offset"])
    assert offset == 128  # 64 bytes of zeros and table (12 bytes) before it
    table = np.frombuffer(data[offset - 12 : offset], dtype="<u4").tolist()
    assert table[1:] == [crc32c.crc32c(b""), crc32c.crc32c(b"\x07" * 2048)]


def _blob_chunks(reader: DatasetReader) -> list[tuple[int, int]]:
    shard = reader.shards[0]
    column = shard.meta.chunks[:, shard.field_index("blob")]
    return list(zip(column["offset"].tolist(), column["length"].tolist(), strict=True))


def test_some_values_of_a_chunk_are_read_alone_and_checked(
    tmp_path: Path, cold: None, preads: list[tuple[int, int]]
) -> None:
    """6 of a 1 MiB chunk's ~24 rows in one block: 6 reads of about their bytes each, not
    the chunk; the chunk is not taken as checked whole."""
    path = tmp_path / "d.mrecord"
    _write(path)
    with DatasetReader.open(path, verify="once") as reader:
        offset, length = _blob_chunks(reader)[0]
        ids = [5, 0, 17, 3, 11, 2]
        preads.clear()
        block = reader.read_rows(ids, columns=["blob"])
        assert list(block.columns["blob"]) == [_blob(i) for i in ids]
        shard = reader.shards[0]
        assert not shard.verified_chunks(np.array([0]), shard.field_index("blob"))[0]
    mine = sorted(n for at, n in preads if offset <= at < offset + length)
    sizes = sorted(len(_blob(i)) for i in ids)
    assert len(mine) == 6, mine
    assert all(s <= n <= s + 8192 for s, n in zip(sizes, mine, strict=True)), (mine, sizes)


@pytest.mark.parametrize("tables", [True, False])
def test_a_random_first_epoch_reads_each_value_once(
    tmp_path: Path,
    cold: None,
    preads: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
    tables: bool,
) -> None:
    """Every row once, in a random order, 8 rows a block, values read around the page
    cache (beyond memory): with a CRC per value the bytes read are about the values'; with
    chunk checksums only (a 1.2 file) each chunk is read whole on its first touch and its
    values again later, about twice as much."""
    if not tables:
        monkeypatch.setattr(value_crcs, "VALUE_CRC_MIN_BYTES", 1 << 62)
    path = tmp_path / "d.mrecord"
    _write(path, rows=96)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    # values read one by one, not the chunk buffers (which a small dataset's chunks all
    # fit: they would read each chunk once, test_chunk_buffers.py)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    order = np.random.default_rng(7).permutation(96)
    with DatasetReader.open(path, verify="once") as reader:
        assert reader.shards[0].has_value_crcs(0, 1) is tables
        chunks = _blob_chunks(reader)
        preads.clear()
        for start in range(0, 96, 8):
            ids = order[start : start + 8]
            block = reader.read_rows(ids, columns=["blob"])
            assert list(block.columns["blob"]) == [_blob(int(i)) for i in ids]
    values = sum(len(_blob(i)) for i in range(96))
    read = sum(got for at, got in preads if any(o - 4096 <= at < o + n for o, n in chunks))
    if tables:
        assert values <= read <= values + 96 * 8192, (read, values)
    else:
        assert read >= 1.5 * values, (read, values)


def test_a_damaged_value_raises_naming_its_row_and_its_neighbours_are_served(
    tmp_path: Path, cold: None
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        head = shard.parse_head(1, col)
        assert head is not None
        row = int(shard.page_starts[1]) + 4
        at = int(shard.meta.chunks[1, col]["offset"]) + head.data_start + head.offsets[4] + 10
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01  # one bit of row `row`'s value
    path.write_bytes(bytes(data))
    for verify in ("once", "always"):
        clear_verified()
        with DatasetReader.open(path, verify=verify) as reader:
            with pytest.raises(ChecksumError) as caught:
                reader.read_rows([row - 1, row], columns=["blob"])
            assert f"page 1, field 'blob', row {row} ({len(_blob(row))} bytes)" in str(caught.value)
            assert str(path) in str(caught.value) and caught.value.page == 1
            got = reader.read_rows([row - 1, row + 1], columns=["blob"]).columns["blob"]
            assert list(got) == [_blob(row - 1), _blob(row + 1)]
    report = verify_dataset(path)
    assert not report.ok
    assert any("page 1, field 'blob'" in p and "checksum mismatch" in p for p in report.problems)


def test_mrecord_verify_finds_a_damaged_value_table(
    tmp_path: Path, without_head_index: None
) -> None:
    """A table entry that disagrees with an intact value: ``mrecord verify`` names the
    row; a reader of that row alone raises (the file is damaged, if not the value); one
    that reads the whole chunk checks it whole and serves the right bytes. (A file with
    a head index has an intact copy of the table there: see
    ``test_a_damaged_table_in_front_of_its_chunk_is_named_beside_the_intact_copy``.)"""
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        offset = int(shard.meta.chunks[0, 1]["offset"])
        n = int(shard.meta.page_rows[0])
    data = bytearray(path.read_bytes())
    data[offset - 4 * (n + 1) + 4 * 3] ^= 0x80  # the CRC of row 2 (entry 3: the head's first)
    path.write_bytes(bytes(data))
    clear_verified()
    report = verify_dataset(path)
    assert [p for p in report.problems if "checksum" in p] == [
        f"{str(path)!r}: checksum mismatch in page 0, field 'blob', row 2 "
        f"({len(_blob(2))} bytes); the file is damaged (`mrecord verify` lists every "
        "damaged page)"
    ]
    with DatasetReader.open(path, verify="always") as reader:
        with pytest.raises(ChecksumError, match="page 0, field 'blob', row 2 "):
            reader.read_rows([2], columns=["blob"])
        got = reader.read_rows(list(range(n)), columns=["blob"]).columns["blob"]
        assert list(got) == [_blob(i) for i in range(n)]


def test_pages_assembled_from_other_files_keep_their_tables(tmp_path: Path) -> None:
    """A parallel conversion or the Ray sink copies page runs of finished shards into one
    (``assemble_shard``): each chunk's table travels with it, chunks stay 64-aligned."""
    a, b = tmp_path / "a.mrecord", tmp_path / "b.mrecord"
    _write(a, page_size=200_000)
    _write(b, page_size=300_000)
    target = tmp_path / "t.mrecord"
    with ShardFile(a) as sa, ShardFile(b) as sb:
        assert sa.meta.num_pages > 3 and sb.meta.num_pages > 2
        runs = [PageRun(a, sa.meta, 1, 3), PageRun(b, sb.meta, 0, 2)]
        expected = [
            int(i)
            for s, lo, hi in ((sa, 1, 3), (sb, 0, 2))
            for i in range(int(s.page_starts[lo]), int(s.page_starts[hi]))
        ]
        assemble_shard(target, runs, sa.meta)
    with ShardFile(target, verify="always") as shard:
        assert shard.meta.num_rows == len(expected)
        assert bool(np.all(shard.meta.chunks["offset"] % 64 == 0))
        blob = shard.meta.schema.fields[1]
        got = []
        for page in range(shard.meta.num_pages):
            assert shard.has_value_crcs(page, 1)
            shard.check_value_table(page, blob)  # raises if a table landed elsewhere
            head, raw = shard.var_page(page, blob)
            got += [
                bytes(raw[head.data_start + x : head.data_start + y])
                for x, y in zip(head.offsets, head.offsets[1:], strict=False)
            ]
    assert got == [_blob(i) for i in expected]


@pytest.mark.parametrize(
    ("col", "why"),
    [(0, "fixed-width"), (4, "compressed"), (1, "no room")],
)
def test_a_table_where_none_can_be_is_refused(tmp_path: Path, col: int, why: str) -> None:
    """Flags set on a fixed-width or compressed chunk, or a table that would start inside
    the header, make the metadata invalid (a damaged or forged directory)."""
    from mrecord.errors import MetadataError
    from mrecord.format.metadata import ShardMetadata

    path = tmp_path / "d.mrecord"
    _write(path)
    doc = _file_metadata(path)
    records = bytearray(doc["chunks"])
    records[32 * col + 29] = 1  # page 0's chunk of field `col`: "a table precedes me"
    if why == "no room":  # page 0's blob chunk moved to byte 64: its table would overlap
        records[32 * col : 32 * col + 8] = struct.pack("<Q", 64)
    doc["chunks"] = bytes(records)
    data_end = path.stat().st_size - 32
    with pytest.raises(MetadataError, match=r"page 0, field '\w+': a value table on a chunk"):
        ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), data_end)
    records[32 * col + 29] = 2  # another bit: ignored (a later minor version's)
    doc["chunks"] = bytes(records)
    if why != "no room":
        ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), data_end)


def _damage_value(path: Path, page: int, slot: int) -> int:
    """Flip one bit of value ``slot`` of page ``page``'s blob chunk; its shard row."""
    with ShardFile(path) as shard:
        col = shard.field_index("blob")
        head = shard.parse_head(page, col)
        assert head is not None and shard.has_value_crcs(page, col)
        at = int(shard.meta.chunks[page, col]["offset"]) + head.data_start + head.offsets[slot]
        row = int(shard.page_starts[page]) + slot
    data = bytearray(path.read_bytes())
    data[at + 7] ^= 0x10
    path.write_bytes(bytes(data))
    clear_verified()
    return row


def test_a_warm_read_of_some_values_checks_just_those(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm (in memory): the rows taken from a chunk with a CRC per value are checked one
    by one; a damaged one raises naming its row, the others are served, and once every
    value of the chunk was checked (``once``) the chunk counts as verified."""
    import mrecord.storage.readahead as readahead

    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: True)
    path = tmp_path / "d.mrecord"
    _write(path)
    bad = _damage_value(path, 0, 4)
    with DatasetReader.open(path, verify="once") as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        n = int(shard.meta.page_rows[0])
        for as_arrays in (False, True):
            with pytest.raises(ChecksumError, match=f"page 0, field 'blob', row {bad} "):
                reader.read_rows([2, bad], columns=["blob"], bytes_as_arrays=as_arrays)
        good = [i for i in range(n) if i != bad]
        for i in good:  # one at a time: each a partial read of the chunk
            got = reader.read_rows([i], columns=["blob"]).columns["blob"]
            assert list(got) == [_blob(i)]
        assert not shard.verified_chunks(np.array([0]), col)[0]  # one value never passed
    path2 = tmp_path / "e.mrecord"
    _write(path2)
    with DatasetReader.open(path2, verify="once") as reader:
        shard = reader.shards[0]
        for i in range(n):
            assert list(reader.read_rows([i], columns=["blob"]).columns["blob"]) == [_blob(i)]
            assert shard.verified_chunks(np.array([0]), col)[0] == (i == n - 1)


def test_hints_for_some_values_read_those_values_not_their_chunk(tmp_path: Path) -> None:
    """What read-ahead hints (``row_ranges``) for rows of a chunk with a CRC per value,
    under ``once`` and ``always``: their values, the head and the table, not the chunk."""
    from mrecord.storage.readahead import row_ranges, verify_chunks

    path = tmp_path / "d.mrecord"
    _write(path)
    clear_verified()
    for verify in ("once", "always"):
        with ShardFile(path, verify=verify) as shard:
            col = shard.field_index("blob")
            offset, length, _ = shard.chunk_place(0, col)
            head = shard.parse_head(0, col)
            assert head is not None
            slots = np.array([5, 0, 17])
            ranges = row_ranges(shard, np.zeros(3, dtype=np.int64), slots, ["blob"])
            # the same when chunks not checked yet are first checked by a pool
            pooled = row_ranges(shard, np.zeros(3, dtype=np.int64), slots, ["blob"], verify_chunks)
            assert pooled == ranges
            spans = [
                (offset + head.data_start + head.offsets[s], len(_blob(int(s))))
                for s in slots.tolist()
            ]
            table, head_length = shard.head_range(0, col)
            for start, size in [*spans, (table, head_length)]:
                assert any(a <= start and start + size <= a + n for a, n in ranges), start
            hinted = sum(n for _, n in ranges)
            assert hinted <= sum(n for _, n in spans) + 4 * 4096 + 4 * 4096, (hinted, length)


def test_a_table_may_start_right_after_the_header(tmp_path: Path) -> None:
    """The boundary: a table of 4 (n + 1) bytes ending at the chunk may start at byte 64,
    not one byte before; the refusal names the page and field."""
    from mrecord.errors import MetadataError
    from mrecord.format.metadata import ShardMetadata

    path = tmp_path / "d.mrecord"
    _write(path)
    doc = _file_metadata(path)
    n = int(np.frombuffer(doc["page_rows"], dtype="<u4")[0])
    data_end = path.stat().st_size - 32
    for offset, ok in ((64 + 4 * (n + 1), True), (64 + 4 * (n + 1) - 1, False)):
        records = bytearray(doc["chunks"])
        records[32 : 32 + 8] = struct.pack("<Q", offset)  # page 0, field 1 ("blob")
        doc2 = dict(doc, chunks=bytes(records))
        packed = msgpack.packb(doc2, use_bin_type=True)
        if ok:
            meta = ShardMetadata.decode(packed, data_end)
            assert int(meta.chunks[0, 1]["offset"]) == offset
            continue
        with pytest.raises(MetadataError) as caught:
            ShardMetadata.decode(packed, data_end)
        assert str(caught.value) == (
            "page 0, field 'blob': a value table on a chunk that cannot have one "
            "(fixed-width, compressed, or no room before it)"
        )


def test_a_value_checked_in_one_chunk_says_nothing_of_another(tmp_path: Path) -> None:
    """Under ``once`` the values checked one by one are remembered per chunk: row 3 of
    page 0 checked does not let row 3 of page 1, damaged, through."""
    import mrecord.storage.readahead as readahead

    path = tmp_path / "d.mrecord"
    _write(path)
    bad = _damage_value(path, 1, 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(readahead, "_looks_warm", lambda shard, ranges: True)
        with DatasetReader.open(path, verify="once") as reader:
            good = int(reader.shards[0].page_starts[0]) + 3
            assert list(reader.read_rows([good], columns=["blob"]).columns["blob"]) == [_blob(good)]
            with pytest.raises(ChecksumError, match=f"row {bad} "):
                reader.read_rows([bad], columns=["blob"])


def test_verify_names_a_head_that_disagrees_with_its_table_and_the_last_entry(
    tmp_path: Path, without_head_index: None
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as shard:
        offset = int(shard.meta.chunks[0, 1]["offset"])
        n = int(shard.meta.page_rows[0])
        offset1 = int(shard.meta.chunks[1, 1]["offset"])
        n1 = int(shard.meta.page_rows[1])
        last = int(shard.page_starts[1]) + n1 - 1
    data = bytearray(path.read_bytes())
    data[offset - 4 * (n + 1)] ^= 0x01  # page 0: the head's CRC
    data[offset1 - 4] ^= 0x01  # page 1: the last value's CRC (the table ends at the chunk)
    path.write_bytes(bytes(data))
    clear_verified()
    report = verify_dataset(path)
    assert [p for p in report.problems if "checksum" in p] == [
        f"{str(path)!r}: checksum mismatch in page 0, field 'blob', the head at byte {offset} "
        "disagrees with its value table; the file is damaged (`mrecord verify` lists every "
        "damaged page)",
        f"{str(path)!r}: checksum mismatch in page 1, field 'blob', row {last} "
        f"({len(_blob(last))} bytes); the file is damaged (`mrecord verify` lists every "
        "damaged page)",
    ]
    with ShardFile(path) as shard, pytest.raises(ChecksumError) as caught:
        shard.check_value_table(1, shard.meta.schema.fields[1])
    assert (caught.value.path, caught.value.page, caught.value.offset) == (str(path), 1, offset1)


def test_assembled_pages_keep_the_table_of_their_first_chunk(tmp_path: Path) -> None:
    """When a page's first chunk has a table, a run of pages copied elsewhere starts at
    that table (else it would be left behind)."""
    paths = [tmp_path / "a.mrecord", tmp_path / "b.mrecord"]
    for path in paths:
        with FileWriter(path) as writer:
            writer.add_schema({"blob": {"type": "bytes"}, "id": {"type": "int64"}})
            writer.set_page_size(200_000)
            writer.write_raw_data([{"blob": _blob(i), "id": i} for i in range(30)])
    target = tmp_path / "t.mrecord"
    with ShardFile(paths[0]) as sa, ShardFile(paths[1]) as sb:
        assert sa.has_value_crcs(1, 0) and int(sa.meta.chunks[1, 0]["offset"]) == min(
            int(sa.meta.chunks[1, 0]["offset"]), int(sa.meta.chunks[1, 1]["offset"])
        )
        expected = [int(i) for i in range(int(sa.page_starts[1]), int(sa.page_starts[3]))]
        expected += [int(i) for i in range(int(sb.page_starts[0]), int(sb.page_starts[2]))]
        runs = [PageRun(paths[0], sa.meta, 1, 3), PageRun(paths[1], sb.meta, 0, 2)]
        assemble_shard(target, runs, sa.meta)
    with ShardFile(target, verify="always") as shard:
        blob = shard.meta.schema.fields[0]
        got = []
        for page in range(shard.meta.num_pages):
            shard.check_value_table(page, blob)
            head, raw = shard.var_page(page, blob)
            got += [
                bytes(raw[head.data_start + x : head.data_start + y])
                for x, y in zip(head.offsets, head.offsets[1:], strict=False)
            ]
    assert got == [_blob(i) for i in expected]


def test_a_chunk_counts_as_verified_only_when_its_own_values_all_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row of the smaller of pages 0 and 1 but its last, then that slot of the
    other: the other has had one value checked, not all, so it still needs its checks."""
    import mrecord.storage.readahead as readahead

    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: True)
    path = tmp_path / "d.mrecord"
    _write(path)
    clear_verified()
    with DatasetReader.open(path, verify="once") as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        small, big = sorted((0, 1), key=lambda p: int(shard.meta.page_rows[p]))
        n = int(shard.meta.page_rows[small])
        first = {p: int(shard.page_starts[p]) for p in (small, big)}
        for slot in range(n - 1):
            reader.read_rows([first[small] + slot], columns=["blob"])
        reader.read_rows([first[big] + n - 1], columns=["blob"])
        assert not shard.verified_chunks(np.array([small, big]), col).any()
        reader.read_rows([first[small] + n - 1], columns=["blob"])
        assert shard.verified_chunks(np.array([small, big]), col).tolist() == [True, False]


def test_assembled_pages_take_no_bytes_from_before_their_first_chunk(tmp_path: Path) -> None:
    """A run whose first chunk has no table starts at that chunk: right after the header."""
    a = tmp_path / "a.mrecord"
    _write(a, page_size=200_000)
    target = tmp_path / "t.mrecord"
    with ShardFile(a) as sa:
        assert not sa.has_value_crcs(1, 0)  # "id" first: fixed-width
        assemble_shard(target, [PageRun(a, sa.meta, 1, 3)], sa.meta)
        moved = int(sa.meta.chunks[1, 0]["offset"]) - 64
        expected = (sa.meta.chunks[1:3]["offset"].astype(np.int64) - moved).tolist()
    with ShardFile(target) as shard:
        assert shard.meta.chunks["offset"].astype(np.int64).tolist() == expected


def test_assembled_offsets_past_10_8_bytes_stay_exact(tmp_path: Path) -> None:
    """A page run assembled after 100 MB of others: its chunks' offsets pass 10**8 (nine
    digits) and must stay the exact integers (shards of real datasets are far larger)."""
    big, small = tmp_path / "big.mrecord", tmp_path / "small.mrecord"
    for path, values in (
        (big, [bytes([i]) * (1 << 20) for i in range(96)]),
        (small, [_blob(i) for i in range(20)]),
    ):
        with FileWriter(path) as writer:
            writer.add_schema({"blob": {"type": "bytes"}})
            writer.write_raw_data([{"blob": v} for v in values])
    target = tmp_path / "t.mrecord"
    with ShardFile(big) as sb, ShardFile(small) as ss:
        n = int(ss.meta.page_rows[0])
        runs = [PageRun(big, sb.meta, 0, sb.meta.num_pages), PageRun(small, ss.meta, 0, 1)]
        assemble_shard(target, runs, sb.meta)
    with ShardFile(target, verify="always") as shard:
        last = shard.meta.num_pages - 1
        assert int(shard.meta.chunks[last, 0]["offset"]) > 10**8
        head, raw = shard.var_page(last, shard.meta.schema.fields[0])
        got = [
            bytes(raw[head.data_start + a : head.data_start + b])
            for a, b in zip(head.offsets, head.offsets[1:], strict=False)
        ]
    assert got == [_blob(i) for i in range(n)]


def test_small_values_found_in_memory_are_checked_as_their_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 KB values (a table each, under BY_VALUE_MIN_BYTES): a warm read of some rows
    checks their chunk whole, once (one CRC over memory beats a call per value), as
    before value tables; a cold read still checks them one by one."""
    import mrecord.storage.readahead as readahead

    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: True)
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"b": {"type": "bytes"}})
        writer.write_raw_data([{"b": bytes([i]) * 2048} for i in range(200)])
    clear_verified()
    with DatasetReader.open(path, verify="once") as reader:
        shard = reader.shards[0]
        assert shard.has_value_crcs(0, 0) and not shard.checks_by_value(0, 0)
        got = reader.read_rows([3, 1], columns=["b"]).columns["b"]
        assert list(got) == [bytes([3]) * 2048, bytes([1]) * 2048]
        assert shard.verified_chunks(np.array([0]), 0)[0]  # checked whole


def test_empty_values_beside_others_are_read_cold_without_a_false_alarm(
    tmp_path: Path, cold: None
) -> None:
    """An empty value starts where the next value does: each row is still matched to its
    own CRC when its chunk's values are read alone."""
    path = tmp_path / "d.mrecord"
    values = [b"", _blob(1), b"", b"", _blob(4), _blob(5), b""]
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.write_raw_data([{"blob": v} for v in values])
    with DatasetReader.open(path, verify="once") as reader:
        assert reader.shards[0].has_value_crcs(0, 0)
        for ids in ([1], [0, 1], [3, 4], [6, 5], [2]):
            got = reader.read_rows(ids, columns=["blob"]).columns["blob"]
            assert [bytes(v) for v in got] == [values[i] for i in ids], ids


def test_the_by_value_mask_agrees_with_checks_by_value_for_every_chunk(tmp_path: Path) -> None:
    """Read-ahead plans a block from the vectorized mask; a read checks by the per-chunk
    answer: where they disagreed, a chunk would be planned in part but checked whole."""
    path = tmp_path / "d.mrecord"
    _write(path, page_size=300_000)
    shard = ShardFile(path, verify="once")
    try:
        chunks = shard.meta.chunks
        rows = shard.meta.page_rows.tolist()
        for col, field in enumerate(shard.meta.schema.fields):
            mask = shard.checks_by_value_mask(col)
            # the rule written out here: a bytes or string chunk with a value table whose
            # values average BY_VALUE_MIN_BYTES (32 KiB) or more
            expected = [
                field.kind in (FieldKind.BYTES, FieldKind.STRING)
                and shard.has_value_crcs(p, col)
                and int(chunks[p, col]["length"]) >= (32 << 10) * rows[p]
                for p in range(len(rows))
            ]
            assert mask.tolist() == expected
            assert [shard.checks_by_value(p, col) for p in range(len(rows))] == expected
        blob = shard.field_index("blob")
        assert shard.checks_by_value_mask(blob).all()  # 40 KB values with a table
        assert not shard.checks_by_value_mask(shard.field_index("id")).any()
    finally:
        shard.close()


def test_the_warm_test_sample_reads_no_heads(tmp_path: Path, without_head_index: None) -> None:
    """row_ranges(parse_heads=False), the sample that tells warm from cold, gives the
    page in the middle of an unparsed chunk (among its values: its head may be in memory
    alone, asked for by a lookahead) and parses nothing; the full plan parses the heads
    and gives the values' own spans. (With a head index the heads are parsed from it,
    no read of theirs, and the sample is the values' own spans.)"""
    from mrecord.storage.readahead import row_ranges

    path = tmp_path / "d.mrecord"
    _write(path, page_size=300_000)
    clear_verified()
    shard = ShardFile(path, verify="never")
    try:
        col = shard.field_index("blob")
        pages = np.array([1, 2], dtype=np.int64)
        slots = np.array([0, 1], dtype=np.int64)
        sampled = row_ranges(shard, pages, slots, ["blob"], parse_heads=False)
        heads = shard.cached_heads(col)
        assert heads(1) is None and heads(2) is None
        page = 4096
        for p in (1, 2):
            offset, length = shard.chunk_place(p, col)[:2]
            middle = (offset + length // 2) // page * page
            assert any(a <= middle and middle + page <= a + n for a, n in sampled)
            head_offset = shard.head_range(p, col)[0]
            assert not any(a <= head_offset < a + n for a, n in sampled)  # not the head
        assert sum(n for _, n in sampled) <= 2 * 2 * page  # a page or two each, not values
        planned = row_ranges(shard, pages, slots, ["blob"])
        assert heads(1) is not None and heads(2) is not None
        for p, s in zip(pages.tolist(), slots.tolist(), strict=True):
            head = heads(p)
            start = shard.chunk_place(p, col)[0] + head.data_start + head.offsets[s]
            end = shard.chunk_place(p, col)[0] + head.data_start + head.offsets[s + 1]
            assert any(a <= start and end <= a + n for a, n in planned)
    finally:
        shard.close()
