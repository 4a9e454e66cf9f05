"""Tests written for mutants of mrecord/storage/readahead.py that survived the storage and
reader tests (docs/RELIABILITY.md, "Mutation testing"): the exact byte ranges a read of rows
touches under each checksum policy, where direct reads land, and reads that hand out the
file's bytes, checked, or say they could not."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.format.value_crcs as value_crcs
import mrecord.storage.readahead as readahead
from mrecord import FileWriter
from mrecord.storage.readahead import (
    aligned_buffer,
    direct_layout,
    direct_spans,
    read_checked,
    read_direct,
    read_into,
    row_ranges,
)
from mrecord.storage.shard import ShardFile
from mrecord.storage.verified import clear_verified

# Files as format 1.3 wrote them (no head index): their small chunks are read from the
# file, the path these tests are about (tests/storage/test_head_index.py: with one).
pytestmark = pytest.mark.usefixtures("without_head_index")

PAGE = mmap.PAGESIZE
ROWS = 24


def _value(i: int) -> bytes:
    return bytes([i + 1]) * (3000 + 500 * i)


@pytest.fixture
def path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """24 rows, pages of 32 KiB (a few rows each): ``id`` int64, ``blob`` 3-14.5 KB,
    ``z`` bytes compressed; chunks checked whole (no CRC per value: those are
    tests/storage/test_value_checks.py's)."""
    monkeypatch.setattr(value_crcs, "VALUE_CRC_MIN_BYTES", 1 << 62)
    file = tmp_path / "d.mrecord"
    with FileWriter(file) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "z": {"type": "bytes", "compression": "zstd"},
            }
        )
        writer.set_page_size(32 << 10)
        writer.write_raw_data([{"id": i, "blob": _value(i), "z": b"z" * 5000} for i in range(ROWS)])
    clear_verified()
    return file


def _pages(ranges: list[tuple[int, int]]) -> set[int]:
    """The file pages (of PAGE bytes) that ``(offset, length)`` ranges cover."""
    out: set[int] = set()
    for offset, length in ranges:
        out |= set(range(offset // PAGE, (offset + length - 1) // PAGE + 1))
    return out


def _runs(pages: set[int]) -> list[tuple[int, int]]:
    """Consecutive pages as ``(offset, length)`` runs, in file order."""
    runs: list[tuple[int, int]] = []
    for p in sorted(pages):
        if runs and runs[-1][0] + runs[-1][1] == p * PAGE:
            runs[-1] = (runs[-1][0], runs[-1][1] + PAGE)
        else:
            runs.append((p * PAGE, PAGE))
    return runs


def _where(shard: ShardFile, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    starts = shard.page_starts
    pages = np.searchsorted(starts, ids, side="right") - 1
    return pages.astype(np.int64), (np.array(ids) - starts[pages]).astype(np.int64)


def _pairs(pages: np.ndarray, slots: np.ndarray) -> list[tuple[int, int]]:
    return list(zip(pages.tolist(), slots.tolist(), strict=True))


def _value_range(shard: ShardFile, page: int, slot: int) -> tuple[int, int]:
    head = shard.parse_head(page, 1)
    offset, _, _ = shard.chunk_place(page, 1)
    a, b = int(head.offsets[slot]), int(head.offsets[slot + 1])
    return offset + head.data_start + a, b - a


def test_rows_of_checked_chunks_touch_only_their_own_bytes(path: Path) -> None:
    with ShardFile(path, verify="never") as shard:
        ids = [13, 2, 3, 20]
        pages, slots = _where(shard, ids)
        assert len(set(pages.tolist())) == 3
        fixed = [(shard.chunk_place(p, 0)[0] + 8 * s, 8) for p, s in _pairs(pages, slots)]
        assert row_ranges(shard, pages, slots, ["id"]) == _runs(_pages(fixed))
        got = row_ranges(shard, pages, slots, ["blob"])  # heads parsed by this first read
        values = [_value_range(shard, int(p), int(s)) for p, s in _pairs(pages, slots)]
        assert got == _runs(_pages(values))
        both = row_ranges(shard, pages, slots, ["id", "blob"])
        assert both == _runs(_pages(fixed + values))
        # compressed chunks are read whole
        whole_z = [shard.chunk_place(int(p), 2)[:2] for p in sorted(set(pages.tolist()))]
        assert row_ranges(shard, pages, slots, ["z"]) == _runs(_pages(whole_z))
        # a bytes column read directly by the caller: its values are left out
        assert row_ranges(shard, pages, slots, ["id", "blob"], direct=["blob"]) == _runs(
            _pages(fixed)
        )
        assert row_ranges(shard, pages[:0], slots[:0], ["id"]) == []


def test_chunks_that_need_their_check_are_read_whole(path: Path) -> None:
    ids = [13, 2, 3, 20]
    with ShardFile(path, verify="always") as shard:
        pages, slots = _where(shard, ids)
        used = sorted(set(pages.tolist()))
        whole = [shard.chunk_place(p, c)[:2] for p in used for c in (0, 1)]
        assert row_ranges(shard, pages, slots, ["id", "blob"]) == _runs(_pages(whole))
    with ShardFile(path, verify="once") as shard:
        assert row_ranges(shard, pages, slots, ["id", "blob"]) == _runs(_pages(whole))
        # the plain chunks of a column checked as they arrive: only the rows' bytes
        values = [_value_range(shard, int(p), int(s)) for p, s in _pairs(pages, slots)]
        wholes_id = [shard.chunk_place(p, 0)[:2] for p in used]
        assert row_ranges(
            shard, pages, slots, ["id", "blob"], direct=["blob"], arriving=["blob"]
        ) == _runs(_pages(wholes_id))
        assert row_ranges(shard, pages, slots, ["blob"], arriving=["blob"]) == _runs(_pages(values))
        asked: list[tuple[list[int], int]] = []

        def pool(s: ShardFile, some: list[int], col: int) -> None:
            asked.append((some, col))
            readahead.verify_chunks(s, some, col)

        fixed = [(shard.chunk_place(p, 0)[0] + 8 * s, 8) for p, s in _pairs(pages, slots)]
        assert row_ranges(shard, pages, slots, ["id", "blob"], pool) == _runs(
            _pages(fixed + values)
        )
        # the small id chunks are checked in this thread from the map (their pages come
        # with the heads'), the blob chunks by the pool
        assert asked == [(used, 1)]
        assert shard.verified_chunks(np.array(used), 0).all()
        assert shard.verified_chunks(np.array(used), 1).all()
        asked.clear()
        row_ranges(shard, pages, slots, ["id"], pool)
        assert asked == []  # verified: nothing to check
    clear_verified()
    with ShardFile(path, verify="once") as shard:
        # a chunk not checked yet is read whole, the values of checked ones exactly
        first, second = int(pages[1]), int(pages[3])  # rows 2 and 20
        assert first != second
        shard.mark_verified(second, 1)
        got = row_ranges(shard, pages[[1, 3]], slots[[1, 3]], ["blob"])
        want = [shard.chunk_place(first, 1)[:2], _value_range(shard, second, int(slots[3]))]
        assert got == _runs(_pages(want))


def test_chunks_checked_together_are_asked_for_at_once_on_a_hinted_map(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block's chunks to check (a cold random block: one small label chunk per row)
    are asked for all at once before the I/O threads read them one by one, on a map an
    order-aware reader has hinted; a map nobody hinted keeps its read-around (a hint
    would turn it off), so nothing is asked for there. Either way every chunk ends
    checked."""
    asked: list[list[tuple[int, int]]] = []
    real = ShardFile.will_need

    def will_need(self: ShardFile, ranges: Any) -> None:
        asked.append(list(ranges))
        real(self, ranges)

    monkeypatch.setattr(ShardFile, "will_need", will_need)
    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        assert len(pages) > 2
        readahead.verify_chunks(shard, pages[:3], 0)
        assert asked == [] and not shard.hinted
        shard.will_need([(0, 1)])  # an order-aware reader's first hint
        asked.clear()
        readahead.verify_chunks(shard, pages[3:], 0)
        assert asked == [[shard.chunk_place(p, 0)[:2] for p in pages[3:]]]
        assert shard.verified_chunks(np.array(pages), 0).all()


def test_direct_layout_gives_each_range_its_page_aligned_slot() -> None:
    places = [(100, 50), (PAGE, PAGE), (3 * PAGE - 1, 2), (10 * PAGE + 7, 0)]
    nbytes, starts, reads = direct_layout(places)
    assert reads == [
        (0, 0, PAGE, 150),
        (PAGE, PAGE, PAGE, PAGE),
        (2 * PAGE, 2 * PAGE, 2 * PAGE, PAGE + 1),
        (4 * PAGE, 10 * PAGE, PAGE, 7),  # an empty range still gets its page
    ]
    assert starts == [100, PAGE, 3 * PAGE - 1, 4 * PAGE + 7]
    assert nbytes == 5 * PAGE
    assert direct_layout([]) == (0, [], [])


def test_direct_spans_read_neighbouring_ranges_as_one_run_in_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readahead, "SPAN_PIECE", 2 * PAGE)
    places = [
        (100, 1000),  # run 1
        (1100, 3000),  # touches the one before
        (4100 + PAGE, 10),  # a page after the end: same run
        (4110 + 2 * PAGE + 1, 5),  # more than a page after: a new run
        (50, 10),  # before the run's end: a new run
    ]
    nbytes, starts, reads = direct_spans(places)
    run1_end = 4110 + PAGE  # bytes 100..run1_end in one slot of pages 0..2
    run2 = 4110 + 2 * PAGE + 1
    assert starts == [100, 1100, 4100 + PAGE, 3 * PAGE + run2 % PAGE, 4 * PAGE + 50]
    assert reads == [
        (0, 0, 2 * PAGE, 2 * PAGE),
        (2 * PAGE, 2 * PAGE, PAGE, run1_end - 2 * PAGE),
        (3 * PAGE, run2 // PAGE * PAGE, PAGE, run2 % PAGE + 5),
        (4 * PAGE, 0, PAGE, 60),
    ]
    assert nbytes == 5 * PAGE
    # the gap may be set; at 0 only ranges that touch share a run
    assert direct_spans([(0, 10), (10, 10), (21, 1)], gap=0)[1] == [0, 10, PAGE + 21]


def test_aligned_buffers_start_on_a_page() -> None:
    assert len(aligned_buffer(0)) == 0
    for nbytes in (1, PAGE, 3 * PAGE + 5):
        buffer = aligned_buffer(nbytes)
        assert len(buffer) == nbytes and buffer.dtype == np.uint8
        assert buffer.ctypes.data % PAGE == 0


@pytest.mark.parametrize("count", [1, 2, 3, 200])
def test_read_into_and_read_direct_land_the_files_bytes(path: Path, count: int) -> None:
    data = path.read_bytes()
    rng = np.random.default_rng(count)
    spans = [
        (int(rng.integers(0, len(data) - 9000)), int(rng.integers(1, 9000))) for _ in range(count)
    ]
    with ShardFile(path) as shard:
        buffer = np.zeros(sum(n for _, n in spans), dtype=np.uint8)
        places, at = [], 0
        for offset, n in spans:
            places.append((at, offset, n))
            at += n
        assert read_into(shard, buffer, places)
        assert buffer.tobytes() == b"".join(data[o : o + n] for o, n in spans)
        nbytes, starts, reads = direct_layout(spans)
        direct = aligned_buffer(nbytes)
        assert read_direct(shard, direct, reads)
        for (offset, n), start in zip(spans, starts, strict=True):
            assert direct[start : start + n].tobytes() == data[offset : offset + n]
        # past the end of the file: a short read is a failure, not bytes
        end = len(data) // PAGE * PAGE
        assert not read_into(shard, np.zeros(2 * PAGE, np.uint8), [(0, end, 2 * PAGE)] * count)
        assert not read_direct(
            shard, aligned_buffer(2 * PAGE), [(0, end, 2 * PAGE, 2 * PAGE)] * count
        )
        # the last page of the file: what the file holds is enough
        tail = len(data) - end
        last = aligned_buffer(PAGE)
        assert read_direct(shard, last, [(0, end, PAGE, tail)])
        assert last[:tail].tobytes() == data[end:]


def test_reads_of_a_shard_without_a_local_file_say_so(path: Path) -> None:
    with ShardFile(path) as shard:
        shard._fd_tried = shard._direct_tried = True  # as for a replaced file
        buffer = aligned_buffer(PAGE)
        assert not read_into(shard, buffer, [(0, 0, 10)])
        assert not read_direct(shard, buffer, [(0, 0, PAGE, 10)])
        assert read_checked(shard, 1, [(0, [(buffer[:4], 0, 4)]), (3, [])], False) == [0, 3]


# one parametrize (tools/mutation_quick.py leaves stacked ones to pytest)
@pytest.mark.parametrize(
    ("direct", "in_flight"), [(d, n) for d in (False, True) for n in (1, 3, 16)]
)
def test_read_checked_hands_out_checked_bytes_and_names_what_it_could_not(
    path: Path, tmp_path: Path, direct: bool, in_flight: int
) -> None:
    with ShardFile(path, verify="never") as shard:
        num_pages = shard.meta.num_pages
        places = [shard.chunk_place(p, 1) for p in range(num_pages)]
    data = bytearray(path.read_bytes())
    bad_page = 2
    offset, length, _ = places[bad_page]
    data[offset + length - 3] ^= 1
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(data))
    clear_verified()
    with ShardFile(damaged, verify="once") as shard:
        jobs = []
        for page in range(num_pages):
            length = places[page][1]
            targets = [
                (np.full(10, 0xEE, np.uint8), 0, 10),
                (np.full(length - 100, 0xEE, np.uint8), 100, length),
            ]
            jobs.append((page, targets))
        not_done = read_checked(shard, 1, jobs, direct, in_flight)
        assert not_done == [bad_page]
        for page, targets in jobs:
            offset, length, _ = places[page]
            chunk = bytes(data[offset : offset + length])
            for dest, a, b in targets:
                if page == bad_page:
                    assert (dest == 0xEE).all()  # damaged bytes are never handed out
                else:
                    assert dest.tobytes() == chunk[a:b]
        verified = shard.verified_chunks(np.arange(num_pages), 1).tolist()
        assert verified == [page != bad_page for page in range(num_pages)]


def test_chunks_over_the_arrival_limit_are_left_to_the_caller(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ShardFile(path, verify="once") as shard:
        lengths = [shard.chunk_place(p, 1)[1] for p in range(shard.meta.num_pages)]
        limit = sorted(lengths)[len(lengths) // 2]
        monkeypatch.setattr(readahead, "ARRIVAL_MAX_BYTES", limit)
        jobs: list[tuple[int, list[tuple[np.ndarray, int, int]]]] = [
            (p, []) for p in range(len(lengths))
        ]
        assert read_checked(shard, 1, jobs, False) == [
            p for p, n in enumerate(lengths) if n > limit
        ]


def test_looks_resident_needs_every_sampled_page_in_memory(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out: set[int] = set()  # pages of the file not in memory

    with ShardFile(path) as shard:
        base = shard.map_address()
        assert base is not None

        def mincore(address: object, length: int, vec: object) -> int:
            if address.value % PAGE:  # type: ignore[attr-defined]
                return -1  # EINVAL, as the kernel's
            first = (address.value - base) // PAGE  # type: ignore[attr-defined]
            for i in range(length // PAGE):
                vec[i] = 0 if first + i in out else 1  # type: ignore[index]
            return 0

        monkeypatch.setattr(readahead, "_mincore", mincore)
        ranges = [(0, 3 * PAGE), (5 * PAGE, 1), (6 * PAGE + 10, PAGE)]
        assert readahead.looks_resident(shard, ranges)
        for page in (0, 2, 5, 6, 7):
            out.clear()
            out.add(page)
            assert not readahead.looks_resident(shard, ranges), page
        out.clear()
        out.update({3, 4, 8})  # between and after the ranges
        assert readahead.looks_resident(shard, ranges)
        monkeypatch.setattr(readahead, "_mincore", lambda *args: -1)
        assert not readahead.looks_resident(shard, ranges)
        monkeypatch.setattr(readahead, "_mincore", None)
        assert not readahead.looks_resident(shard, ranges)


def test_hint_rows_hints_cold_rows_and_skips_warm_ones(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readahead, "ENABLED", True)
    warm = [False]
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: warm[0])
    with ShardFile(path, verify="never") as shard:
        pages, slots = _where(shard, [13, 2, 3, 20])
        hinted: list[list[tuple[int, int]]] = []
        monkeypatch.setattr(shard, "will_need", hinted.append)
        want = row_ranges(shard, pages, slots, ["id", "blob"])
        # the heads (value offsets) not parsed yet are hinted first, all at once
        heads = [shard.head_range(p, 1) for p in sorted(set(pages.tolist()))]
        assert hinted == [_runs(_pages(heads))]
        hinted.clear()
        assert readahead.hint_rows(shard, pages, slots, ["id", "blob"]) == len(want)
        assert hinted == [want]
        assert readahead.hint_rows(shard, pages[:0], slots[:0], ["id"]) == 0
        warm[0] = True
        assert readahead.hint_rows(shard, pages, slots, ["id", "blob"], beyond_memory=True) == 0
        warm[0] = False
        assert readahead.hint_rows(shard, pages, slots, ["id"], beyond_memory=True) > 0
        warm[0] = True
        assert readahead.hint_rows(shard, pages, slots, ["id", "blob"]) == 0
        warm[0] = False  # within WARM_SECONDS of a warm block: not looked at
        monkeypatch.setattr(readahead, "WARM_SECONDS", 3600.0)
        readahead._warm_until[shard] = 0.0
        warm[0] = True
        readahead.hint_rows(shard, pages, slots, ["id"])
        warm[0] = False
        hinted.clear()
        assert readahead.hint_rows(shard, pages, slots, ["id"]) == 0 and hinted == []
        monkeypatch.setattr(readahead, "ENABLED", False)
        assert readahead.hint_rows(shard, pages, slots, ["id"], beyond_memory=True) == 0


def test_values_in_memory_look_resident_wherever_they_start(path: Path) -> None:
    """``mincore`` takes a page-aligned address: a value starting inside a page is looked
    up from its page's start (it was taken as cold, and read again from the disk with
    direct I/O although it was in memory)."""
    with ShardFile(path, verify="never") as shard:
        assert int(shard.file_bytes.sum()) > 0  # every page of the file read: in memory
        size = shard.size
        assert readahead.looks_resident(shard, [(0, 100)])
        assert readahead.looks_resident(shard, [(10, 100)])
        assert readahead.looks_resident(shard, [(PAGE + 10, PAGE), (size - 5, 5)])


def test_many_places_are_each_read_once(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 places (several a task on the I/O threads): one ``pread`` each, none twice
    (direct reads included: their threads' path, where native AIO is not used)."""
    import os
    import threading

    data = path.read_bytes()
    count = 300
    seen: list[int] = []
    lock = threading.Lock()
    real = os.preadv

    def spy(fd: int, buffers: list[memoryview], offset: int) -> int:
        with lock:
            seen.append(offset)
        return real(fd, buffers, offset)

    with ShardFile(path) as shard:
        monkeypatch.setattr(os, "preadv", spy)
        monkeypatch.setattr(readahead, "read_batch", lambda *args: None)
        spans = [(i * 500, 100) for i in range(count)]
        buffer = np.zeros(100 * count, dtype=np.uint8)
        assert read_into(shard, buffer, [(100 * i, o, n) for i, (o, n) in enumerate(spans)])
        assert sorted(seen) == [o for o, _ in spans]
        assert buffer.tobytes() == b"".join(data[o : o + n] for o, n in spans)
        seen.clear()
        pages = [(i % 40 * PAGE, PAGE) for i in range(count)]
        nbytes, starts, reads = direct_layout(pages)
        direct = aligned_buffer(nbytes)
        assert read_direct(shard, direct, reads)
        assert sorted(seen) == sorted(o for o, _ in pages)
        for (offset, n), start in zip(pages, starts, strict=True):
            assert direct[start : start + n].tobytes() == data[offset : offset + n]


def test_the_loaded_mincore_tells_a_page_in_memory() -> None:
    """``_load_mincore`` runs once, at import (before any test); called again here, it gives
    the C library's ``mincore``, typed so that an address and a length go through whole and
    its int result comes back (0: asked pages, 1 in their byte: in memory)."""
    import ctypes

    mincore = readahead._load_mincore()
    assert mincore is not None
    buffer = aligned_buffer(2 * PAGE)
    buffer[:] = 7  # touched: in memory
    vec = (ctypes.c_ubyte * 2)()
    assert mincore(ctypes.c_void_p(buffer.ctypes.data), 2 * PAGE, vec) == 0
    assert [v & 1 for v in vec] == [1, 1]
    assert mincore(ctypes.c_void_p(buffer.ctypes.data + 1), PAGE, vec) == -1  # unaligned


Jobs = list[tuple[int, list[tuple[np.ndarray, int, int]]]]


def _spy_preads(
    monkeypatch: pytest.MonkeyPatch,
    fail: Callable[[int, int], OSError | None] = lambda fd, at: None,
) -> list[tuple[int, int, bool, int]]:
    """Every ``os.preadv`` from any thread as ``(offset, bytes asked, through O_DIRECT,
    bytes read)``; ``fail(fd, offset)`` may return an error to raise instead of reading
    (-1 read). The kernel's failures are played here: root cannot provoke them. Direct
    reads go to the I/O threads too (native AIO off), so that this sees them."""
    import fcntl
    import os
    import threading

    seen: list[tuple[int, int, bool, int]] = []
    lock = threading.Lock()
    real = os.preadv

    def spy(fd: int, buffers: list[memoryview], offset: int) -> int:
        direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
        asked = sum(len(b) for b in buffers)
        error = fail(fd, offset)
        got = -1 if error is not None else real(fd, buffers, offset)
        with lock:
            seen.append((offset, asked, direct, got))
        if error is not None:
            raise error
        return got

    monkeypatch.setattr(os, "preadv", spy)
    monkeypatch.setattr(readahead, "read_batch", lambda *args: None)
    return seen


def _jobs(shard: ShardFile, pages: list[int]) -> Jobs:
    """Each page's whole ``blob`` chunk as one target, filled with 0xEE before."""
    lengths = [shard.chunk_place(page, 1)[1] for page in pages]
    return [
        (page, [(np.full(n, 0xEE, np.uint8), 0, n)]) for page, n in zip(pages, lengths, strict=True)
    ]


def _landed(path: Path, shard: ShardFile, jobs: Jobs) -> list[bool]:
    """Whether each job's target got its chunk's bytes exactly."""
    data = path.read_bytes()
    out = []
    for page, [(dest, _, _)] in jobs:
        offset, length, _ = shard.chunk_place(page, 1)
        out.append(dest.tobytes() == data[offset : offset + length])
    return out


@pytest.mark.parametrize("direct", [False, True])
def test_read_checked_reads_each_chunk_once_direct_only_when_asked(
    path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """``direct``: every chunk comes through the ``O_DIRECT`` descriptor (no page cache
    filled beyond memory); otherwise through the page cache (values found in memory are not
    read from the disk again). One read per chunk either way."""
    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        jobs = _jobs(shard, pages)
        preads = _spy_preads(monkeypatch)
        assert read_checked(shard, 1, jobs, direct, 4) == []
        assert _landed(path, shard, jobs) == [True] * len(pages)
        places = sorted(shard.chunk_place(p, 1)[0] for p in pages)
        if direct:  # from the page each chunk starts in
            places = [p - p % PAGE for p in places]
        assert sorted(o for o, _, _, _ in preads) == places
        assert {d for _, _, d, _ in preads} == {direct}


def test_a_refused_direct_read_is_read_through_the_page_cache(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that refuses the direct read (EINVAL for the alignment): each chunk is
    read again buffered, checked and handed out; none is left to the caller."""
    import errno
    import fcntl
    import os

    def refuse(fd: int, at: int) -> OSError | None:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            return OSError(errno.EINVAL, "Invalid argument")
        return None

    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        jobs = _jobs(shard, pages)
        preads = _spy_preads(monkeypatch, refuse)
        assert read_checked(shard, 1, jobs, True, 4) == []
        assert _landed(path, shard, jobs) == [True] * len(pages)
        assert shard.verified_chunks(np.array(pages), 1).all()
        buffered = sorted(o for o, _, d, _ in preads if not d)
        assert buffered == sorted(shard.chunk_place(p, 1)[0] for p in pages)


@pytest.mark.parametrize("direct", [False, True])
def test_a_chunk_whose_read_fails_is_left_to_the_caller(
    path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """An I/O error reading chunk 1 (both ways): it is named as not done, nothing is
    written to its targets and it stays unverified; the others are done."""
    import errno

    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        bad = shard.chunk_place(1, 1)[0]

        def eio(fd: int, at: int) -> OSError | None:
            hit = at <= bad < at + 2 * PAGE
            return OSError(errno.EIO, "Input/output error") if hit else None

        jobs = _jobs(shard, pages)
        _spy_preads(monkeypatch, eio)
        assert read_checked(shard, 1, jobs, direct, 4) == [1]
        assert (jobs[1][1][0][0] == 0xEE).all()
        assert _landed(path, shard, jobs) == [p != 1 for p in pages]
        assert shard.verified_chunks(np.array(pages), 1).tolist() == [p != 1 for p in pages]


def test_read_checked_marks_only_its_columns_chunks(path: Path) -> None:
    with ShardFile(path, verify="once") as shard:
        assert read_checked(shard, 1, _jobs(shard, [0, 2]), False) == []
        pages = np.arange(shard.meta.num_pages)
        assert shard.verified_chunks(pages, 1).tolist() == [p in (0, 2) for p in pages]
        assert not shard.verified_chunks(pages, 0).any()
        assert not shard.verified_chunks(pages, 2).any()


@pytest.mark.parametrize(("in_flight", "threads", "want"), [(1, 16, 1), (3, 16, 3), (8, 2, 2)])
def test_read_checked_holds_a_buffer_per_read_in_flight(
    path: Path, monkeypatch: pytest.MonkeyPatch, in_flight: int, threads: int, want: int
) -> None:
    """Each read in flight holds a buffer of its chunk: at most ``in_flight`` (what a reader
    in a small memory group passes) and ``IO_THREADS`` of them, whatever the chunks."""
    made: list[int] = []
    real = readahead.aligned_buffer

    def counted(nbytes: int) -> np.ndarray:
        made.append(nbytes)
        return real(nbytes)

    monkeypatch.setattr(readahead, "aligned_buffer", counted)
    monkeypatch.setattr(readahead, "IO_THREADS", threads)
    with ShardFile(path, verify="once") as shard:
        pages = list(range(shard.meta.num_pages))
        assert len(pages) > 8
        jobs = _jobs(shard, pages)
        assert read_checked(shard, 1, jobs, False, in_flight) == []
        assert _landed(path, shard, jobs) == [True] * len(pages)
    assert len(made) == want


def test_a_chunk_ending_on_a_page_boundary_is_read_direct_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct read returns whole pages; when the chunk ends exactly at a page's end, what
    came back is all of it (not a short read to read again buffered)."""

    def write(pad: int) -> Path:
        file = tmp_path / f"p{pad}"
        with FileWriter(file) as writer:
            writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
            writer.write_raw_data([{"id": 0, "blob": b"v" * (3 * PAGE + pad)}])
        clear_verified()
        return file

    with ShardFile(write(0), verify="never") as shard:
        offset, length, _ = shard.chunk_place(0, 1)
    file = write(-(offset + length) % PAGE)
    with ShardFile(file, verify="once") as shard:
        offset, length, _ = shard.chunk_place(0, 1)
        assert (offset + length) % PAGE == 0
        jobs = _jobs(shard, [0])
        preads = _spy_preads(monkeypatch)
        assert read_checked(shard, 1, jobs, True) == []
        assert _landed(file, shard, jobs) == [True]
        assert [(o, d) for o, _, d, _ in preads] == [(offset - offset % PAGE, True)]


def test_the_io_threads_are_one_pool_of_io_threads_reads_in_flight() -> None:
    """One pool per process, reused by every read: ``IO_THREADS`` reads can be in flight at
    once (all of them wait here together), on threads named ``mrecord-io`` (as a user sees
    them in a stack dump)."""
    import threading

    pool = readahead.io_pool()
    assert readahead.io_pool() is pool
    together = threading.Barrier(readahead.IO_THREADS, timeout=60)

    def wait(_: int) -> str:
        together.wait()  # BrokenBarrierError unless IO_THREADS run at once
        return threading.current_thread().name

    names = list(pool.map(wait, range(readahead.IO_THREADS)))
    assert all(name.startswith("mrecord-io") for name in names), names
    assert readahead.io_pool() is pool


@pytest.mark.parametrize("count", [1, 40])
def test_a_refused_direct_read_is_a_failure_not_bytes(
    path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """A file system refusing the direct reads (EINVAL): ``read_direct`` says it could not
    (the caller then reads buffered), it never hands the buffer's old bytes out as values."""
    import errno

    with ShardFile(path) as shard:
        _spy_preads(monkeypatch, lambda fd, at: OSError(errno.EINVAL, "Invalid argument"))
        nbytes, _, reads = direct_layout([(i * PAGE, 100) for i in range(count)])
        assert not read_direct(shard, aligned_buffer(nbytes), reads)


def test_warm_or_cold_is_told_from_a_sample_of_the_rows(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm test looks at the ranges of at most ``_SAMPLE`` rows spread over the
    read (first and last included), not at every row's (measured: the whole list cost
    as much as reading a warm block); a cold read still hints every row's bytes."""
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_SAMPLE", 3)
    looked_at: list[list[tuple[int, int]]] = []

    def cold(shard: ShardFile, ranges: list[tuple[int, int]]) -> bool:
        looked_at.append(ranges)
        return False

    monkeypatch.setattr(readahead, "_looks_warm", cold)
    with ShardFile(path, verify="never") as shard:
        ids = list(range(ROWS))
        pages, slots = _where(shard, ids)
        hinted: list[list[tuple[int, int]]] = []
        want = row_ranges(shard, pages, slots, ["id"])
        monkeypatch.setattr(shard, "will_need", hinted.append)
        assert readahead.hint_rows(shard, pages, slots, ["id"], beyond_memory=True) > 0
        sample = [0, (ROWS - 1) // 2, ROWS - 1]
        sampled = row_ranges(shard, pages[sample], slots[sample], ["id"])
        assert looked_at == [sampled] and sampled != want
        assert hinted == [want]


def _read_blocks(
    path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: list[bool], blocks: int
) -> tuple[list[int], list[int], int]:
    """Hint the same three rows ``blocks`` times beyond memory, the warm test answering
    ``verdicts`` in turn: (the blocks that were tested, each hint's answer, the hints
    given to the shard)."""
    monkeypatch.setattr(readahead, "ENABLED", True)
    answers_left = iter(verdicts)
    tested: list[int] = []
    current = [0]  # the block being read

    def looks(shard: ShardFile, ranges: list[tuple[int, int]]) -> bool:
        tested.append(current[0])
        return next(answers_left)

    monkeypatch.setattr(readahead, "_looks_warm", looks)
    with ShardFile(path, verify="never") as shard:
        pages, slots = _where(shard, [1, 9, 17])
        hinted: list[list[tuple[int, int]]] = []
        monkeypatch.setattr(shard, "will_need", hinted.append)
        answers = []
        for current[0] in range(blocks):
            answers.append(readahead.hint_rows(shard, pages, slots, ["id"], beyond_memory=True))
    return tested, answers, len(hinted)


def test_beyond_memory_a_run_of_cold_blocks_is_retested_every_fourth(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond memory, after two cold blocks in a row a shard's blocks are taken as cold
    with the warm test run on every fourth only (it was a tenth of a random block's
    CPU); each is still hinted. Readers whose data fits test every block (a warm page
    cache must keep its zero-copy views)."""
    tested, answers, hints = _read_blocks(path, monkeypatch, [False] * 16, 16)
    # tested: the first two (both cold), then every fourth (all cold here)
    assert tested == [0, 1, 4, 8, 12]
    assert all(answer > 0 for answer in answers)
    assert hints == 16
    with ShardFile(path, verify="never") as fits:
        pages, slots = _where(fits, [1, 9, 17])
        monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
        monkeypatch.setattr(fits, "will_need", lambda ranges: None)
        seen: list[int] = []
        real = readahead.row_ranges

        def counted(*args: Any, **kwargs: Any) -> list[tuple[int, int]]:
            seen.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(readahead, "row_ranges", counted)
        for _ in range(8):
            readahead.hint_rows(fits, pages, slots, ["id"], beyond_memory=False)
        assert len(seen) == 16  # the sample's and the hint's, every block


def test_a_warm_block_beyond_memory_restarts_the_count(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = [False, False, True, False, False, False, False]
    tested, answers, _ = _read_blocks(path, monkeypatch, verdicts, 8)
    # blocks 0, 1 cold; 2 and 3 skipped (trusted cold); 4 tested: warm (0, nothing
    # hinted); the count starts again: 5 and 6 tested (cold), 7 trusted
    assert tested == [0, 1, 4, 5, 6]
    assert answers[4] == 0 and all(answers[i] > 0 for i in (0, 1, 2, 3, 5, 6, 7))


def test_a_warm_read_still_checks_its_unchecked_chunks_ahead(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``verify="once"`` a warm block's chunks not checked yet are checked by the
    I/O threads, before the read, and nothing is hinted."""
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: True)
    with ShardFile(path, verify="once") as shard:
        pages, slots = _where(shard, [1, 9, 17])
        hinted: list[list[tuple[int, int]]] = []
        monkeypatch.setattr(shard, "will_need", hinted.append)
        unique = np.unique(pages)
        assert not shard.verified_chunks(unique, 0).any()
        assert readahead.hint_rows(shard, pages, slots, ["id", "blob"], beyond_memory=True) == 0
        assert hinted == []
        assert shard.verified_chunks(unique, 0).all() and shard.verified_chunks(unique, 1).all()
        others = np.setdiff1d(np.arange(shard.meta.chunks.shape[0]), unique)
        assert not shard.verified_chunks(others, 0).any()


def test_a_chunk_checked_on_arrival_is_asked_for_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk longer than one ``pread`` piece is asked of the kernel whole
    (``POSIX_FADV_WILLNEED``) before its pieces are read: one request for the device,
    not one per piece (a hard disk's few hundred IOPS were the cost)."""
    import os

    import mrecord.storage.shard as shard_module

    file = tmp_path / "big.mrecord"
    with FileWriter(file) as writer:
        writer.add_schema({"v": {"type": "float32", "shape": [1024]}})
        writer.set_page_size(4 << 20)
        writer.write_raw_data({"v": np.ones((600, 1024), dtype=np.float32)})
    clear_verified()
    advised: list[tuple[int, int, int]] = []
    real = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append((offset, length, advice))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    with ShardFile(file, verify="once") as shard:
        offset, length, _ = shard.chunk_place(0, 0)
        assert length > shard_module._PIECE
        shard.verify_arriving(0, 0)
        assert shard.verified_chunks(np.array([0]), 0).all()
    assert (offset, length, os.POSIX_FADV_WILLNEED) in advised


def test_a_read_the_system_refuses_names_the_file_and_the_bytes(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``OSError`` from ``pread`` (EIO from a failing disk; here EISDIR from a folder's
    descriptor standing in) is a StorageError naming the file, the bytes and the errno,
    not a bare OSError, and not a fall back to the map (a fault there on a failing disk
    is SIGBUS)."""
    import errno
    import os

    from mrecord.errors import StorageError

    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        with ShardFile(path) as shard:
            monkeypatch.setattr(shard, "read_fd", lambda: folder)
            with pytest.raises(StorageError) as caught:
                read_into(shard, np.zeros(100, np.uint8), [(0, 4096, 100)])
    finally:
        os.close(folder)
    assert caught.value.errno == errno.EISDIR
    message = str(caught.value)
    assert str(path) in message and "bytes 4096-4196" in message and "EISDIR" in message
