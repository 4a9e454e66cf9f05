"""Whole chunks read into a reader's own buffers, for block-local reads beyond memory.

``Shuffle.BLOCK`` reads each block of rows from a window of neighbouring pages, and the
next blocks from nearly the same window. Through the memory map, a cold block's chunks
were read (and checked) into the page cache and the rows gathered from the map after:
in a memory group smaller than the data the kernel reclaimed some of those pages in
between, for the reads in flight beside them, and the gather faulted them back in one
4 KiB read at a time (measured: 1,339 major faults in one epoch of 4M tabular rows on an
hdd-like volume, about half of the epoch's time; docs/READING.md). Here a read's chunks are
read whole with one ``pread`` each (in parallel, on the I/O threads), checked as they
arrive under the shard's ``verify`` policy, their pages in the page cache dropped at once
(the buffer holds the bytes), and kept, least recently used first out, within a byte
bound: the window's next reads find them, and nothing the reader holds can be reclaimed
under it. Only plain (uncompressed) chunks of local shards are read this way; the caller
decides which reads go through it (:meth:`ChunkBuffers.fits`): the reader takes
fixed-width and bytes columns of block-local reads from here (images under
``Shuffle.BLOCK`` on an hdd-like volume: 125 -> 1,022 rows/s), and of random reads over
small rows in waves of chunks, one pass over them (``DatasetReader._take_from_chunks``;
GLOBAL over 4M tabular rows on that volume: 0 -> 7,544 rows/s), and fixed-width columns
read in file order (each chunk read and checked once, its pages out of the page cache at
once, only the last page's chunks held after: 8M tabular rows ``shuffle=False`` in a
200 MB group, 1.11M -> 1.80M rows/s). The chunks of one page are read with one ``pread``
(:func:`_pieces`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from concurrent.futures import Future

import numpy as np

from mrecord.format.compression import checksum_releasing
from mrecord.storage.buffer_pool import BufferPool
from mrecord.storage.readahead import on_io_threads, pread_exactly
from mrecord.storage.shard import ShardFile

__all__ = ["ChunkBuffers", "buffer_capacity"]

_PAGE = mmap.PAGESIZE
_MIN_CAPACITY = 16 << 20
_MAX_CAPACITY = 512 << 20
_PIECE_GAP = 4096
"""Chunks of a page at most this far apart are read with one ``pread`` (the bytes between,
a chunk's framing, read and not kept)."""


def buffer_capacity(memory_budget: int | None) -> int:
    """Bytes of chunks a reader keeps: a quarter of its memory budget, within 16-512 MiB
    (a ``Shuffle.BLOCK`` window is cut from the same budget, smaller than this)."""
    if memory_budget is None:
        return _MAX_CAPACITY
    return max(_MIN_CAPACITY, min(_MAX_CAPACITY, memory_budget // 4))


class ChunkBuffers:
    """Chunks ``(shard key, page, column)`` read whole into buffers of their own, at most
    ``capacity`` bytes of them kept (see the module docstring). Thread-safe: the reading
    threads of one reader share it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[tuple[Hashable, int, int], np.ndarray] = OrderedDict()
        # chunks being read by one thread, which others needing them wait for (the reading
        # threads of Shuffle.BLOCK read neighbouring blocks of the same window at once)
        self._reading: dict[tuple[Hashable, int, int], Future[np.ndarray | None]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def fits(self, nbytes: int) -> bool:
        """Whether a read whose chunks hold ``nbytes`` may go through the buffers: all of
        them fit at once (a read over more, a random order over a whole file, would push
        out what the next read needs and read every chunk again)."""
        return nbytes <= self.capacity

    @property
    def kept_bytes(self) -> int:
        """Bytes of chunks held now."""
        return self._bytes

    def chunks(
        self,
        key: Hashable,
        shard: ShardFile,
        cols: Sequence[int],
        pages: Sequence[int],
        keep: bool = True,
    ) -> list[list[np.ndarray]] | None:
        """The stored bytes of chunks (``pages``, ``cols``) of ``shard`` (``key`` names the
        shard among the reader's), one list per column of ``cols``, as read-only ``uint8``
        arrays; the missing ones are read now, all in flight together. None when this
        shard cannot be read this way (not a local file, a compressed chunk): the caller
        reads through the map. A chunk whose bytes do not match their CRC-32C raises the
        shard's :class:`~mrecord.errors.ChecksumError`. The chunks read are kept for the
        next calls unless ``keep`` is False (a pass over more chunks than the buffers
        hold would only push out what they hold; threads reading the same chunks at once
        still share each read)."""
        fd = shard.read_fd()
        if fd is None:
            return None
        found: dict[tuple[int, int], np.ndarray] = {}
        mine: dict[tuple[int, int], Future[np.ndarray | None]] = {}
        theirs: dict[tuple[int, int], Future[np.ndarray | None]] = {}
        distinct = list(dict.fromkeys(pages))
        with self._lock:
            # page by page: a page's chunks share the piece they were read in (_pieces), and
            # so come into the least-recently-used order, and leave it, together
            for page in distinct:
                for col in cols:
                    name = (key, page, col)
                    held = self._kept.get(name)
                    if held is not None:
                        self._kept.move_to_end(name)
                        found[page, col] = held
                    elif name in self._reading:  # another thread's read has it on its way
                        theirs[page, col] = self._reading[name]
                    else:
                        mine[page, col] = self._reading[name] = Future()
        if mine:
            try:
                got = self._read(fd, shard, list(mine))
            except BaseException as exc:
                self._settle(key, mine, exc)
                raise
            read = zip(mine, got, strict=True)
            if keep:
                self._keep(key, {chunk: data for chunk, data in read if data is not None})
            self._settle(key, mine, got)
        for chunk, future in (*mine.items(), *theirs.items()):
            data = future.result()
            if data is None:
                return None
            found[chunk] = data
        return [[found[page, col] for page in pages] for col in cols]

    def make_room(self, nbytes: int, limit: int) -> bool:
        """Let the buffers hold ``nbytes`` (raising the capacity up to ``limit`` when it is
        less); whether they now may. For a reader that reads the next window of a block
        shuffle while this one is handed out: both must be held at once, or the next
        one's chunks push out this one's, read again by its later reads."""
        with self._lock:
            if nbytes > self.capacity:
                if nbytes > limit:
                    return False
                self.capacity = nbytes
            return True

    def _settle(
        self,
        key: Hashable,
        futures: dict[tuple[int, int], Future[np.ndarray | None]],
        got: list[np.ndarray | None] | BaseException,
    ) -> None:
        """Hand the chunks read (or the error) to the threads waiting for them."""
        with self._lock:
            for page, col in futures:
                del self._reading[(key, page, col)]
        for i, future in enumerate(futures.values()):
            if isinstance(got, BaseException):
                future.set_exception(got)
            else:
                future.set_result(got[i])

    def _read(
        self, fd: int, shard: ShardFile, chunks: list[tuple[int, int]]
    ) -> list[np.ndarray | None]:
        pages = [page for page, _ in chunks]
        cols = [col for _, col in chunks]
        if bool((shard.meta.chunks[pages, cols]["codec"] != 0).any()):
            return [None] * len(chunks)
        places = [shard.chunk_place(page, col) for page, col in chunks]
        pieces = _pieces(chunks, places)
        got: list[np.ndarray | None] = [None] * len(chunks)

        def read(piece: list[int]) -> bool:
            start = places[piece[0]][0]
            stop = places[piece[-1]][0] + places[piece[-1]][1]
            data = _read_piece(shard, fd, start, stop)
            if data is None:
                return True  # a short read: the caller reads these through the map
            for i in piece:
                (page, col), (offset, length, crc) = chunks[i], places[i]
                chunk = data[offset - start : offset - start + length]
                if shard.needs_check(page, col):
                    if checksum_releasing(chunk) != crc:
                        shard.check_chunk(page, col)  # raises, naming file, page and field
                        continue  # it read intact through the map: the caller reads there
                    shard.mark_verified(page, col)
                chunk.flags.writeable = False
                got[i] = chunk
            return True

        on_io_threads(pieces, read)
        return got

    def _keep(self, key: Hashable, chunks: dict[tuple[int, int], np.ndarray]) -> None:
        """Hold ``chunks``, then drop the least recently used others over the capacity."""
        with self._lock:
            for (page, col), data in chunks.items():
                name = (key, page, col)
                if name not in self._kept:
                    self._bytes += data.nbytes
                self._kept[name] = data
                self._kept.move_to_end(name)
            while self._bytes > self.capacity and len(self._kept) > len(chunks):
                _, old = self._kept.popitem(last=False)
                self._bytes -= old.nbytes

    def drop_before(self, key: Hashable, page: int) -> None:
        """Drop the chunks held of shard ``key`` on pages before ``page``: a read in file
        order does not come back to them, and memory a group cannot reclaim should hold
        no more than the page the next read starts on (3M small rows read in file order
        in a 100 MB group: 16 MiB of chunks held after such reads got the reader
        OOM-killed in its next read, of variable-shape values through the map)."""
        with self._lock:
            for name in [name for name in self._kept if name[0] == key and name[1] < page]:
                self._bytes -= self._kept.pop(name).nbytes

    def clear(self) -> None:
        """Drop every chunk held."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0


def _pieces(chunks: list[tuple[int, int]], places: list[tuple[int, int, int]]) -> list[list[int]]:
    """The positions in ``chunks`` (``(page, column)``, stored at ``places``: ``(offset,
    length, crc)``) grouped into pieces read with one ``pread`` each: the chunks of one
    page that lie next to each other in the file. This device splits a request at about
    1 MiB, and a page's chunks are smaller (tabular rows: 883, 110 and 55 KB): read one by
    one on a throttled volume, they were three requests a page, 330 KB each (76 MB/s of
    an hdd-like volume's 150). Not across pages: a chunk kept views its piece, and pieces
    of one page keep at most that page alive."""
    pieces: list[list[int]] = []
    end = -1
    for i in sorted(range(len(chunks)), key=lambda i: places[i][0]):
        offset, length, _ = places[i]
        near = end <= offset <= end + _PIECE_GAP
        if pieces and near and chunks[pieces[-1][-1]][0] == chunks[i][0]:
            pieces[-1].append(i)
        else:
            pieces.append([i])
        end = offset + length
    return pieces


def _mapped(nbytes: int) -> np.ndarray:
    """``nbytes`` of memory for a piece, from mappings of their own (``_piece_pool``):
    reused, already faulted in, once nothing views the piece that had them, else mapped
    anew. Not glibc's heap: under a memory budget too small for
    ``mrecord.storage.allocator.keep_freed_memory``, pieces of ~1 MiB freed among many
    small values (variable-shape arrays) stayed in the thread arenas there, and a GLOBAL
    read of 600K such rows in a 200 MB group grew to 178 MB resident and was OOM-killed.
    Nor a fresh mapping per piece, as before: the first ``pread`` into it faulted in and
    zero-filled every page, charged to the memory group one by one (images under
    ``Shuffle.BLOCK`` beyond memory, perf: a quarter of the epoch's CPU; the first 16,000
    rows in 2.11-2.13 s against 2.25-2.27 s, system CPU 1.23-1.30 s against 1.90-1.98 s;
    12,000 rows, five alternating pairs: median pair ratio 0.93)."""
    if nbytes <= 0:
        return np.empty(0, dtype=np.uint8)
    return _piece_pool.take(nbytes)


_piece_pool = BufferPool(mapped=True)


def _read_piece(shard: ShardFile, fd: int, start: int, stop: int) -> np.ndarray | None:
    """Bytes ``start:stop`` of ``shard``'s file, read through ``fd`` with one ``pread``
    (None: fewer came back), the pages it filled in the page cache dropped after.
    Buffered, not direct: direct reads went into anonymous memory that the memory group
    cannot reclaim (a reader in a 200 MB group was OOM-killed) and made no fewer device
    requests."""
    data = _mapped(stop - start)
    if not pread_exactly(shard, fd, data.data.cast("B"), start):
        return None
    # The buffer holds them now: drop the pages wholly inside the piece from the page
    # cache (not the ones it shares with a neighbour someone may be reading).
    first = -(-start // _PAGE) * _PAGE
    last = stop // _PAGE * _PAGE
    if last > first:
        with contextlib.suppress(AttributeError, OSError):
            os.posix_fadvise(fd, first, last - first, os.POSIX_FADV_DONTNEED)
    return data
