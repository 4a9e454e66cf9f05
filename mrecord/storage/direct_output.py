"""A file written front to back with ``O_DIRECT``, through two aligned staging buffers.

Buffered writes of a shard's pages cost the kernel more than the disk: on this machine
2 GB written with ``writev`` and synced every 64 MiB took 3.5-8.5 s of system time
(page cache pages allocated, copied, written back, reclaimed), the same bytes written
with ``O_DIRECT`` 0.14 s, at the disk's speed (docs/CONVERT.md "Writing with O_DIRECT").
:class:`DirectStream` takes a file's bytes in order, copies them into one of two
page-aligned buffers, and writes each full buffer with one ``pwrite`` on the writer
thread while the caller fills the other one.

Bigger buffers write faster: 800 MB of images written to durable with 1 / 4 / 8 MiB
buffers ran at 947-1,435 / 1,207-1,456 / 1,393-1,563 MB/s (four rounds each, a settled
disk before each). A stream's buffers are :data:`STAGE_MAX` each while the streams open
in the process share :data:`STAGE_BUDGET` (a writer of a few shards), and
:data:`STAGE_MIN` each past it, up to :data:`STAGE_CAP` in all; past that a shard is
written through the page cache (a writer of 1,000 shards held 2 GiB of buffers).

``O_DIRECT`` needs the buffer, the file position and the length aligned to the device's
block; the stream keeps its buffers at aligned file positions and writes only whole
blocks directly. :meth:`DirectStream.flush` writes what is staged, the last partial
block through the file's ordinary descriptor (so every byte is in the file and an
``fsync`` makes it durable), and keeps that block staged: the next direct write
rewrites it whole. A file system without ``O_DIRECT`` (tmpfs) gets no stream
(:meth:`DirectStream.open` returns None) and the caller writes as before.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import weakref
from concurrent.futures import Future
from typing import Any

from mrecord.errors import ArgumentError, WriterStateError
from mrecord.pool import process_thread

__all__ = [
    "BLOCK",
    "STAGE_BUDGET",
    "STAGE_CAP",
    "STAGE_MAX",
    "STAGE_MIN",
    "DirectStream",
    "stage_bytes",
    "stage_cap",
]

BLOCK = 4096  # O_DIRECT alignment that holds for every common device (512 or 4096)
STAGE_MAX = 8 << 20
"""A stream's buffer size while the budget lasts (two buffers per stream)."""
STAGE_MIN = 1 << 20
"""A stream's buffer size past the budget (up to :data:`STAGE_CAP` in all)."""
STAGE_BUDGET = 64 << 20
"""The buffers of all open streams in a process, before new ones get :data:`STAGE_MIN`."""
STAGE_CAP = 256 << 20
"""The buffers of all open streams in a process, at most (or an eighth of the memory
budget when the first stream opens, :func:`stage_cap`): past it a new stream is refused and
its file is written through the page cache, which the kernel can reclaim (1,000 shards
past their first 64 MiB held 2 GiB of anonymous buffers, which a memory limit counts)."""
_O_DIRECT = getattr(os, "O_DIRECT", 0)

_budget_lock = threading.Lock()
_staged = 0  # bytes of buffers held by open streams


_cap: list[int] = []  # the cap, from the memory budget when the first stream opened


def stage_cap() -> int:
    """The most bytes of buffers the open streams of this process may hold: the smaller of
    :data:`STAGE_CAP` and an eighth of the memory budget (read once), at least two
    streams' :data:`STAGE_MIN` buffers."""
    if not _cap:
        from mrecord.storage.probe import memory_budget

        budget = memory_budget()
        share = STAGE_CAP if budget is None else min(STAGE_CAP, budget // 8)
        _cap.append(max(4 * STAGE_MIN, share))
    return _cap[0]


def stage_bytes() -> int:
    """The buffer size a stream opened now gets (see the module docstring)."""
    with _budget_lock:
        return _stage_size_locked()


def _stage_size_locked() -> int:
    size = STAGE_MAX
    while size > STAGE_MIN and _staged + 2 * size > min(STAGE_BUDGET, stage_cap()):
        size //= 2
    return size


def _take_stage_size() -> int | None:
    """Reserve a new stream's buffers; None past :func:`stage_cap`."""
    global _staged
    with _budget_lock:
        size = _stage_size_locked()
        if _staged + 2 * size > stage_cap():
            return None
        _staged += 2 * size
        return size


def _give_back(size: int) -> None:
    global _staged
    with _budget_lock:
        _staged -= 2 * size


def _pwrite_all(fd: int, data: Any, position: int, fallback_fd: int) -> None:
    """``pwrite`` all of ``data`` at ``position``; after a short direct write (a nearly
    full disk, a signal) the rest goes through ``fallback_fd``, which needs no alignment."""
    view = memoryview(data)
    done = os.pwrite(fd, view, position)
    view, position = view[done:], position + done
    while view:
        n = os.pwrite(fallback_fd, view, position)
        view, position = view[n:], position + n


class DirectStream:
    """The bytes of one file from ``position`` on, written with ``O_DIRECT`` (see the
    module docstring). ``fd`` is the file's ordinary descriptor (kept by the caller)."""

    def __init__(self, direct_fd: int, fd: int, position: int, head: bytes, *, size: int):
        """``size``: the buffer size :meth:`open` reserved for this stream."""
        if position % BLOCK or len(head) >= BLOCK:
            raise ArgumentError(
                f"a direct stream starts at a block boundary with less than a block staged, "
                f"not at {position} with {len(head)} bytes"
            )
        self._direct_fd: int | None = direct_fd
        self._fd = fd
        self._size = size
        self._stages = [mmap.mmap(-1, self._size), mmap.mmap(-1, self._size)]
        # the budget comes back at close, or when an abandoned stream is collected (not
        # registered before the buffers exist: a failed start is given back by open())
        self._release = weakref.finalize(self, _give_back, self._size)
        self._writes: list[Future[None] | None] = [None, None]
        self._current = 0
        self._at = position  # file position of the current stage's byte 0
        self._fill = len(head)
        self._stages[0][: len(head)] = head

    @classmethod
    def open(
        cls, path: os.PathLike[str] | str, fd: int, position: int = 0, head: bytes = b""
    ) -> DirectStream | None:
        """A stream writing ``path`` from ``position`` (a block boundary; ``head``: the
        bytes already there up to the end of the file), or None where the file system
        refuses ``O_DIRECT`` (or the platform has none), or when the streams open in
        the process hold :data:`STAGE_CAP` of buffers already."""
        if not _O_DIRECT:
            return None
        size = _take_stage_size()
        if size is None:
            return None
        try:
            direct_fd = os.open(path, os.O_WRONLY | _O_DIRECT)
        except OSError:
            _give_back(size)
            return None
        try:
            return cls(direct_fd, fd, position, head, size=size)
        except BaseException:
            os.close(direct_fd)
            _give_back(size)
            raise

    def write(self, buffers: list[Any]) -> None:
        """Append ``buffers`` (bytes-like, each C-contiguous) to the file."""
        for buf in buffers:
            whole = memoryview(buf)
            if not whole.nbytes:  # an empty array (shape (0, 4)) cannot be cast to bytes
                continue
            view = whole.cast("B")
            while view:
                stage = self._stages[self._current]
                n = min(len(view), self._size - self._fill)
                stage[self._fill : self._fill + n] = view[:n]
                self._fill += n
                view = view[n:]
                if self._fill == self._size:
                    self._submit_full()

    def _submit_full(self) -> None:
        """Write the full current stage directly (on the write thread); go on in the other."""
        direct_fd = self._need_fd()
        stage, at = self._stages[self._current], self._at
        self._writes[self._current] = process_thread("mrecord-write-direct").submit(
            _pwrite_all, direct_fd, stage, at, self._fd
        )
        self._current = 1 - self._current
        self._wait(self._current)  # its last write must be done before it is refilled
        self._at = at + self._size
        self._fill = 0

    def flush(self) -> None:
        """Put every byte written so far into the file (durable after an ``fsync``): the
        staged whole blocks directly, the last partial block through ``fd``. The partial
        block stays staged, so the stream goes on from where it is."""
        direct_fd = self._need_fd()
        self.wait()
        stage = self._stages[self._current]
        whole = self._fill - self._fill % BLOCK
        if whole:
            _pwrite_all(direct_fd, memoryview(stage)[:whole], self._at, self._fd)
        rest = self._fill - whole
        if rest:
            _pwrite_all(self._fd, memoryview(stage)[whole : self._fill], self._at + whole, self._fd)
        if whole:
            stage[:rest] = stage[whole : self._fill]
            self._at += whole
            self._fill = rest

    def wait(self) -> None:
        """Wait for the writes in flight (their errors are raised here)."""
        for i in (0, 1):
            self._wait(i)

    def _wait(self, i: int) -> None:
        write, self._writes[i] = self._writes[i], None
        if write is not None:
            write.result()

    def close(self) -> None:
        """Close the direct descriptor and free the buffers once their writes are done
        (errors ignored: the caller has flushed, or is throwing the file away)."""
        with contextlib.suppress(OSError):
            self.wait()
        if self._direct_fd is not None:
            fd, self._direct_fd = self._direct_fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        # The buffers are not closed by hand: a view of one may still be held by a failed
        # write's traceback (mmap refuses to close then); dropping them frees them.
        self._stages = []
        self._release()

    def _need_fd(self) -> int:
        if self._direct_fd is None:
            raise WriterStateError("the direct stream is closed")
        return self._direct_fd
