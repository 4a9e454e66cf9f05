"""Reusable byte buffers for big blocks: fresh memory costs more than the copy into it.

A new multi-megabyte buffer comes from the kernel as untouched pages: the first write
to each page faults and the kernel zeroes it (with huge pages, 2 MiB at a time). Measured
on the block path (docs/SERVE.md, "Performance"), zeroing fresh receive buffers was half of
the client's CPU and a fifth of the server's. :class:`BufferPool` hands out the same
buffers again once nothing uses them any more.

"Nothing uses it" is read from the buffer's reference count: every numpy view, memoryview
or array built on a buffer keeps a reference to the array that owns the memory (numpy
collapses ``base`` chains to that owner), so while any value of a block is alive its
buffer is not handed out again, however long the caller keeps it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import numpy as np

__all__ = ["BufferPool"]


def _unused_refcount() -> int:
    """``sys.getrefcount`` of an array held only by a list, measured the way ``take`` does."""
    held = [np.empty(1, dtype=np.uint8)]
    return sys.getrefcount(held[0])


_UNUSED = _unused_refcount()


def _empty(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, dtype=np.uint8)


_ROUND = 1 << 20


class BufferPool:
    """Up to ``keep`` uint8 buffers, reused when no view of them is alive; thread-safe.

    ``take(n)`` returns an uninitialized ``uint8`` array of ``n`` bytes: a view of a pooled
    buffer when one is free and big enough, else a new one (pooled while there is room:
    fewer than ``keep`` buffers and, when ``keep_bytes`` is given, that many bytes).
    ``allocate(n)`` makes a new buffer (default: ``numpy.empty``; the same-host transport
    gives shared memory).
    """

    def __init__(
        self,
        keep: int,
        allocate: Callable[[int], np.ndarray] | None = None,
        keep_bytes: int | None = None,
    ) -> None:
        self._keep = keep
        self._keep_bytes = keep_bytes  # None: any size; else the most bytes kept in all
        self._allocate = allocate or _empty
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop every buffer and the lock (in a forked child, whose lock may be held by a
        thread that does not exist there)."""
        self._buffers = []
        self._lock = threading.Lock()

    def keep_at_least(self, keep: int) -> None:
        """Let the pool keep ``keep`` buffers if it keeps fewer (one more user of the pool)."""
        with self._lock:
            self._keep = max(self._keep, keep)

    def take(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of uninitialized memory, valid while the returned array (or any view
        of it) is alive."""
        with self._lock:
            free = [i for i in range(len(self._buffers)) if self._unused(i)]
            fits = [i for i in free if self._buffers[i].size >= nbytes]
            if fits:
                return self._buffers[min(fits, key=lambda i: self._buffers[i].size)][:nbytes]
            # Round up so that blocks of slightly different sizes share buffers.
            fresh = self._allocate(-(-nbytes // _ROUND) * _ROUND)
            if self._keep_bytes is not None and (
                sum(b.size for b in self._buffers) + fresh.size > self._keep_bytes
            ):
                return fresh[:nbytes]  # kept, it would hold memory the budget has not
            if len(self._buffers) < self._keep:
                self._buffers.append(fresh)
            elif free:  # keep the bigger one: the next blocks are likely this size
                self._buffers[min(free, key=lambda i: self._buffers[i].size)] = fresh
            return fresh[:nbytes]

    def _unused(self, i: int) -> bool:
        # No loop variable may hold the buffer here: it would count as a user.
        return sys.getrefcount(self._buffers[i]) == _UNUSED
