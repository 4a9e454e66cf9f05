"""Shards read with range requests, for datasets larger than the cache.

:class:`RangeShardFile` is a :class:`~mrecord.storage.shard.ShardFile` whose bytes
come from the store instead of a memory map: the header, trailer and metadata are
read first (three small requests), then column chunks as rows in them are read.

A chunk is fetched whole the first time (so its CRC-32C can be checked); from it
the reader learns where each row's value lies inside the chunk and a CRC-32C of
each row's bytes (:class:`_ChunkIndex`: about 20 bytes per row and column, in
memory). After that, a read fetches only the rows it asks for: the reader
announces them (:func:`reading_rows`, around ``DatasetReader.read_rows``), the
missing ones go out as concurrent, coalesced range requests, each is checked
against its row digest, and ``raw_chunk`` hands out a sparse buffer of the chunk's
size holding the chunk head and exactly those rows (an anonymous map: unread parts
cost no memory). Reads that do not announce rows get the whole chunk.

Rows that come back are offered to the dataset's :class:`~mrecord.remote.pieces.
PieceStore` (local disk, the cache space left), which keeps the ones read soonest
according to the epoch orders the dataset passed to :func:`plan_reads`.

Compressed chunks cannot be cut by row: they are always fetched whole. Nothing is
held in memory per shard beyond the chunk indexes.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import (
    ArgumentError,
    ChecksumError,
    ChunkFormatError,
    CorruptFileError,
    DecompressionError,
    WrongTypeError,
)
from mrecord.format.chunks import decode_var
from mrecord.format.compression import CODEC_IDS, checksum, decompress
from mrecord.format.ids import sorted_unique
from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE
from mrecord.format.schema import Field, FieldKind
from mrecord.format.value_crcs import checked_value_crcs, table_length
from mrecord.remote.fs import RemoteFile
from mrecord.remote.pieces import Piece, PieceStore
from mrecord.remote.plan import ReadPlan
from mrecord.storage.shard import ShardFile

__all__ = ["RangeBytes", "RangeShardFile", "RemoteReads", "plan_reads", "reading_rows"]

_CODEC_NONE = CODEC_IDS["none"]
# Ranges closer than this are fetched as one request (the gap's bytes are wasted).
_GAP_BYTES = 4 << 10
# No coalesced request larger than this, so that big reads still go out in parallel.
_MAX_REQUEST = 8 << 20


class RangeBytes:
    """A remote file's bytes, sliced like a memoryview: each slice is one range request
    (nothing is kept)."""

    def __init__(self, remote: RemoteFile):
        self.remote = remote

    def __len__(self) -> int:
        return self.remote.size

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice):
            raise WrongTypeError(f"RangeBytes takes slices, got {key!r}")
        start, stop, step = key.indices(self.remote.size)
        if step != 1:
            raise ArgumentError("RangeBytes slices must be contiguous")
        if stop <= start:
            return b""
        return self.remote.read_range(start, stop)

    def release(self) -> None:
        """Nothing to release (the memoryview API ShardFile.close calls)."""

    def close(self) -> None:
        """Nothing to close."""


class RemoteReads:
    """What the range-read shards of one open dataset share: the read plan (every row's
    next use) and the local piece store."""

    def __init__(self, num_rows: int, folder: Path, budget: int, release: Callable[[], None]):
        self.plan = ReadPlan(num_rows)
        self.store = PieceStore(folder, budget, self.plan)
        self._release = release

    def close(self) -> None:
        """Drop the pieces and give their cache space back."""
        self.store.close()
        self._release()


@dataclass(frozen=True)
class _ChunkIndex:
    """Where each row's value lies in one uncompressed chunk, and its digest.

    Row ``i``'s bytes are ``bounds[i]:bounds[i + 1]`` of the chunk; ``head`` is the
    chunk's first bytes (offsets, shapes) up to the first value.
    """

    bounds: np.ndarray
    digests: np.ndarray
    head: bytes


class RangeShardFile(ShardFile):
    """A remote shard read by range requests; ``path`` is where its cached ``.db`` lies."""

    reads: RemoteReads | None = None
    shard_no = 0  # its number among the dataset's range-read shards (the piece store's key)
    first_row = 0  # global id of its first row

    def __init__(self, remote: RemoteFile, path: Path, verify: str = "once"):
        self.remote = remote
        self._index: dict[tuple[int, int], _ChunkIndex] = {}
        self._index_lock = threading.Lock()
        self._inflight: dict[tuple[int, int], threading.Event] = {}  # chunks being fetched
        self._local = threading.local()  # the rows announced by this thread's read
        super().__init__(path, verify=verify)

    def _open_bytes(self) -> tuple[int, RangeBytes]:
        if self.remote.size < HEADER_SIZE + TRAILER_SIZE:
            raise CorruptFileError(
                f"{self.remote.url!r} is {self.remote.size} bytes, too short to be an mrecord "
                "shard",
                path=self.remote.url,
                offset=0,
            )
        return self.remote.size, RangeBytes(self.remote)

    def _bytes_view(self) -> RangeBytes:
        return self._mm  # type: ignore[return-value]

    def uncompressed_fixed(self, field: Field) -> bool:
        """Always False: whole-file gathers need a memory map; pages are read one by one."""
        return False

    def will_need(self, ranges: Sequence[tuple[int, int]]) -> None:
        """These (offset, length) byte ranges of this file will be read soon, in this
        order; may be ignored. Here: the chunks they touch that were never fetched are
        fetched now (concurrent, coalesced requests), checked and offered to the store."""
        if self.reads is None or not ranges:
            return
        offsets = self.meta.chunks["offset"].reshape(-1)
        lengths = self.meta.chunks["length"].reshape(-1)
        ends = offsets + lengths
        cols = self.meta.chunks.shape[1]
        want: set[tuple[int, int]] = set()
        for start, length in ranges:
            hit = np.flatnonzero((offsets < start + length) & (ends > start))
            want.update((int(i) // cols, int(i) % cols) for i in hit)
        new = sorted(k for k in want if k not in self._index)
        spans = [(self._offsets[p][c], self._offsets[p][c] + self._lengths[p][c]) for p, c in new]
        for (page, col), data in zip(new, _fetch(self.remote, spans), strict=True):
            self._take_whole(page, col, data)

    def close(self) -> None:
        """Close the shard; the dataset's piece store goes with it (the reader closes all
        its shards together)."""
        super().close()
        if self.reads is not None:
            self.reads.close()

    # -- reads ------------------------------------------------------------------------------

    def raw_chunk(self, page: int, col: int) -> Any:
        """The chunk's raw bytes. Inside :func:`reading_rows`: a buffer of the chunk's
        size holding its head and the announced rows (other rows read as zeros and
        are never handed out); otherwise the whole chunk, fetched now."""
        wanted: dict[tuple[int, int], np.ndarray] | None = getattr(self._local, "wanted", None)
        slots = wanted.pop((page, col), None) if wanted else None
        if slots is None:
            return self._decoded(page, col, self._fetch_whole(page, col))
        whole = self._local.whole.pop((page, col), None)
        index = self._index.get((page, col))
        if whole is not None and index is None:  # compressed (or not indexed): as it came
            return self._decoded(page, col, whole)
        if index is None:
            return self._decoded(page, col, self._fetch_whole(page, col))
        pieces: dict[int, bytes] = self._local.pieces.get((page, col), {})
        # Only the announced rows are copied into a sparse buffer (zero pages cost nothing):
        # the values handed out view it, and must not keep a whole chunk alive each.
        buffer = mmap.mmap(-1, max(1, self._lengths[page][col]))
        buffer[: len(index.head)] = index.head
        bounds = index.bounds
        for slot in slots.tolist():
            a, b = int(bounds[slot]), int(bounds[slot + 1])
            if b > a:
                data = whole[a:b] if whole is not None else pieces.get(slot)
                if data is None:  # announced by another column's read of the same row
                    data = self._fetch_pieces(page, col, [slot])[slot]
                buffer[a:b] = data
        view = memoryview(buffer)[: self._lengths[page][col]]
        return view.toreadonly()

    def _decoded(self, page: int, col: int, stored: bytes) -> Any:
        if self._codecs[page][col] == _CODEC_NONE:
            return stored
        try:
            return decompress(
                stored, self._codecs[page][col], self._raw_lengths[page][col], self.max_chunk_bytes
            )
        except DecompressionError as exc:
            raise self._corrupt(page, col, self._offsets[page][col], str(exc)) from exc

    def _fetch_whole(self, page: int, col: int) -> bytes:
        offset = self._offsets[page][col]
        data = self.remote.read_range(offset, offset + self._lengths[page][col])
        self._take_whole(page, col, data)
        return data

    def _take_whole(self, page: int, col: int, data: bytes) -> None:
        """A whole chunk arrived: check it (as the policy says), learn its rows, offer
        them to the store."""
        if self.verify == "always" or (self.verify == "once" and not self._verified[page, col]):
            if checksum(data) != self._crcs[page][col]:
                raise self._mismatch(page, col, self._offsets[page][col], "chunk")
            self._verified[page, col] = True
        if self._codecs[page][col] != _CODEC_NONE or self.reads is None:
            return
        index = self._index.get((page, col))
        if index is None:
            index = self._build_index(page, col, data)
            with self._index_lock:
                self._index[(page, col)] = index
        base = self._offsets[page][col]
        first = self.first_row + self.page_starts_list[page]
        bounds = index.bounds.tolist()
        view = memoryview(data)
        self.reads.store.offer(
            [
                (self.shard_no, base + a, first + slot, view[a:b])
                for slot, (a, b) in enumerate(itertools.pairwise(bounds))
                if b > a
            ]
        )

    def _build_index(self, page: int, col: int, data: bytes) -> _ChunkIndex:
        field = self.meta.schema.fields[col]
        rows = self._page_rows_list[page]
        if field.kind is FieldKind.FIXED:
            size = int(np.prod(field.row_shape, dtype=np.int64)) * field.dtype.itemsize
            bounds = np.arange(rows + 1, dtype=np.int64) * size
            head = b""
        else:
            try:
                decoded = decode_var(field, data, rows)
            except ChunkFormatError as exc:
                raise self._corrupt(page, col, self._offsets[page][col], str(exc)) from exc
            bounds = decoded.data_start + np.asarray(decoded.offsets, dtype=np.int64)
            head = bytes(data[: decoded.data_start])
        if int(bounds[-1]) > len(data):
            raise self._corrupt(page, col, self._offsets[page][col], "rows past the chunk's end")
        view = memoryview(data)
        listed = bounds.tolist()
        digests = np.array(
            [checksum(view[a:b]) for a, b in itertools.pairwise(listed)],
            dtype=np.uint32,
        )
        return _ChunkIndex(bounds, digests, head)

    def _prepare(self, pages: np.ndarray, slots: np.ndarray, cols: list[int]) -> None:
        """Announce rows (pages, slots) of columns ``cols`` for this thread's next reads:
        fetch what is neither indexed nor stored, with concurrent coalesced requests. A
        chunk another thread is fetching whole is waited for, not fetched twice."""
        reads = self.reads
        if reads is None:  # not part of an opened dataset: raw_chunk fetches whole chunks
            return
        reads.plan.consume(self.first_row + self.page_starts[pages] + slots)
        wanted: dict[tuple[int, int], np.ndarray] = {}
        for page, page_slots in _by_page(pages, slots):
            for col in cols:
                wanted[(page, col)] = page_slots
        pieces: dict[tuple[int, int], dict[int, bytes]] = {}
        got_whole: dict[tuple[int, int], bytes] = {}
        self._index_from_tables([k for k in wanted if k not in self._index])
        claimed, waiting = self._claim(list(wanted))
        try:
            ready = [k for k in wanted if k not in claimed and k not in waiting]
            self._fetch_rows(ready, wanted, pieces, claimed, got_whole)
        finally:
            self._unclaim(claimed)
        for event in waiting.values():
            event.wait()
        later = list(waiting)
        retry = [k for k in later if k not in self._index]  # the other fetch failed
        self._fetch_rows([k for k in later if k in self._index], wanted, pieces, retry, got_whole)
        self._local.wanted, self._local.whole, self._local.pieces = wanted, got_whole, pieces

    def _index_from_tables(self, keys: list[tuple[int, int]]) -> None:
        """Index the bytes and string chunks among ``keys`` that carry a CRC-32C per value
        (format 1.3) from their head and table alone: one small range request each, all
        at once, instead of the whole chunk; their rows are then fetched one by one and
        each checked against its CRC. The head must match the table's first entry."""
        tabled = [
            (page, col)
            for page, col in keys
            if self.has_value_crcs(page, col)
            and self.meta.schema.fields[col].kind in (FieldKind.BYTES, FieldKind.STRING)
        ]
        if not tabled or self.reads is None:
            return
        # Those the head index holds (format 1.4; one range request for all of it, the
        # first time) need no request of their own.
        fetched: list[Any] = []
        for page, col in tabled:
            part = self.index_part(page, col)  # the table and the head after it
            fetched.append(None if part is None else bytes(part))
        rest = [key for key, data in zip(tabled, fetched, strict=True) if data is None]
        if rest:
            places = [self.head_range(page, col) for page, col in rest]
            got = iter(_fetch(self.remote, [(start, start + n) for start, n in places]))
            fetched = [next(got) if data is None else data for data in fetched]
        for (page, col), data in zip(tabled, fetched, strict=True):
            rows = self._page_rows_list[page]
            head = bytes(data[table_length(rows) :])
            offset, length = self._offsets[page][col], self._lengths[page][col]
            crcs = checked_value_crcs(data[: table_length(rows)], head)
            if crcs is None:
                raise self._mismatch(page, col, offset, "the head of")
            offsets = np.frombuffer(head, dtype="<u8", count=rows + 1).astype(np.int64)
            if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or (
                int(offsets[-1]) != length - len(head)
            ):
                raise self._corrupt(page, col, offset, "inconsistent value offsets")
            index = _ChunkIndex(len(head) + offsets, crcs, head)
            with self._index_lock:
                self._index.setdefault((page, col), index)

    def _claim(
        self, keys: list[tuple[int, int]]
    ) -> tuple[list[tuple[int, int]], dict[tuple[int, int], threading.Event]]:
        """Of the uncompressed chunks among ``keys`` not indexed yet: those this thread
        fetches whole (claimed) and those another thread is fetching (their events)."""
        claimed: list[tuple[int, int]] = []
        waiting: dict[tuple[int, int], threading.Event] = {}
        with self._index_lock:
            for key in keys:
                if key in self._index:
                    continue
                if self._codecs[key[0]][key[1]] != _CODEC_NONE:
                    claimed.append(key)  # never indexed: always fetched whole
                elif key in self._inflight:
                    waiting[key] = self._inflight[key]
                else:
                    self._inflight[key] = threading.Event()
                    claimed.append(key)
        return claimed, waiting

    def _unclaim(self, claimed: list[tuple[int, int]]) -> None:
        with self._index_lock:
            for key in claimed:
                event = self._inflight.pop(key, None)
                if event is not None:
                    event.set()

    def _fetch_rows(
        self,
        indexed: list[tuple[int, int]],
        wanted: dict[tuple[int, int], np.ndarray],
        pieces: dict[tuple[int, int], dict[int, bytes]],
        whole: list[tuple[int, int]],
        got_whole: dict[tuple[int, int], bytes],
    ) -> None:
        """One batch of requests: the ``whole`` chunks, and the wanted rows of the
        ``indexed`` chunks that the store does not hold; results into ``pieces`` and
        ``got_whole``, rows fetched offered to the store."""
        missing: list[tuple[int, int, int]] = []  # (page, col, slot)
        for page, col in indexed:
            index = self._index[(page, col)]
            got = pieces.setdefault((page, col), {})
            for slot in wanted[(page, col)].tolist():
                data = self._stored_piece(page, col, index, slot)
                if data is None:
                    missing.append((page, col, slot))
                else:
                    got[slot] = data
        spans = [(self._offsets[p][c], self._offsets[p][c] + self._lengths[p][c]) for p, c in whole]
        spans += [self._piece_span(p, c, s) for p, c, s in missing]
        fetched = _fetch(self.remote, spans)
        for (page, col), data in zip(whole, fetched[: len(whole)], strict=True):
            self._take_whole(page, col, data)
            got_whole[(page, col)] = data
        offered: list[Piece] = []
        for (page, col, slot), data in zip(missing, fetched[len(whole) :], strict=True):
            self._check_piece(page, col, slot, data, always=True)
            pieces[(page, col)][slot] = data
            offered.append(self._piece(page, col, slot, data))
        if self.reads is not None:
            self.reads.store.offer(offered)

    def _done(self) -> None:
        self._local.__dict__.clear()

    def _fetch_pieces(self, page: int, col: int, slots: list[int]) -> dict[int, bytes]:
        spans = [self._piece_span(page, col, s) for s in slots]
        out = {}
        for slot, data in zip(slots, _fetch(self.remote, spans), strict=True):
            self._check_piece(page, col, slot, data, always=True)
            out[slot] = data
        return out

    def _stored_piece(self, page: int, col: int, index: _ChunkIndex, slot: int) -> bytes | None:
        a, b = int(index.bounds[slot]), int(index.bounds[slot + 1])
        if b == a:
            return b""
        if self.reads is None:
            return None
        data = self.reads.store.get(self.shard_no, self._offsets[page][col] + a, b - a)
        if data is not None:
            self._check_piece(page, col, slot, data, always=False)
        return data

    def _piece_span(self, page: int, col: int, slot: int) -> tuple[int, int]:
        bounds = self._index[(page, col)].bounds
        base = self._offsets[page][col]
        return base + int(bounds[slot]), base + int(bounds[slot + 1])

    def _piece(self, page: int, col: int, slot: int, data: bytes) -> Piece:
        start, _ = self._piece_span(page, col, slot)
        return (self.shard_no, start, self.first_row + self.page_starts_list[page] + slot, data)

    def _check_piece(self, page: int, col: int, slot: int, data: bytes, *, always: bool) -> None:
        """A row's bytes must match the digest taken from its checked chunk: from the
        store always (unless ``verify="never"``), from the local store under "always"."""
        if self.verify == "never" or (not always and self.verify != "always"):
            return
        if checksum(data) != int(self._index[(page, col)].digests[slot]):
            start, _ = self._piece_span(page, col, slot)
            raise self._mismatch(page, col, start, f"row {slot} of")

    def _mismatch(self, page: int, col: int, offset: int, what: str) -> ChecksumError:
        field = self.meta.schema.fields[col].name
        return ChecksumError(
            f"{self.remote.url!r}: checksum mismatch in {what} page {page}, field {field!r} "
            f"at byte {offset}: the store sent other bytes than the commit opened holds (the "
            "object changed, or the store or the transfer is faulty); open the dataset again",
            path=self.remote.url,
            page=page,
            offset=offset,
        )


def _by_page(pages: np.ndarray, slots: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(page, its distinct slots ascending) for each distinct page."""
    order = np.lexsort((slots, pages))
    pages, slots = pages[order], slots[order]
    cuts = [0, *(np.flatnonzero(np.diff(pages)) + 1).tolist(), len(pages)]
    for start, stop in itertools.pairwise(cuts):
        if stop > start:
            yield int(pages[start]), sorted_unique(slots[start:stop])


def _fetch(remote: RemoteFile, spans: list[tuple[int, int]]) -> list[bytes]:
    """The bytes of each (start, stop) span, in the order given: neighbouring spans are
    coalesced into one request, the requests sent concurrently."""
    if not spans:
        return []
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    requests: list[list[int]] = []  # [start, stop] per request
    where: list[tuple[int, int]] = [(0, 0)] * len(spans)  # (request, offset in it)
    for i in order:
        start, stop = spans[i]
        last = requests[-1] if requests else None
        if (
            last is not None
            and start - last[1] <= _GAP_BYTES
            and max(stop, last[1]) - last[0] <= _MAX_REQUEST
        ):
            last[1] = max(last[1], stop)
        else:
            requests.append([start, stop])
        where[i] = (len(requests) - 1, start - requests[-1][0])
    answers = remote.read_ranges([(a, b) for a, b in requests])
    return [
        answers[r][off : off + spans[i][1] - spans[i][0]] for i, (r, off) in enumerate(where)
    ]


@contextlib.contextmanager
def reading_rows(
    shards: Sequence[ShardFile], groups: Sequence[Any], columns: Sequence[str]
) -> Iterator[None]:
    """Around one read of rows: range-read shards fetch just these rows' bytes (columns
    ``columns``) first. ``groups`` are ``(shard, positions, pages, slots)`` as
    ``DatasetReader._group`` makes them. Local shards are untouched."""
    ranged = [
        (shard, pages, slots)
        for s, _, pages, slots in groups
        if isinstance(shard := shards[s], RangeShardFile) and shard.reads is not None
    ]
    if not ranged:
        yield
        return
    try:
        for shard, pages, slots in ranged:
            cols = [shard.field_index(c) for c in columns]
            # a fixed-width column the head index holds (format 1.4) is read from there
            cols = [col for col in cols if not _from_index(shard, col)]
            shard._prepare(np.asarray(pages), np.asarray(slots), cols)
        yield
    finally:
        for shard, _, _ in ranged:
            shard._done()


def _from_index(shard: ShardFile, col: int) -> bool:
    """Whether reads of column ``col`` take its values from the copies of its chunks in
    the head index (``ShardFile.indexed_column``), so no range of it is fetched."""
    field = shard.meta.schema.fields[col]
    return field.kind is FieldKind.FIXED and shard.indexed_column(col) is not None


def plan_reads(
    shards: Sequence[ShardFile], order_of: Callable[[int], np.ndarray], epoch: int
) -> None:
    """Tell the dataset's range-read shards the coming reads: ``order_of(e)`` is epoch
    ``e``'s order of global row ids; this epoch's and the next one's are used."""
    for shard in shards:
        if isinstance(shard, RangeShardFile) and shard.reads is not None:
            shard.reads.plan.set_orders([order_of(epoch), order_of(epoch + 1)])
            return  # one plan per dataset
