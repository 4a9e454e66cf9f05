"""Tests written for mutants of mrecord/storage/shard.py that survived the storage and reader
tests (docs/RELIABILITY.md, "Mutation testing"): every refusal of a file names the file and
what is wrong with it, whole; chunks are checked, cached and hinted as documented."""

from __future__ import annotations

import dataclasses
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.errors import (
    ArgumentError,
    ChecksumError,
    CorruptFileError,
    DatasetNotFoundError,
    NotAnMrecordFileError,
)
from mrecord.format.compression import checksum
from mrecord.format.layout import TRAILER_SIZE, Trailer
from mrecord.format.metadata import ShardMetadata
from mrecord.storage.shard import ShardFile
from mrecord.storage.verified import clear_verified

ROWS = 20


def _write(path: Path) -> Path:
    """20 rows, 5 a page (4 KiB pages): ``id`` int64 and ``blob`` of 1,000 bytes each."""
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 12)
        writer.write_raw_data([{"id": i, "blob": bytes([i]) * 1000} for i in range(ROWS)])
    clear_verified()
    return path


@pytest.fixture
def shard_path(tmp_path: Path) -> Path:
    return _write(tmp_path / "d.mrecord")


def _rewrite(src: Path, dst: Path, change: Callable[[np.ndarray, bytearray], None]) -> None:
    """Copy ``src`` to ``dst`` with its chunk directory (and bytes) changed by ``change``,
    the metadata's checksum and the trailer made right again (damage only the chunk)."""
    data = bytearray(src.read_bytes())
    trailer = Trailer.parse(bytes(data[-TRAILER_SIZE:]), len(data))
    start, end = trailer.metadata_offset, trailer.metadata_offset + trailer.metadata_length
    meta = ShardMetadata.decode(bytes(data[start:end]), start)
    chunks = meta.chunks.copy()
    change(chunks, data)
    body = dataclasses.replace(meta, chunks=chunks).encode()
    tail = Trailer(start, len(body), checksum(body)).encode()
    dst.write_bytes(bytes(data[:start]) + body + tail)
    clear_verified()


def test_an_unknown_verify_policy_is_refused_naming_the_policies(shard_path: Path) -> None:
    with pytest.raises(ArgumentError) as info:
        ShardFile(shard_path, verify="sometimes")
    assert str(info.value) == (
        "verify must be one of ('once', 'always', 'never'), got 'sometimes'"
    )


def test_what_is_not_a_shard_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(DatasetNotFoundError) as info:
        ShardFile(missing)
    assert str(info.value) == f"data file {str(missing)!r} does not exist"
    with pytest.raises(DatasetNotFoundError) as info:
        ShardFile(tmp_path)
    assert str(info.value) == f"{str(tmp_path)!r} is a folder, not a data file"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(DatasetNotFoundError) as info:
        ShardFile(loop)
    assert str(info.value) == (
        f"data file {str(loop)!r} is a symbolic link that loops; point it at the shard"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotAnMrecordFileError) as not_shard:
        ShardFile(fifo)
    assert str(not_shard.value) == (
        f"{str(fifo)!r} is not an mrecord file (a FIFO, not a regular file); "
        "a shard file belongs there"
    )
    assert (not_shard.value.path, not_shard.value.offset) == (str(fifo), 0)
    with pytest.raises(NotAnMrecordFileError) as not_shard:
        ShardFile(Path("/dev/null"))
    assert str(not_shard.value) == (
        "'/dev/null' is not an mrecord file (a device or socket, not a regular file); "
        "a shard file belongs there"
    )


def test_foreign_short_and_damaged_files_are_refused_naming_the_byte(
    shard_path: Path, tmp_path: Path
) -> None:
    png = tmp_path / "png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    with pytest.raises(NotAnMrecordFileError) as foreign:
        ShardFile(png)
    assert str(foreign.value) == (
        f"{str(png)!r} is not an mrecord file (starts with b'\\x89PNG\\r\\n\\x1a\\n': "
        "a PNG image)"
    )
    assert (foreign.value.path, foreign.value.offset) == (str(png), 0)

    data = shard_path.read_bytes()
    short = tmp_path / "short"
    short.write_bytes(data[:64] + data[-8:])  # a header and the trailer's magic
    with pytest.raises(CorruptFileError) as corrupt:
        ShardFile(short)
    assert str(corrupt.value) == (
        f"{str(short)!r} is 72 bytes, too short to be an mrecord shard "
        "(truncated, or not committed)"
    )
    assert (corrupt.value.path, corrupt.value.offset) == (str(short), 0)

    with ShardFile(shard_path) as shard:
        trailer = shard._trailer
    moved = tmp_path / "moved"  # the trailer points before the metadata
    wrong = Trailer(trailer.metadata_offset - 1, trailer.metadata_length, trailer.metadata_crc32)
    moved.write_bytes(data[:-TRAILER_SIZE] + wrong.encode())
    with pytest.raises(CorruptFileError) as corrupt:
        ShardFile(moved)
    end = trailer.metadata_offset - 1 + trailer.metadata_length
    assert str(corrupt.value) == (
        f"{str(moved)!r}: trailer points at metadata {trailer.metadata_offset - 1}..{end}, "
        f"outside the file ({len(data)} bytes)"
    )
    assert corrupt.value.path == str(moved)

    damaged = tmp_path / "damaged"
    at = trailer.metadata_offset
    damaged.write_bytes(data[: at + 5] + bytes([data[at + 5] ^ 1]) + data[at + 6 :])
    with pytest.raises(ChecksumError) as bad_sum:
        ShardFile(damaged)
    assert str(bad_sum.value) == (
        f"{str(damaged)!r}: metadata checksum mismatch at byte {at}; the file is damaged"
    )
    assert (bad_sum.value.path, bad_sum.value.offset) == (str(damaged), at)


def test_metadata_that_does_not_decode_is_refused_naming_its_byte(
    shard_path: Path, tmp_path: Path
) -> None:
    def short_id_chunk(chunks: np.ndarray, data: bytearray) -> None:
        chunks[2, 0]["raw_length"] = chunks[2, 0]["length"] = 48

    bad = tmp_path / "bad"
    _rewrite(shard_path, bad, short_id_chunk)
    with ShardFile(shard_path) as shard:
        at = shard._trailer.metadata_offset
    with pytest.raises(CorruptFileError) as info:
        ShardFile(bad)
    assert str(info.value) == (
        f"{str(bad)!r}: metadata at byte {at}: page 2, field 'id': raw length 48 is not "
        "5 rows of 8 bytes"
    )
    assert (info.value.path, info.value.offset) == (str(bad), at)


def test_a_damaged_chunk_is_refused_naming_page_field_and_bytes(
    shard_path: Path, tmp_path: Path
) -> None:
    with ShardFile(shard_path) as shard:
        offset, length, _ = shard.chunk_place(2, 1)
    data = bytearray(shard_path.read_bytes())
    data[offset + length - 5] ^= 1  # inside the last value
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(data))
    for verify in ("once", "always"):
        clear_verified()
        with ShardFile(damaged, verify=verify) as shard:
            field = shard.meta.schema.fields[1]
            shard.var_page(1, field)  # a sound chunk reads
            with pytest.raises(ChecksumError) as info:
                shard.var_page(2, field)
            assert str(info.value) == (
                f"{str(damaged)!r}: checksum mismatch in page 2, field 'blob', bytes "
                f"{offset}..{offset + length}; the file is damaged "
                "(`mrecord verify` lists every damaged page)"
            )
            assert (info.value.path, info.value.page, info.value.offset) == (
                str(damaged), 2, offset
            )
            assert not shard.verified_chunks(np.array([2]), 1)[0]
            with pytest.raises(ChecksumError):
                shard.var_page(2, field)  # still refused on the next read
    with ShardFile(damaged, verify="never") as shard:
        _, raw = shard.var_page(2, shard.meta.schema.fields[1])  # trusted as asked
        assert len(raw) == length


def _chunk_error(path: Path, page: int, col: int, verify: str = "never") -> CorruptFileError:
    with ShardFile(path, verify=verify) as shard:
        field = shard.meta.schema.fields[col]
        with pytest.raises(CorruptFileError) as info:
            shard.var_page(page, field)
        return info.value


def test_a_chunk_that_does_not_decode_is_refused_naming_page_field_and_byte(
    shard_path: Path, tmp_path: Path
) -> None:
    with ShardFile(shard_path) as shard:
        offset, length, _ = shard.chunk_place(2, 1)

    def raw_longer(chunks: np.ndarray, data: bytearray) -> None:
        chunks[2, 1]["raw_length"] += 1

    def bad_offsets(chunks: np.ndarray, data: bytearray) -> None:
        data[offset : offset + 8] = (10**9).to_bytes(8, "little")  # the first value's start
        chunks[2, 1]["crc32"] = checksum(bytes(data[offset : offset + length]))

    def not_zstd(chunks: np.ndarray, data: bytearray) -> None:
        chunks[2, 1]["codec"] = 1

    where = "page 2, field 'blob' at byte"
    cases = [
        (raw_longer, "never", "stored and raw lengths differ"),
        (bad_offsets, "always", "chunk of field 'blob' has inconsistent offsets "
         "(first 1000000000, last 5000, data 5000 bytes)"),
        (not_zstd, "never", "not a zstd frame: error when determining content size"),
    ]
    for i, (change, verify, why) in enumerate(cases):
        bad = tmp_path / f"bad{i}"
        _rewrite(shard_path, bad, change)
        error = _chunk_error(bad, 2, 1, verify)
        assert str(error) == f"{str(bad)!r}: {where} {offset}: {why}"
        assert (error.path, error.page, error.offset) == (str(bad), 2, offset)


class _SpyMap(mmap.mmap):
    """A memory map that records its ``madvise`` calls."""

    calls: ClassVar[list[tuple[int, ...]]] = []

    def madvise(self, *args: int) -> None:
        _SpyMap.calls.append(args)
        super().madvise(*args)


def test_will_need_advises_exactly_the_ranges_rounded_out_to_pages(
    shard_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mmap, "mmap", _SpyMap)
    monkeypatch.setattr(_SpyMap, "calls", [])
    page = mmap.PAGESIZE
    with ShardFile(shard_path) as shard:
        size = shard.size
        shard.will_need([])
        assert not shard.hinted and _SpyMap.calls == []
        shard.will_need([(page + 904, 100), (0, 0), (size, 5), (size - 10, 100), (7, 1)])
        assert shard.hinted
        assert _SpyMap.calls == [
            (mmap.MADV_RANDOM,),
            (mmap.MADV_WILLNEED, page, 1004),  # starts on its page, ends where it ends
            (mmap.MADV_WILLNEED, (size - 10) // page * page, size - (size - 10) // page * page),
            (mmap.MADV_WILLNEED, 0, 8),
        ]
        _SpyMap.calls.clear()
        shard.will_need([(2 * page, page)])  # the map's advice is set once
        assert _SpyMap.calls == [(mmap.MADV_WILLNEED, 2 * page, page)]


def _chunk_preads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    real = os.preadv

    def spy(fd: int, buffers: list[memoryview], offset: int) -> int:
        got = real(fd, buffers, offset)
        seen.append((offset, got))
        return got

    monkeypatch.setattr(os, "preadv", spy)
    return seen


def _write_big(path: Path, damage_at: int | None = None) -> tuple[int, int]:
    """One page of 3 values of 200,000 bytes (a chunk over 256 KiB: checked in pieces);
    ``damage_at`` flips a byte that far into the chunk. Returns the chunk's place."""
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.set_page_size(1 << 20)
        writer.write_raw_data([{"blob": bytes([i + 1]) * 200_000} for i in range(3)])
    with ShardFile(path, verify="never") as shard:
        offset, length, _ = shard.chunk_place(0, 0)
    if damage_at is not None:
        data = bytearray(path.read_bytes())
        data[offset + damage_at] ^= 1
        path.write_bytes(bytes(data))
    clear_verified()
    return offset, length


def test_a_chunk_checked_as_it_arrives_is_read_once_in_pieces_and_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big"
    offset, length = _write_big(path)
    assert length > 2 * (256 << 10)
    preads = _chunk_preads(monkeypatch)
    with ShardFile(path, verify="once") as shard:
        assert shard.needs_check(0, 0)
        shard.verify_arriving(0, 0)
        assert not shard.needs_check(0, 0) and shard.all_verified(0)
    piece = 256 << 10
    want = [(offset + at, min(piece, length - at)) for at in range(0, length, piece)]
    assert [p for p in preads if p[0] >= offset] == want


@pytest.mark.parametrize("damage_at", [10, 300_000, 599_000])
def test_a_damaged_chunk_checked_as_it_arrives_stays_unverified(
    tmp_path: Path, damage_at: int
) -> None:
    """Damage in the first, a middle or the last 256 KiB piece: the chunk is left for its
    reader, who gets the ChecksumError."""
    path = tmp_path / "big"
    _write_big(path, damage_at)
    with ShardFile(path, verify="once") as shard:
        shard.verify_arriving(0, 0)
        assert shard.needs_check(0, 0) and not shard.all_verified(0)
        with pytest.raises(ChecksumError):
            shard.var_page(0, shard.meta.schema.fields[0])


def test_verify_arriving_does_nothing_unless_the_policy_is_once(
    shard_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preads = _chunk_preads(monkeypatch)
    for verify in ("always", "never"):
        with ShardFile(shard_path, verify=verify) as shard:
            shard.verify_arriving(1, 1)
            assert shard.needs_check(1, 1) is (verify == "always")
    assert preads == []
    with ShardFile(shard_path, verify="once") as shard:
        shard.verify_arriving(1, 1)
        shard.verify_arriving(1, 1)  # verified: not read again
        offset, length, _ = shard.chunk_place(1, 1)
        assert preads == [(offset, length)]


def test_policies_say_which_chunks_need_a_check(shard_path: Path) -> None:
    pages = np.arange(4)
    with ShardFile(shard_path, verify="never") as shard:
        assert shard.verified_chunks(pages, 1).tolist() == [True] * 4
        assert not shard.needs_check(0, 1) and shard.all_verified(1)
    with ShardFile(shard_path, verify="always") as always:
        always.mark_verified(2, 1)  # "always" records nothing, not even for others
        always.check_chunks(pages, 1)
        assert always.verified_chunks(pages, 1).tolist() == [False] * 4
        assert always.needs_check(2, 1) and not always.all_verified(1)
        with ShardFile(shard_path, verify="once") as once:
            assert once.verified_chunks(pages, 1).tolist() == [False] * 4
            once.mark_verified(2, 1)
            once.check_chunks(np.array([0, 3]), 1)
            assert once.verified_chunks(pages, 1).tolist() == [True, False, True, True]
            assert once.verified_chunks(pages, 0).tolist() == [False] * 4
            assert not once.all_verified(1)
            once.check_chunks(pages, 1)
            assert once.all_verified(1) and not once.all_verified(0)


def test_chunk_places_heads_and_offsets_are_the_directorys(tmp_path: Path) -> None:
    path = tmp_path / "v"
    with FileWriter(path) as writer:
        writer.add_schema(
            {
                "a": {"type": "float32", "shape": [-1, 3]},
                "b": {"type": "bytes"},
                "z": {"type": "bytes", "compression": "zstd"},
                "n": {"type": "int32", "compression": "zstd"},
            }
        )
        writer.set_page_size(1 << 12)
        writer.write_raw_data(
            [
                {"a": np.full((i % 3 + 1, 3), i, np.float32), "b": b"x" * (100 * i), "z": b"y" * 50,
                 "n": i}
                for i in range(30)
            ]
        )
    clear_verified()
    with ShardFile(path, verify="never") as shard:
        chunks = shard.meta.chunks
        rows = shard.meta.page_rows.tolist()
        assert len(rows) > 1
        for col in range(4):
            assert shard.chunk_offsets(col) == chunks[:, col]["offset"].tolist()
        for page, n in enumerate(rows):
            place = shard.chunk_place(page, 0)
            assert place == tuple(int(chunks[page, 0][k]) for k in ("offset", "length", "crc32"))
            # value offsets (n + 1) and a shape of 2 dimensions per row, 8 bytes each
            assert shard.head_range(page, 0) == (place[0], 8 * (n + 1) + 16 * n)
            # bytes of 100 * i: pages of values over 1 KiB on average carry a CRC per
            # value in a table of 4 (n + 1) bytes right before the chunk (format 1.3),
            # read with the head
            offset = int(chunks[page, 1]["offset"])
            if shard.has_value_crcs(page, 1):
                assert shard.head_range(page, 1) == (offset - 4 * (n + 1), 12 * (n + 1))
            else:
                assert shard.head_range(page, 1) == (offset, 8 * (n + 1))
            head = shard.parse_head(page, 1)
            assert head is not None and list(head.offsets) == [
                100 * sum(range(shard.page_starts_list[page], shard.page_starts_list[page] + k))
                for k in range(n + 1)
            ]
            assert shard.cached_heads(1)(page) is head
            assert shard.parse_head(page, 2) is None  # compressed: not planned
            assert shard.plain_var_page(page, shard.meta.schema.fields[2]) is None
            assert shard.uncompressed_offset(page, 2) is None
            assert shard.uncompressed_offset(page, 1) == int(chunks[page, 1]["offset"])
            plain = shard.plain_var_page(page, shard.meta.schema.fields[1])
            assert plain is not None and plain[0] is head
            offset, length, _ = shard.chunk_place(page, 1)
            assert bytes(plain[1]) == path.read_bytes()[offset : offset + length]
        assert shard.cached_heads(0)(0) is None  # never parsed
        fields = shard.meta.schema.fields
        assert not shard.uncompressed_fixed(fields[1])  # not a FIXED field


def test_a_head_that_does_not_parse_is_not_planned(shard_path: Path, tmp_path: Path) -> None:
    with ShardFile(shard_path) as shard:
        offset, length, _ = shard.chunk_place(2, 1)

    def bad_offsets(chunks: np.ndarray, data: bytearray) -> None:
        data[offset : offset + 8] = (10**9).to_bytes(8, "little")
        chunks[2, 1]["crc32"] = checksum(bytes(data[offset : offset + length]))

    bad = tmp_path / "bad"
    _rewrite(shard_path, bad, bad_offsets)
    with ShardFile(bad) as shard:
        assert shard.parse_head(2, 1) is None
        assert shard.plain_var_page(2, shard.meta.schema.fields[1]) is None
        assert shard.parse_head(1, 1) is not None
        assert shard.uncompressed_fixed(shard.meta.schema.fields[0])


def test_descriptors_of_the_mapped_file(shard_path: Path) -> None:
    import fcntl

    with ShardFile(shard_path) as shard:
        fd = shard.read_fd()
        assert fd is not None and shard.read_fd() == fd
        assert os.fstat(fd).st_ino == shard_path.stat().st_ino
        direct = shard.direct_fd()
        assert direct is not None and shard.direct_fd() == direct
        assert fcntl.fcntl(direct, fcntl.F_GETFL) & os.O_DIRECT
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT
        view = shard.file_bytes
        assert shard.file_bytes is view and not view.flags.writeable
        assert bytes(view) == shard_path.read_bytes()
        assert shard.map_address() == view.ctypes.data
        del view  # a view still held keeps the map open
    for gone in (fd, direct):
        with pytest.raises(OSError):
            os.fstat(gone)
    assert shard.map_address() is None


def test_a_replaced_or_shortened_file_gives_no_descriptor(shard_path: Path, tmp_path: Path) -> None:
    with ShardFile(shard_path) as shard:
        other = tmp_path / "other"
        _write(other)
        os.replace(other, shard_path)
        assert shard.open_mapped_file() is None and shard.read_fd() is None
        assert shard.direct_fd() is None
    same = _write(tmp_path / "same")
    with ShardFile(same) as shard:
        fd = shard.open_mapped_file(direct=True)
        assert fd is not None
        os.close(fd)
        os.truncate(same, shard.size - 1)  # the map is not read after this
        assert shard.open_mapped_file() is None
        assert shard.open_mapped_file(direct=True) is None
