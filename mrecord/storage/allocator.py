"""Keep freed memory for the next batch instead of faulting it in again (glibc only).

A reader that hands out ``bytes`` values allocates every value anew: 256 images of 100 KB
are 25 MB of fresh allocations per ``read_rows`` call. glibc serves allocations under
its mmap threshold (128 KB by default) from the heap and, on ``free``, hands the top of
the heap back to the kernel once more than its trim threshold (128 KB) is free there. The
next batch then faults every page in again, zero-filled by the kernel, which measured as
most of the time of a batched image read (docs/BENCHMARKS.md, "Where a peer wins").

:func:`keep_freed_memory` raises glibc's trim threshold to :data:`KEEP_BYTES` (the heap
keeps up to that much freed memory for reuse) and its mmap threshold to glibc's largest
allowed value, 32 MiB (values up to that size come from the reusable heap; setting
either turns off glibc's own dynamic adjustment of both). It runs once per process, when
the first reader opens, and changes nothing when:

- the C library is not glibc, or ``mallopt`` is missing;
- the user set ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_`` or
  ``MALLOC_TOP_PAD_`` themselves (their choice stands);
- ``MRECORD_KEEP_FREED_MEMORY=0`` is set (the process's allocator is left as it is);
- the process's memory budget is under 1 GiB (:func:`small_budget`: a small memory
  cgroup, where the memory kept would be missed).

A server is different (:func:`return_freed_blocks`, called by ``mrecord serve``): under
a budget that small it fixes glibc's mmap threshold at :data:`RETURN_ABOVE` (1 MiB), so
every allocation of that size or more (a block of values, an encoded answer) is its own
mapping and goes back to the kernel when freed. glibc's default raises its threshold to
the largest block freed so far (up to 32 MiB), after which those blocks come from the
heaps of the thread arenas and stay there once freed: ``mrecord serve`` in a 300 MB
group grew to 295 MB of anonymous memory over two runs and was OOM-killed (194 MB of it
huge pages: numpy asks for them on arrays of 4 MB and more); with the threshold fixed
it held ~80-120 MB (docs/SERVE.md). Not for readers: one in a 200 MB group read its
first epoch of 100 KB images 10-25% slower with it (each big buffer faulted in anew),
and was not short of memory without it.

The cost of keeping is memory: a process may hold up to :data:`KEEP_BYTES` of freed heap
it would otherwise have returned; it is reused by the next allocations of any kind.

Under a small budget, memory a reader kept for its next reads is given back when a run
ends (:func:`return_idle_memory`, called when a pipeline's iterator is done): the free
slabs of the buffer pools, and freed heap memory glibc still holds (``malloc_trim``).
Without it, the next reader of the process starts with less of the group than the first
(docs/READING.md, "Memory given back when a run ends").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Any

__all__ = [
    "KEEP_BYTES",
    "RETURN_ABOVE",
    "keep_freed_memory",
    "return_freed_blocks",
    "return_idle_memory",
    "small_budget",
]

KEEP_BYTES = 256 << 20
"""Freed heap memory glibc keeps for reuse once :func:`keep_freed_memory` ran."""

RETURN_ABOVE = 1 << 20
"""A server under a small budget: allocations of this size or more are mappings of their
own, returned to the kernel when freed (glibc's ``M_MMAP_THRESHOLD``)."""


def small_budget() -> bool:
    """Whether this process's memory budget is under ``4 * KEEP_BYTES`` (1 GiB;
    ``mrecord.storage.probe.memory_budget``: a memory cgroup's limit less what is charged
    to it, or the machine's available memory). Then glibc is left as it is: bounded
    memory matters more there than reused pages (freed memory is kept per thread arena,
    up to the trim threshold each). Measured: a reader of 100 KB images in a 200 MB
    memory group read as fast without the setting (GLOBAL first / second epoch 2,685 /
    6,153 rows/s against 2,713 / 5,024 with it; ``shuffle=False`` 3,580 / 9,178 against
    3,924 / 7,875; one run each on a shared machine)."""
    from mrecord.storage.probe import memory_budget  # at the first reader's open only

    budget = memory_budget()
    return budget is not None and budget < 4 * KEEP_BYTES


_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc refuses more on 64-bit (HEAP_MAX_SIZE / 2)
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

_lock = threading.Lock()
_outcome: bool | None = None  # None until the first call


def keep_freed_memory() -> bool:
    """Apply the setting (see the module docstring) once; whether it is in effect."""
    global _outcome
    with _lock:
        if _outcome is None:
            _outcome = _apply()
        return _outcome


def _apply() -> bool:
    if _left_alone() or small_budget():
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    # mallopt returns 1 on success, 0 on error
    trim = bool(mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES))
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and trim


def return_freed_blocks() -> bool:
    """For a server: under a small budget, fix glibc's mmap threshold at
    :data:`RETURN_ABOVE` (see the module docstring); whether it was set. Nothing when
    ``MRECORD_KEEP_FREED_MEMORY=0`` or a ``MALLOC_*`` setting of the user's is there, the
    budget is not small, or the C library is not glibc."""
    if _left_alone() or not small_budget():
        return False
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_MMAP_THRESHOLD, RETURN_ABOVE))


def return_idle_memory() -> int:
    """Under a small budget (:func:`small_budget`), give back what readers kept for their
    next reads: every buffer pool's free slabs, and, on glibc (unless the user asked for
    its allocator as it is), the freed memory of its heaps (``malloc_trim(0)``); the
    slabs' bytes given back (0 under a larger budget, where reuse is worth the memory).

    Measured: a file-order epoch of 3M small rows in a 100 MB memory group with blocks of
    2.5 MB left 46 MB of anonymous memory behind (6 MB of it free slabs, the rest freed
    block arrays in the thread arenas' heaps); the same process's next read, of
    variable-shape rows through the map, needs ~50 MB of its own and crawled (no end in
    300 s). Given back, 30 MB were left and the read took 6 s."""
    if not small_budget():
        return 0
    from mrecord.storage.buffer_pool import release_free_slabs  # only once a run ends

    released = release_free_slabs()
    if not _left_alone():
        trim = _libc_function("malloc_trim")
        if trim is not None:
            trim.argtypes = [ctypes.c_size_t]
            trim.restype = ctypes.c_int
            trim(0)
    return released


def _left_alone() -> bool:
    """Whether the user asked for glibc's allocator as it is: ``MRECORD_KEEP_FREED_MEMORY=0``
    or a ``MALLOC_*`` setting of their own."""
    if os.environ.get("MRECORD_KEEP_FREED_MEMORY", "1") == "0":
        return True
    return any(name in os.environ for name in _USER_SETTINGS)


def _mallopt() -> Any | None:
    """glibc's ``mallopt`` (``(param, value) -> 1 | 0``), or None elsewhere."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def _libc_function(name: str) -> Any | None:
    """The glibc function ``name`` (by ``ctypes``), or None where the C library is not
    glibc or lacks it."""
    try:  # "glibc 2.36" on glibc; missing or different elsewhere (musl, macOS)
        libc_version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        libc_version = ""
    if not libc_version.startswith("glibc"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return getattr(libc, name)
    except (OSError, AttributeError):
        return None
