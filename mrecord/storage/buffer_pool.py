"""Page-aligned buffers for bytes read from storage, reused once nothing views them.

A cold read of values (``O_DIRECT`` into one buffer a block, the values handed out as
views of it) needs a fresh buffer for every block: a few MiB that glibc maps anew, that
the kernel faults in and zero-fills (as 2 MiB huge pages) on the first ``pread`` into it,
and that is unmapped again when the consumer drops the block's values. Measured on a
random epoch of 100 KB images in a 200 MB memory group: zero-filling alone was 6.5% of
the process's CPU, and the page faults 50,000 a 6,000-row epoch (perf).

A buffer from :func:`aligned_buffer` lives in a slab this module keeps: the array handed
out views a small *lease* object (a ctypes array over the slab) that every view of the
buffer holds, directly or through the arrays it was sliced from. When the last view dies
the lease dies with it, and its slab goes back to the pool for the next block, already
faulted in. Nothing is ever reused while any value of it can still be read: the pool
keeps no reference that would let it hand out memory a view still points at.

The pool keeps at most :func:`keep_bytes` of free slabs (an eighth of the memory budget,
up to 64 MiB); a slab given back beyond that is freed.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from mrecord.storage.probe import budget_workers, first_memory_budget

__all__ = [
    "KEEP_MAX",
    "MAPPED_ROUND",
    "SLAB_ROUND",
    "BufferPool",
    "aligned_buffer",
    "pool",
    "release_free_slabs",
]

_PAGE = mmap.PAGESIZE
SLAB_ROUND = 1 << 20
"""Slabs are whole MiBs: blocks of similar size share them."""
MAPPED_ROUND = 64 << 10
"""Slabs of a ``mapped`` pool are whole 64 KiBs (chunk pieces of many sizes)."""
KEEP_MAX = 64 << 20
"""Free slabs a pool keeps at most (less under a small memory budget)."""


class BufferPool:
    """Slabs of page-aligned memory handed out as buffers and taken back when no view
    of them is left (see the module docstring)."""

    def __init__(self, keep_bytes: int | None = None, *, mapped: bool = False) -> None:
        self._keep = keep_bytes
        self._mapped = mapped
        self._round = MAPPED_ROUND if mapped else SLAB_ROUND
        self._free: list[np.ndarray] = []
        self._free_bytes = 0
        self._lock = threading.Lock()
        # Slabs given back, not yet sorted into the free list. A lease caught in a
        # reference cycle dies when the garbage collector runs, in any thread, also in
        # this pool's code with the lock held: giving back must not take the lock (a
        # suite run hung so). deque.append is atomic; the lock's holders sort them in.
        self._returned: deque[np.ndarray] = deque()
        self._lease_types: dict[int, Any] = {}
        _pools.add(self)

    @property
    def free_bytes(self) -> int:
        """Bytes of free slabs held for the next buffers."""
        with self._lock:
            self._sort_returned()
            return self._free_bytes

    def take(self, nbytes: int) -> np.ndarray:
        """A writable ``uint8`` array of ``nbytes`` starting on a page boundary; its
        memory is reused only after it and every view of it are gone."""
        nbytes = max(0, int(nbytes))
        slab = self._reuse(nbytes)
        if slab is None:
            size = max(self._round, -(-nbytes // self._round) * self._round)
            if self._mapped:  # a mapping of its own, page-aligned, unmapped when let go
                flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                slab = np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=np.uint8)
            else:
                raw = np.empty(size + _PAGE, dtype=np.uint8)
                skip = -raw.ctypes.data % _PAGE
                slab = raw[skip : skip + size]
        lease = self._lease_type(len(slab)).from_buffer(slab)  # holds the slab
        weakref.finalize(lease, self._give_back, slab).atexit = False
        return np.frombuffer(lease, dtype=np.uint8, count=nbytes)

    def release_free(self) -> int:
        """Let go of every free slab (the next buffers are made anew); the bytes let go.
        Slabs still viewed are not touched: they come back, and are kept, as before.

        Nothing (0) while the lock is held: a run's end calls this, and a run can end in
        a finalizer that the garbage collector runs in any thread, also in this pool's
        code with the lock held (see ``_returned``); waiting there would never end."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            self._sort_returned()
            freed, self._free, self._free_bytes = self._free_bytes, [], 0
        finally:
            self._lock.release()
        return freed

    def _reuse(self, nbytes: int) -> np.ndarray | None:
        """The smallest free slab that holds ``nbytes`` and is at most four times that
        (a small buffer does not pin a big slab), taken off the free list; None if none."""
        with self._lock:
            self._sort_returned()
            best = -1
            for i, slab in enumerate(self._free):
                size = len(slab)
                if nbytes <= size <= 4 * max(nbytes, self._round) and (
                    best < 0 or size < len(self._free[best])
                ):
                    best = i
            if best < 0:
                return None
            slab = self._free.pop(best)
            self._free_bytes -= len(slab)
            return slab

    def _give_back(self, slab: np.ndarray) -> None:
        """The last view of ``slab`` died: keep it for the next buffer, within the cap
        (beyond it, it is freed). Never waits for the lock (see ``_returned``): when it
        is held, the slab is left for its holder to sort in."""
        self._returned.append(slab)
        if self._lock.acquire(blocking=False):
            try:
                self._sort_returned()
            finally:
                self._lock.release()

    def _sort_returned(self) -> None:
        """Move the slabs given back into the free list, within the cap (lock held)."""
        keep = self._keep if self._keep is not None else keep_bytes()
        while self._returned:
            slab = self._returned.popleft()
            if self._free_bytes + len(slab) <= keep:
                self._free.append(slab)
                self._free_bytes += len(slab)

    def _lease_type(self, size: int) -> Any:
        # A Python subclass of a ctypes array: weakly referenceable (ctypes' own are not).
        kind = self._lease_types.get(size)
        if kind is None:
            kind = type("_Lease", (ctypes.c_char * size,), {})
            self._lease_types[size] = kind
        return kind


_keep: tuple[int, int] | None = None  # (the budget's workers when measured, bytes)
_pools: weakref.WeakSet[BufferPool] = weakref.WeakSet()  # every pool of the process


def release_free_slabs() -> int:
    """Every pool of the process lets go of its free slabs (see
    :meth:`BufferPool.release_free`); the bytes let go."""
    return sum(one.release_free() for one in list(_pools))


def keep_bytes() -> int:
    """The free slabs the process's pool keeps: an eighth of the memory budget
    (``mrecord.storage.probe.first_memory_budget``), at most ``KEEP_MAX``."""
    global _keep
    # measured again once the budget's share changed (a DataLoader worker that inherited
    # its parent's measure learns it shares the memory); called for every slab given back
    workers = budget_workers()
    if _keep is None or _keep[0] != workers:
        budget = first_memory_budget()
        _keep = (workers, KEEP_MAX if budget is None else min(KEEP_MAX, budget // 8))
    return _keep[1]


_pool = BufferPool()


def pool() -> BufferPool:
    """The process's pool (every reader's cold values and chunk reads)."""
    return _pool


def aligned_buffer(nbytes: int) -> np.ndarray:
    """A ``uint8`` array of ``nbytes`` starting on a page boundary (direct I/O wants it)
    from the process's pool: memory of an earlier buffer nothing views any more."""
    return _pool.take(nbytes)
