"""Which bytes of a shard the coming rows need, and telling the shard (read-ahead).

Every order mrecord reads in is a pure function (``mrecord.sampling``), so a reader knows
its coming rows before it reads them. :func:`hint_rows` turns rows of columns into the
exact byte ranges a read of them will touch and hands those to
:meth:`ShardFile.will_need <mrecord.storage.shard.ShardFile.will_need>`, which starts
reading them all at once (many requests in flight instead of one page fault at a time,
and no kernel read-around pulling megabytes of neighbours per row).

What a read touches depends on the chunk, so that is decided here, not by the reader:

- a chunk not yet checksummed under the shard's ``verify`` policy, a compressed chunk, or
  a variable-size chunk whose head (value offsets) nobody has parsed yet is read whole: it
  arrives in one request and is checked as it arrives (no second pass over the file);
- otherwise only the rows' own bytes: ``row_nbytes`` at the row's place in a fixed-width
  chunk, or the value's span in a variable-size chunk;
- except on a cold block, the plain chunks of bytes columns that still need their checksum:
  the reader reads those itself (:func:`read_checked`), each with one ``pread`` into an I/O
  thread's buffer, checks it there and copies the block's values out, so that the chunk's
  bytes come off the disk once (checking it first and reading the values after read them
  twice whenever memory was short or the values went by direct I/O).

Hints cost a system call per range, which a warm page cache does not need: before hinting,
a few of the ranges' first pages are looked up with ``mincore``; when they are all in memory
the block is taken as warm and nothing is hinted (a wrong guess only costs a page fault).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, NamedTuple, TypeVar

import numpy as np

from mrecord.format.compression import CODEC_IDS, checksum_releasing
from mrecord.format.ids import sorted_unique
from mrecord.format.schema import FieldKind
from mrecord.storage.buffer_pool import aligned_buffer
from mrecord.storage.failures import read_failure
from mrecord.storage.kernel_aio import read_batch
from mrecord.storage.shard import ShardFile, rows_by_page

__all__ = [
    "ARRIVAL_MAX_BYTES",
    "DIRECT_MIN_BYTES",
    "ENABLED",
    "IO_THREADS",
    "SMALL_CHUNK_BYTES",
    "SPAN_PIECE",
    "STREAM_AHEAD_MAX",
    "aligned_buffer",
    "chunk_region",
    "direct_layout",
    "direct_spans",
    "hint_heads",
    "hint_rows",
    "io_pool",
    "looks_resident",
    "on_io_threads",
    "pread_exactly",
    "read_checked",
    "read_checked_in_place",
    "read_direct",
    "read_into",
    "resident_pages",
    "row_ranges",
    "stream_ahead",
    "verify_chunks",
]

ENABLED = os.environ.get("MRECORD_READAHEAD", "1") != "0"
"""``MRECORD_READAHEAD=0`` turns hints off (to compare; reads are the same either way)."""

_PAGE = mmap.PAGESIZE
IO_THREADS = int(os.environ.get("MRECORD_IO_THREADS", "16"))
"""Reads in flight at once, chunks checked and values read (the I/O depth; not capped by
the core count: the threads wait on the disk, and CRC-32C releases the GIL). Not 32 (the
queue depth the device's limit is measured at): with 32 threads a reader in a 96 MB
memory group over 240 MB of 100 KB rows was OOM-killed (tests/storage/test_beyond_ram.py; each
thread's reads grow their own malloc arena), with 16 it is not."""
_SAMPLE_PAGES = 64  # pages of each sampled range looked up
_SAMPLE = 64
"""Rows sampled, and of their ranges those looked up, to tell a warm block from a cold
one. A block taken for warm is read from the map, each page not in memory a 4 KiB fault
one after the other: on a file partly in memory (the first half of 571 MB of images
cached, 256 random rows a read) 16 let 0.8^16 of the blocks through as warm (9,104
major faults, 4,570-4,700 rows/s, slower than the same file wholly cold, 6,300); 64 none
(0 faults, 9,631-9,955 rows/s). Warm reads look once per ``WARM_SECONDS``: no change
beyond the spread (images, 256 random ids a read, four alternating pairs)."""
_CODEC_NONE = CODEC_IDS["none"]


def row_ranges(
    shard: ShardFile,
    pages: np.ndarray,
    slots: np.ndarray,
    columns: Sequence[str],
    verify_pool: Callable[[ShardFile, list[int], int], None] | None = None,
    direct: Collection[str] = (),
    arriving: Collection[str] = (),
    parse_heads: bool = True,
) -> list[tuple[int, int]]:
    """The ``(offset, length)`` byte ranges of ``shard`` that reading rows (``pages``,
    ``slots``) of ``columns`` touches, merged where they touch the same pages, in file
    order (see the module docstring for what each kind of chunk needs).

    ``verify_pool(shard, pages, col)``, when given, checksums chunks not yet verified
    first (:func:`verify_chunks`); the ones it verified then need only their rows' bytes.
    Columns in ``direct`` are read by the caller with :func:`read_into` (their chunks are
    still checked and their heads parsed; their values' ranges are left out). Columns in
    ``arriving`` (a subset of ``direct``) are checked by the caller too, as their chunks
    arrive (:func:`read_checked`): their plain chunks are neither checked here nor read
    whole. Fixed-width columns in ``direct`` are the caller's altogether (read whole and
    checked into buffers of its own, :mod:`mrecord.storage.chunk_buffers`): no range.

    Heads of variable-size chunks not parsed yet are read and parsed on the way; with
    ``parse_heads`` False nothing is read: such a chunk's range is the page in its middle,
    among its values (enough to tell a warm block from a cold one, which a sample of rows
    did by reading their heads first; the head itself may be in memory alone, asked for by
    a lookahead)."""
    if not len(pages):
        return []
    chunks = shard.meta.chunks
    unique_pages = sorted_unique(pages)
    plans: list[_ColumnPlan] = []
    for name in columns:
        col = shard.field_index(name)
        field = shard.meta.schema.fields[col]
        if field.kind is FieldKind.FIXED and name in direct:
            continue  # read whole and checked by the caller, into buffers of its own
        if field.kind is FieldKind.FIXED and shard.indexed_column(col) is not None:
            continue  # the values come from the head index's copies: nothing to read
        whole = chunks[unique_pages, col]["codec"] != _CODEC_NONE
        # Chunks whose values the reader checks one by one (ShardFile.checks_by_value):
        # only the values it takes (and the head and table) are read, not the chunk.
        by_value = shard.checks_by_value_mask(col)[unique_pages]
        unchecked = None
        if name in arriving:
            pass  # the caller reads these chunks' values and checks them as they arrive
        elif shard.verify == "always":
            whole |= ~by_value
        elif shard.verify == "once":
            unchecked = ~shard.verified_chunks(unique_pages, col) & ~by_value
        plans.append(_ColumnPlan(name, col, field.kind, whole, unchecked))
    if verify_pool is not None and shard.read_fd() is not None:
        _check_small_in_place(shard, plans, unique_pages)
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for plan in plans:
        col, whole = plan.col, plan.whole
        if plan.unchecked is not None:
            unchecked = plan.unchecked
            if unchecked.any() and verify_pool is not None:
                verify_pool(shard, unique_pages[unchecked].tolist(), col)
                unchecked &= ~shard.verified_chunks(unique_pages, col)
            whole |= unchecked
        if plan.kind is FieldKind.FIXED:
            row_bytes = shard.meta.schema.fields[col].row_nbytes
            exact = ~whole[np.searchsorted(unique_pages, pages)]
            if exact.any():
                base = chunks[pages[exact], col]["offset"].astype(np.int64)
                starts.append(base + slots[exact].astype(np.int64) * row_bytes)
                lengths.append(np.full(int(exact.sum()), row_bytes, dtype=np.int64))
        else:
            spans = plan.name not in direct  # a direct column's values are the caller's
            var_starts, var_lengths = _var_ranges(
                shard, col, pages, slots, unique_pages, whole, spans, parse_heads
            )
            starts.append(var_starts)
            lengths.append(var_lengths)
        if whole.any():
            column = chunks[unique_pages[whole], col]
            starts.append(column["offset"].astype(np.int64))
            lengths.append(column["length"].astype(np.int64))
    if not starts:
        return []
    return _merge(np.concatenate(starts), np.concatenate(lengths))


SMALL_CHUNK_BYTES = 4096
"""Fixed-width chunks up to this size that a cold block must check are checked in the
reading thread, from the map (:func:`_check_small_in_place`), not read again by the I/O
threads."""


def _check_small_in_place(
    shard: ShardFile, plans: list[_ColumnPlan], unique_pages: np.ndarray
) -> None:
    """Under ``verify="once"``, a cold block's small fixed-width chunks not checked yet
    (a label chunk of each page, a few dozen bytes beside the head of that page's bytes
    chunk): asked for together with the heads still to parse (one ``MADV_WILLNEED`` of
    their pages, mostly the same ones), then checked in this thread from the map; each
    intact one is marked verified, a damaged one left for the read to read whole and
    raise for. Before, each went to the I/O threads as a ``pread`` of its own: a cold
    random block of images checks one for nearly every row, and the hand-offs cost more
    than the checks (images GLOBAL, 2.4 GB in a 763 MB group, the first 4,000 rows of a
    cold epoch: pair ratios 0.96, 0.96, 0.98 and 0.88, medians of 10-14 alternating pairs)."""
    chunks = shard.meta.chunks
    small: list[tuple[np.ndarray, int, list[int]]] = []
    ranges: list[tuple[int, int]] = []
    for plan in plans:
        unchecked = plan.unchecked
        if plan.kind is not FieldKind.FIXED or unchecked is None or not unchecked.any():
            continue
        pages = unique_pages[unchecked]
        column = chunks[pages, plan.col]
        fits = column["length"] <= SMALL_CHUNK_BYTES
        if fits.any():
            small.append((unchecked, plan.col, pages[fits].tolist()))
            ranges += zip(
                column["offset"][fits].tolist(), column["length"][fits].tolist(), strict=True
            )
    if not small:
        return
    for plan in plans:  # heads still to parse: their reads go with these (_var_ranges)
        if plan.kind is not FieldKind.FIXED:
            heads = shard.cached_heads(plan.col)
            missing = [
                page
                for page, whole in zip(unique_pages.tolist(), plan.whole.tolist(), strict=True)
                if not whole and heads(page) is None
            ]
            if missing:
                missing = shard.parse_indexed(missing, plan.col)
            ranges += [shard.head_range(page, plan.col) for page in missing]
    shard.will_need(_merge_list(ranges))
    for unchecked, col, pages in small:
        for page in pages:
            shard.verify_arriving(page, col, in_place=True)
        unchecked &= ~shard.verified_chunks(unique_pages, col)  # the plan's own array


class _ColumnPlan(NamedTuple):
    """One column of a :func:`row_ranges` call: which of its chunks are read whole
    (``whole``, one entry per distinct page) and, under ``verify="once"``, which still
    need their checksum (``unchecked``; None: no check due here)."""

    name: str
    col: int
    kind: FieldKind
    whole: np.ndarray
    unchecked: np.ndarray | None


def _var_ranges(
    shard: ShardFile,
    col: int,
    pages: np.ndarray,
    slots: np.ndarray,
    unique_pages: np.ndarray,
    whole: np.ndarray,
    spans: bool = True,
    parse_heads: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Value spans of rows in variable-size chunks that need no checksum and are stored
    plain. Heads not parsed yet are read first, all at once (a few KiB each), and parsed;
    a chunk whose head does not parse is marked ``whole`` (its read will report why).
    ``spans`` False: only the heads (and ``whole``), no spans (measured: a quarter of a
    cold random block's reading thread went to spans nobody used). ``parse_heads``
    False: a chunk whose head is not parsed yet gives the page in its middle instead (for
    the warm test: where its values lie is not known before its head is read)."""
    heads = shard.cached_heads(col)
    missing = [
        page
        for page, is_whole in zip(unique_pages.tolist(), whole.tolist(), strict=True)
        if not is_whole and heads(page) is None
    ]
    if missing:  # heads the head index holds (format 1.4) need no read of their own
        missing = shard.parse_indexed(missing, col)
    out_starts: list[int] = []
    out_lengths: list[int] = []
    if missing and not parse_heads:
        # Where the rows' values lie is not known yet: the page in the middle of the chunk
        # stands for them. Not its head: a lookahead asks for heads alone
        # (hint_heads), and a file-order block beyond memory whose sampled heads were in
        # memory was taken for warm and read from the map (2.4 GB in a 763 MB group: its
        # epoch hit the group's limit 6,700-93,000 times, at a third of its rate).
        chunks = shard.meta.chunks
        for page in missing:
            chunk = chunks[page, col]
            middle = int(chunk["offset"]) + int(chunk["length"]) // 2
            out_starts.append(middle - middle % _PAGE)
            out_lengths.append(_PAGE)
    elif missing:
        ranges = _merge_list([shard.head_range(page, col) for page in missing])
        if not _looks_warm(shard, ranges):
            shard.will_need(ranges)
        for page in missing:
            shard.parse_head(page, col)
    if not spans:
        for i, page in enumerate(unique_pages.tolist()):
            whole[i] |= heads(page) is None and parse_heads
        return np.array(out_starts, dtype=np.int64), np.array(out_lengths, dtype=np.int64)
    offsets_of = shard.chunk_offsets(col)
    if len(pages) >= SPANS_BY_PAGE_FROM * len(unique_pages):
        return _spans_by_page(
            offsets_of, heads, pages, slots, whole, parse_heads, out_starts, out_lengths
        )
    index = np.searchsorted(unique_pages, pages).tolist()
    for page, slot, i in zip(pages.tolist(), slots.tolist(), index, strict=True):
        if whole[i]:
            continue
        head = heads(page)
        if head is None:
            whole[i] |= parse_heads
            continue
        offsets = head.offsets
        out_starts.append(offsets_of[page] + head.data_start + offsets[slot])
        out_lengths.append(offsets[slot + 1] - offsets[slot])
    return np.array(out_starts, dtype=np.int64), np.array(out_lengths, dtype=np.int64)


SPANS_BY_PAGE_FROM = 8
"""Rows per distinct page from which :func:`_var_ranges` takes each page's value spans in
one numpy step instead of a Python step per row."""


def _spans_by_page(
    offsets_of: list[int],
    heads: Callable[[int], Any],
    pages: np.ndarray,
    slots: np.ndarray,
    whole: np.ndarray,
    parse_heads: bool,
    out_starts: list[int],
    out_lengths: list[int],
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_var_ranges`' spans (after ``out_starts`` / ``out_lengths``, its ranges so
    far) for a read of many rows per page (file order, ``Shuffle.BLOCK``), a page at a
    time: the same ranges as its loop over rows, which was half of a reading thread's
    time in a file-order epoch of variable-shape rows beyond memory (py-spy)."""
    order, bounds, distinct = rows_by_page(pages)
    starts = [np.array(out_starts, dtype=np.int64)]
    lengths = [np.array(out_lengths, dtype=np.int64)]
    # the distinct pages ascending: the k-th is unique_pages[k], whose flag is whole[k]
    for k, page in enumerate(distinct):
        if whole[k]:
            continue
        head = heads(page)
        if head is None:
            whole[k] |= parse_heads
            continue
        table = head.offsets_array
        wanted = slots[order[bounds[k] : bounds[k + 1]]]
        first = table[wanted]
        starts.append(first + (offsets_of[page] + head.data_start))
        lengths.append(table[wanted + 1] - first)
    return np.concatenate(starts), np.concatenate(lengths)


def _merge_list(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    lengths = np.array([n for _, n in ranges], dtype=np.int64)
    return _merge(starts, lengths)


def _merge(starts: np.ndarray, lengths: np.ndarray) -> list[tuple[int, int]]:
    """Ranges as whole pages, sorted, those that touch or overlap merged into one."""
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    if not len(starts):
        return []
    first = starts // _PAGE
    last = (starts + lengths - 1) // _PAGE
    order = np.argsort(first, kind="stable")
    first, last = first[order], np.maximum.accumulate(last[order])
    # A new run starts where a range begins after every earlier one has ended (+1 page).
    new = np.empty(len(first), dtype=bool)
    new[0] = True
    new[1:] = first[1:] > last[:-1] + 1
    run_first = first[new]
    run_last = last[np.r_[np.flatnonzero(new)[1:] - 1, len(last) - 1]]
    return [
        (a * _PAGE, (b - a + 1) * _PAGE)
        for a, b in zip(run_first.tolist(), run_last.tolist(), strict=True)
    ]


def hint_heads(shard: ShardFile, pages: np.ndarray, columns: Sequence[str]) -> int:
    """Start reading what a cold read of rows in ``pages`` waits on before its values: the
    heads (value offsets, value checksums) of ``columns``' plain variable-size chunks not
    parsed yet, and, under ``verify="once"``, their fixed-width chunks not checked yet;
    returns how many merged ranges were asked for (0: none, read-ahead off, or not a
    local file). Never waits for them and never changes what a read returns.

    For a reader a few blocks ahead of its reads, on a thread of its own
    (``MindDataset`` beyond memory, :mod:`mrecord.pipeline.sources.lookahead`): a cold
    block's reading thread otherwise waits for these small reads first (two round trips
    to the disk) and only then reads its values. They land in the page cache through the
    file's read descriptor (``POSIX_FADV_WILLNEED``: the call lets the GIL go while the
    kernel queues the reads, which the map's ``MADV_WILLNEED`` through Python does not)."""
    if not ENABLED or not len(pages) or not hasattr(os, "posix_fadvise"):
        return 0
    fd = shard.read_fd()
    if fd is None:
        return 0
    chunks = shard.meta.chunks
    unique_pages = sorted_unique(pages)
    ranges: list[tuple[int, int]] = []
    for name in columns:
        col = shard.field_index(name)
        if shard.meta.schema.fields[col].kind is FieldKind.FIXED:
            if shard.verify == "once" and shard.indexed_column(col) is None:
                todo = chunks[unique_pages[~shard.verified_chunks(unique_pages, col)], col]
                ranges += zip(todo["offset"].tolist(), todo["length"].tolist(), strict=True)
            continue
        heads = shard.cached_heads(col)
        plain = unique_pages[chunks[unique_pages, col]["codec"] == _CODEC_NONE]
        missing = [page for page in plain.tolist() if heads(page) is None]
        if missing:  # the head index's (format 1.4) are parsed here, with no read
            missing = shard.parse_indexed(missing, col)
        ranges += [shard.head_range(page, col) for page in missing]
    if not ranges:
        return 0
    merged = _merge_list(ranges)
    try:
        for offset, length in merged:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        return 0  # a closed or replaced descriptor: hints are advice
    return len(merged)


def hint_rows(
    shard: ShardFile,
    pages: np.ndarray,
    slots: np.ndarray,
    columns: Sequence[str],
    direct: Collection[str] = (),
    beyond_memory: bool = False,
) -> int:
    """Tell ``shard`` which ranges reading rows (``pages``, ``slots``) of ``columns``
    will touch (:meth:`ShardFile.will_need`), unless they look warm already; returns how
    many ranges were hinted (0: nothing, warm, or read-ahead turned off).

    Chunks that ``verify="once"`` has not checked yet are read and checked first, in
    parallel and whatever the map's advice (:func:`verify_chunks`); then, when cold, only
    the rows' own bytes are hinted. A caller that gets a nonzero count should copy what it
    reads out of the map soon (its bytes may be evicted again when memory is short), and
    must itself check the plain chunks of the ``direct`` columns it reads that need a
    checksum (:func:`read_checked`): on a cold block those are left to it, so that each
    is read from the disk once, into the values, and checked there.

    ``beyond_memory``: the caller's files are larger than its memory, so they cannot be
    warm for long: every block is looked up, none skipped for ``WARM_SECONDS`` after a
    warm one (measured: the last block of a sequential epoch looked warm, and the next
    epoch's first blocks, taken as warm too, were served from the map one 4 KiB fault at
    a time, at a sixth of the rate)."""
    if not ENABLED or not len(pages):
        return 0
    now = time.monotonic()
    if not beyond_memory and _warm_until.get(shard, 0.0) > now:
        return 0  # found warm a moment ago: reads as before, at no cost per call
    if shard.map_address() is None:
        # Not a local map (mrecord.remote's range reads, which plan their own fetches of
        # the rows read, DatasetReader.plan_reads): left as they are.
        return 0
    # Warm or cold is told from a sample of the rows (before the checks below bring
    # chunks in): the ranges of every row cost as much again as the read of a warm block
    # (measured: a Shuffle.BLOCK read's hints were 65% of its reading threads' time,
    # each block looked up whole once for the warm test and once more for the hints).
    if not _trusted_cold(shard, beyond_memory):
        sample = _spread(len(pages), _SAMPLE)
        sampled = row_ranges(shard, pages[sample], slots[sample], columns, parse_heads=False)
        if not sampled:
            return 0
        if _looks_warm(shard, sampled):
            _cold_streak[shard] = 0
            if not beyond_memory:
                _warm_until[shard] = now + WARM_SECONDS
            if shard.verify == "once":
                _check_ahead(shard, pages, columns)
            return 0
    _cold_streak[shard] = _cold_streak.get(shard, 0) + 1
    shard.read_randomly()  # also when nothing below is hinted (values direct, heads indexed)
    if shard.verify == "once" or direct:
        ranges = row_ranges(shard, pages, slots, columns, verify_chunks, direct, direct)
    else:
        ranges = row_ranges(shard, pages, slots, columns)
    if ranges:  # none left when the direct columns' values are all the read needs
        shard.will_need(ranges)
    return max(1, len(ranges))  # cold: nonzero even then (the caller reads directly)


def _spread(n: int, k: int) -> np.ndarray:
    """Up to ``k`` indices of ``0..n-1`` spread evenly over it (first and last included)."""
    if n <= k:
        return np.arange(n)
    return np.linspace(0, n - 1, k).astype(np.int64)


def _check_ahead(shard: ShardFile, pages: np.ndarray, columns: Sequence[str]) -> None:
    """Under ``verify="once"``: checksum the chunks of ``pages`` not checked yet, in
    parallel (:func:`verify_chunks`), as :func:`row_ranges` does on its way, without the
    ranges a warm block does not hint (the read would check them one by one otherwise).
    Chunks checked value by value (:meth:`ShardFile.checks_by_value`) are left to the read."""
    unique_pages = sorted_unique(pages)
    for name in columns:
        col = shard.field_index(name)
        unchecked = ~shard.verified_chunks(unique_pages, col)
        unchecked &= ~shard.checks_by_value_mask(col)[unique_pages]
        if unchecked.any():
            verify_chunks(shard, unique_pages[unchecked].tolist(), col)


STREAM_AHEAD_MAX = 32 << 20
"""A read in file order beyond memory keeps up to this many bytes after it on their way
(:func:`stream_ahead`; less under a small memory budget)."""
_STREAM_STEP = 8 << 20  # bytes a sequential read-ahead call asks for


def stream_ahead(shard: ShardFile, start: int, end: int, ahead: int) -> bool:
    """A read in file order wants bytes ``start:end`` of ``shard`` now and what follows
    soon: keep the ``ahead`` bytes after ``end`` on their way (``POSIX_FADV_WILLNEED`` in
    8 MiB steps, each asked once: the kernel reads them as a few large requests), and
    drop from the page cache what lies more than ``ahead`` bytes behind ``start``.

    Measured on a 200 IOPS / 150 MB/s throttle (a hard disk), images in file order in a
    200 MB memory group: its chunks, heads and labels asked for one by one came to ~265
    requests of ~190 KB a second, 50 MB/s (33% of the throttle's sequential limit); a
    sequential stream ahead of them reads at 93% of it. A jump (a new epoch, a resumed
    one, another rank's part) starts the stream again where the read is. Whether the
    shard streams (False: not a local file, or read-ahead turned off)."""
    fd = shard.read_fd()
    if fd is None or not ENABLED or not hasattr(os, "posix_fadvise"):
        return False
    start -= start % _PAGE
    with _streams_lock:
        state = _streams.get(shard)
        if state is None or not start - ahead <= state[0] <= end + 2 * ahead:
            state = _streams[shard] = [start, min(start, state[1]) if state else 0]
        target = min(shard.size, end + ahead)
        asks: list[tuple[int, int]] = []
        while state[0] < target:
            length = min(_STREAM_STEP, target - state[0])
            asks.append((state[0], length))
            state[0] += length
        drop_to = max(0, start - ahead)
        drop_to -= drop_to % _PAGE
        drop = (state[1], drop_to - state[1]) if drop_to > state[1] else None
        if drop is not None:
            state[1] = drop_to
    try:
        for offset, length in asks:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
        if drop is not None:
            os.posix_fadvise(fd, drop[0], drop[1], os.POSIX_FADV_DONTNEED)
    except OSError:
        pass  # advice is optional
    return True


_streams: weakref.WeakKeyDictionary[ShardFile, list[int]] = weakref.WeakKeyDictionary()
_streams_lock = threading.Lock()


def _trusted_cold(shard: ShardFile, beyond_memory: bool) -> bool:
    """Whether this block of ``shard`` is taken as cold without the warm test: beyond
    memory, after ``_COLD_TRUST`` cold blocks in a row, but for every ``_COLD_RETEST``-th
    (each test costs a :func:`row_ranges` of a sample and a ``mincore``: measured, 3.6 us
    a row of a 62-row random block of images, a tenth of its reading thread's CPU). A
    warm block taken as cold is copied out of the page cache instead of viewed in the
    map: slower, never wrong."""
    if not beyond_memory:
        return False
    streak = _cold_streak.get(shard, 0)
    return streak >= _COLD_TRUST and streak % _COLD_RETEST != 0


_COLD_TRUST = 2
_COLD_RETEST = 4
_cold_streak: weakref.WeakKeyDictionary[ShardFile, int] = weakref.WeakKeyDictionary()


WARM_SECONDS = 0.05
"""After a block of a shard looks warm, that shard's reads skip read-ahead for this long
(a warm page cache then pays nothing per read; going cold is seen within this time)."""
_warm_until: weakref.WeakKeyDictionary[ShardFile, float] = weakref.WeakKeyDictionary()

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()


def io_pool() -> ThreadPoolExecutor:
    """The process's I/O threads (made again in a forked child, which has none)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="mrecord-io")
            _pool_pid = os.getpid()
        return _pool


_T = TypeVar("_T")


def on_io_threads(items: Sequence[_T], work: Callable[[_T], bool]) -> bool:
    """``work(item)`` for every item, all in flight at once: up to ``IO_THREADS`` tasks
    (the calling thread one of them) each take the next item as they finish the last;
    whether every ``work`` returned True. After a False or an exception no task takes
    another item (the caller reads another way, or gets the first task's exception once
    every task has ended: none outlives the call, whose buffers they write).

    One task per thread, not per item: a future per 100 KB read cost the reading thread
    more than the read's own Python did (measured: a cold random block of images spent
    a third of its time submitting and waiting on 57 futures)."""
    tasks = min(IO_THREADS, len(items))
    if tasks <= 1 or len(items) <= 2:
        return all(work(item) for item in items)
    next_item = iter(items).__next__
    lock = threading.Lock()
    stop = threading.Event()

    def drain() -> bool:
        try:
            while not stop.is_set():
                with lock:  # one shared iterator: each item is taken by exactly one task
                    try:
                        item = next_item()
                    except StopIteration:
                        return True
                if not work(item):
                    stop.set()
                    return False
            return False
        except BaseException:
            stop.set()
            raise

    pool = io_pool()
    futures = [pool.submit(drain) for _ in range(tasks - 1)]
    try:
        mine = drain()
    finally:
        # Tasks not started yet have nothing left to take: cancelled, they never wait
        # for a thread (a caller that is itself an I/O thread cannot deadlock the pool).
        # (wait() would still count a cancelled task as pending until a thread took it.)
        started = [future for future in futures if not future.cancel()]
        wait(started)
    results = [future.result() for future in started]  # raises a task's error
    return mine and all(results)


def verify_chunks(shard: ShardFile, pages: list[int], col: int) -> None:
    """Read and checksum chunks (``pages``, ``col``) of ``shard`` as they arrive, up to
    ``IO_THREADS`` at once, and wait for them (:meth:`ShardFile.verify_arriving`): under
    ``verify="once"`` a chunk's first read is its check, in the reader's order, with no
    pass over the file beside it."""

    def verify(page: int) -> bool:
        shard.verify_arriving(page, col)  # raises for a damaged chunk
        return True

    if len(pages) > 2 and shard.hinted:
        # All of them asked for at once (MADV_WILLNEED) before the I/O threads read them: a
        # cold random block of images checks a small label chunk for nearly every row,
        # and each thread's read waited for its own request (images GLOBAL in a 763 MB
        # group, first 4,000 rows of a cold epoch: median 0.577 s against 0.602 s, nine
        # runs each, alternating). Only on a map an order-aware reader already hinted:
        # the first hint turns the map's read-around off (ShardFile.will_need).
        shard.will_need([shard.chunk_place(page, col)[:2] for page in pages])
    on_io_threads(pages, verify)


def read_into(shard: ShardFile, buffer: np.ndarray, places: list[tuple[int, int, int]]) -> bool:
    """Read ``(at, offset, length)``: file bytes ``offset:offset + length`` into
    ``buffer[at:at + length]``, with ``pread``s on the I/O threads (all in flight at once,
    each exactly its bytes). False when the shard has no local file to ``pread`` or a read
    came back short: the caller then copies from the map. The bytes are the ones the map
    shows (the same file, through the same page cache), of chunks already checked. A read
    the system refuses (``EIO``) raises :class:`~mrecord.errors.StorageError` naming the
    file, the bytes and the errno (copying from the map would crash the process on
    ``SIGBUS`` instead)."""
    fd = shard.read_fd()
    if fd is None:
        return False
    view = buffer.data.cast("B")

    def read(place: tuple[int, int, int]) -> bool:
        a, off, n = place
        return pread_exactly(shard, fd, view[a : a + n], off)

    return on_io_threads(places, read)


def pread_exactly(shard: ShardFile, fd: int, into: memoryview, offset: int) -> bool:
    """Read ``len(into)`` bytes of ``shard``'s file at ``offset`` through ``fd``; False
    when fewer came back. A read the system refuses (``EIO``) raises
    :class:`~mrecord.errors.StorageError` naming the file and the bytes."""
    if not len(into):
        return True
    try:
        return bool(os.preadv(fd, [into], offset) == len(into))
    except OSError as exc:  # EIO from the device: say which file and where
        raise read_failure(exc, shard.path, offset, len(into)) from exc


ARRIVAL_MAX_BYTES = 2 << 20
"""Chunks up to this long that a cold read must check are read whole, once, into a buffer
of the reading I/O thread, checked there, and the wanted values copied out
(:func:`read_checked`). Longer ones are checked in pieces and their values read after
(their bytes read twice, for memory bounded at one buffer of this size per read in
flight)."""


class _Scratch:
    """One task's page-aligned buffer, grown as its chunks need (one per task, so that the
    memory held is bounded by the tasks in flight, not by the pool's threads)."""

    def __init__(self) -> None:
        self._buffer: np.ndarray | None = None

    def get(self, nbytes: int) -> np.ndarray:
        """A buffer of at least ``nbytes``."""
        if self._buffer is None or len(self._buffer) < nbytes:
            self._buffer = aligned_buffer(max(nbytes, 1 << 20))
        return self._buffer


def _read_chunk(
    scratch: _Scratch, offset: int, length: int, direct_fd: int | None, fd: int | None
) -> np.ndarray | None:
    """The file's bytes ``offset:offset + length`` in ``scratch``, read with one ``pread``
    (direct I/O when ``direct_fd`` is given and the read is accepted); None when neither
    descriptor reads them whole."""
    if direct_fd is not None:
        lead, span = chunk_region(offset, length, True)
        buffer = scratch.get(span)
        try:
            got = os.preadv(direct_fd, [buffer[:span].data.cast("B")], offset - lead)
        except OSError:
            got = -1  # EINVAL: alignment refused here; read buffered
        if got >= lead + length:
            return buffer[lead : lead + length]
    if fd is None:
        return None
    buffer = scratch.get(length)[:length]
    if os.preadv(fd, [buffer.data.cast("B")], offset) != length:
        return None
    return buffer


def read_checked(
    shard: ShardFile,
    col: int,
    chunks: list[tuple[int, list[tuple[np.ndarray, int, int]]]],
    direct: bool,
    in_flight: int = IO_THREADS,
) -> list[int]:
    """Check chunks as they arrive: each ``(page, targets)`` chunk of column ``col`` is read
    whole with one ``pread`` (``O_DIRECT`` when ``direct``: no page cache filled on the
    way), its CRC-32C checked in the buffer it landed in, and each ``(dest, a, b)`` of
    ``targets`` gets the chunk's bytes ``a:b`` (offsets into the chunk); the chunk is then
    marked verified. Up to ``in_flight`` chunks at once (each holds a buffer of its size:
    a reader in a small memory group passes fewer than ``IO_THREADS``). Returns the pages
    not done
    (damaged, longer than ``ARRIVAL_MAX_BYTES``, or not read whole): nothing of them was
    written to their targets, and the caller checks them the usual way
    (:meth:`ShardFile.check_chunk`, which raises :class:`~mrecord.errors.ChecksumError`
    for a damaged one)."""
    direct_fd = shard.direct_fd() if direct else None
    fd = shard.read_fd()

    def one(scratch: _Scratch, item: tuple[int, list[tuple[np.ndarray, int, int]]]) -> bool:
        page, targets = item
        offset, length, crc = shard.chunk_place(page, col)
        if length > ARRIVAL_MAX_BYTES:
            return False
        try:
            data = _read_chunk(scratch, offset, length, direct_fd, fd)
        except OSError:
            return False
        if data is None or checksum_releasing(data) != crc:
            return False
        for dest, a, b in targets:
            dest[:] = data[a:b]
        shard.mark_verified(page, col)
        return True

    def some(items: list[tuple[int, list[tuple[np.ndarray, int, int]]]]) -> list[bool]:
        scratch = _Scratch()
        return [one(scratch, item) for item in items]

    if fd is None and direct_fd is None:
        return [page for page, _ in chunks]
    return _pages_not_done(chunks, some, in_flight)


_Item = TypeVar("_Item", bound=tuple[int, object])


def _pages_not_done(
    chunks: list[_Item], some: Callable[[list[_Item]], list[bool]], in_flight: int
) -> list[int]:
    """Run ``some`` over ``chunks`` (``(page, ...)`` items) in up to ``in_flight`` tasks
    on the I/O threads (every ``tasks``-th item each, so neighbours go at once; the
    calling thread waits), and return the pages of the items it answered False for."""
    tasks = max(1, min(in_flight, IO_THREADS, len(chunks)))
    if tasks == 1:
        done = some(chunks)
    else:
        pool = io_pool()
        futures = [pool.submit(some, chunks[i::tasks]) for i in range(tasks)]
        done = [False] * len(chunks)
        for i, future in enumerate(futures):
            done[i::tasks] = future.result()
    return [item[0] for item, ok in zip(chunks, done, strict=True) if not ok]


def chunk_region(offset: int, length: int, direct: bool) -> tuple[int, int]:
    """``(lead, span)`` of a chunk of ``length`` bytes at file ``offset`` read whole into a
    region of a caller's buffer (:func:`read_checked_in_place`): the chunk starts ``lead``
    bytes into a region of ``span`` bytes (whole pages around it for direct I/O, which a
    page-aligned region takes; the chunk itself otherwise)."""
    if not direct:
        return 0, length
    lead = offset % _PAGE
    return lead, -(-(lead + length) // _PAGE) * _PAGE


def read_checked_in_place(
    shard: ShardFile,
    col: int,
    chunks: list[tuple[int, np.ndarray]],
    direct: bool,
    in_flight: int = IO_THREADS,
) -> list[int]:
    """Chunks a block takes whole, each ``(page, region)`` chunk of column ``col`` read with
    one ``pread`` straight into ``region`` (page-aligned, :func:`chunk_region` long:
    ``O_DIRECT`` when ``direct``), its CRC-32C checked there and the chunk marked verified:
    the block's values are then views of the region, with no copy out of an I/O thread's
    buffer (:func:`read_checked` copies each value out: in file order beyond memory that
    copy and the fresh pages it filled were a third of the process's CPU, perf). Up to
    ``in_flight`` at once. Returns the pages not done (damaged, or not read whole): their
    regions hold nothing to trust, and the caller checks them the usual way."""
    direct_fd = shard.direct_fd() if direct else None
    fd = shard.read_fd()

    def one(item: tuple[int, np.ndarray]) -> bool:
        page, region = item
        offset, length, crc = shard.chunk_place(page, col)
        lead, span = chunk_region(offset, length, direct_fd is not None)
        try:
            if direct_fd is not None:
                got = os.preadv(direct_fd, [region[:span].data.cast("B")], offset - lead)
            elif fd is not None:
                got = os.preadv(fd, [region[:length].data.cast("B")], offset)
            else:
                return False
        except OSError:
            return False
        data = region[lead : lead + length]
        if got < lead + length or checksum_releasing(data) != crc:
            return False
        shard.mark_verified(page, col)
        return True

    if direct and direct_fd is None:
        return [page for page, _ in chunks]  # regions laid out for direct reads: caller's way
    return _pages_not_done(chunks, lambda part: [one(item) for item in part], in_flight)


DIRECT_MIN_BYTES = 32 << 10
"""Cold values at least this long on average are read with direct I/O (``read_direct``):
each read is rounded out to whole pages, so shorter values would read mostly padding."""


def direct_layout(
    places: list[tuple[int, int]],
) -> tuple[int, list[int], list[tuple[int, int, int, int]]]:
    """Where ``(offset, length)`` file ranges go in one buffer read with direct I/O:
    (bytes the buffer needs, each range's start in it, ``read_direct``'s places). Each
    range gets its own page-aligned slot holding the whole pages around it; the range
    starts ``offset % page`` bytes into its slot."""
    starts: list[int] = []
    reads: list[tuple[int, int, int, int]] = []
    at = 0
    for offset, length in places:
        lead = offset % _PAGE
        span = -(-(lead + length) // _PAGE) * _PAGE
        starts.append(at + lead)
        reads.append((at, offset - lead, span, lead + length))
        at += span
    return at, starts, reads


SPAN_PIECE = 1 << 20
"""Direct reads of values that follow each other in the file are cut into pieces of this
many bytes, read in parallel (one long read would leave the device's queue empty)."""


def direct_spans(
    places: list[tuple[int, int]], gap: int = _PAGE
) -> tuple[int, list[int], list[tuple[int, int, int, int]]]:
    """Like :func:`direct_layout`, for ranges that mostly follow each other in the file
    (``shuffle=False``): ranges less than ``gap`` bytes apart share one slot, read whole
    (the gap with them) in pieces of ``SPAN_PIECE``, so the disk sees long sequential
    reads, not one request per value."""
    spans: list[list[int]] = []  # [offset, end] of each merged run
    owner: list[int] = []
    for offset, length in places:
        if spans and spans[-1][1] <= offset <= spans[-1][1] + gap:
            spans[-1][1] = offset + length
        else:
            spans.append([offset, offset + length])
        owner.append(len(spans) - 1)
    nbytes, span_starts, whole = direct_layout([(a, b - a) for a, b in spans])
    starts = [
        span_starts[k] + offset - spans[k][0] for (offset, _), k in zip(places, owner, strict=True)
    ]
    reads: list[tuple[int, int, int, int]] = []
    for at, offset, span, need in whole:
        for done in range(0, span, SPAN_PIECE):
            size = min(SPAN_PIECE, span - done)
            reads.append((at + done, offset + done, size, max(0, min(size, need - done))))
    return nbytes, starts, reads


def read_direct(
    shard: ShardFile, buffer: np.ndarray, places: list[tuple[int, int, int, int]]
) -> bool:
    """Read ``(at, offset, span, need)``: ``span`` file bytes from ``offset`` into
    ``buffer[at:at + span]`` (all page-aligned, ``buffer`` from :func:`aligned_buffer`),
    each read needing at least ``need`` bytes (the file may end inside the last page),
    with ``O_DIRECT`` reads: one batch of the kernel's AIO where it can
    (:func:`~mrecord.storage.kernel_aio.read_batch`; the GIL is not taken back per read),
    else ``pread``s on the I/O threads, all in flight at once. False when the
    shard has no direct descriptor or a read failed or came back short: the caller then
    reads another way. Direct reads see what the disk holds, which for a committed shard
    is what the map shows (the kernel writes back dirty pages of a range before a direct
    read of it)."""
    fd = shard.direct_fd()
    if fd is None:
        return False
    # All of them with one submit when the kernel's AIO can (no GIL taken back per read).
    batched = read_batch(fd, buffer, places)
    if batched is not None:
        return batched
    view = buffer.data.cast("B")

    def read(place: tuple[int, int, int, int]) -> bool:
        a, off, n, need = place
        try:
            return os.preadv(fd, [view[a : a + n]], off) >= need
        except OSError:
            return False  # EINVAL: alignment refused here; the caller reads buffered

    return on_io_threads(places, read)


def looks_resident(shard: ShardFile, ranges: list[tuple[int, int]]) -> bool:
    """Whether a sample of ``ranges`` (``(offset, length)`` of ``shard``) is all in the
    page cache (``mincore``; False when that cannot be told): then a buffered read of
    them copies from memory, and a direct read would go to the disk again (chunks this
    read has just checked under ``verify="once"``)."""
    return _looks_warm(shard, ranges)


def resident_pages(shard: ShardFile, offset: int, length: int) -> np.ndarray | None:
    """For each 4 KiB page of ``shard`` that bytes ``offset:offset + length`` touch,
    whether it is in the page cache (``mincore``); None when that cannot be told (not a
    local map, no ``mincore``, a range outside the file)."""
    bits = _page_bits(shard, offset, length)
    if bits is None:
        return None
    found: np.ndarray = (np.frombuffer(bits, dtype=np.uint8) & 1) == 1
    return found


def _page_bits(shard: ShardFile, offset: int, length: int) -> bytes | None:
    """``mincore``'s vector for the pages bytes ``offset:offset + length`` of ``shard``
    touch (bit 0 of each byte: in memory; the other bits are zero), or None."""
    address = shard.map_address()
    if address is None or _mincore is None or length <= 0 or offset + length > shard.size:
        return None
    # mincore wants a page-aligned address: from the page the range starts in (an
    # unaligned one failed with EINVAL, so every value but a chunk's first looked cold)
    lead = offset % _PAGE
    pages = -(-(lead + length) // _PAGE)
    vec = (ctypes.c_ubyte * pages)()
    if _mincore(ctypes.c_void_p(address + offset - lead), pages * _PAGE, vec) != 0:
        return None
    return ctypes.string_at(vec, pages)


def _looks_warm(shard: ShardFile, ranges: list[tuple[int, int]]) -> bool:
    """Whether every page of a few of ``ranges`` (up to ``_SAMPLE`` of them, spread over
    the list; up to ``_SAMPLE_PAGES`` pages each) is in memory (``mincore``); False when
    that cannot be told (not a local map, no ``mincore``). A wrong "warm" costs page
    faults one page at a time, so any page out means cold."""
    # Spread over the whole list, which is in file order: its first _SAMPLE ranges (what
    # ranges[::len // _SAMPLE] gave for fewer than 2 * _SAMPLE ranges) lie in one part of
    # the file, and a file whose first half was in memory had its random blocks taken
    # for warm and read from the map a 4 KiB fault at a time (15,391 major faults, 0.6x
    # the rate of the same read wholly cold).
    for i in _spread(len(ranges), _SAMPLE).tolist():
        offset, length = ranges[i]
        length = min(length, _SAMPLE_PAGES * _PAGE - offset % _PAGE)
        bits = _page_bits(shard, offset, length)
        if bits is None or b"\x00" in bits:
            return False
    return True


def _load_mincore() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        func = libc.mincore
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    func.restype = ctypes.c_int
    return func  # type: ignore[no-any-return]


_mincore = _load_mincore()
