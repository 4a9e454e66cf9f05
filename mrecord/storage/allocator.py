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

The cost is memory: a process may hold up to :data:`KEEP_BYTES` of freed heap it would
otherwise have returned; it is reused by the next allocations of any kind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

__all__ = ["KEEP_BYTES", "keep_freed_memory", "small_budget"]

KEEP_BYTES = 256 << 20
"""Freed heap memory glibc keeps for reuse once :func:`keep_freed_memory` ran."""

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
    if os.environ.get("MRECORD_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    if small_budget():
        return False
    try:  # "glibc 2.36" on glibc; missing or different elsewhere (musl, macOS)
        libc_version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        libc_version = ""
    if not libc_version.startswith("glibc"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error
    trim = bool(mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES))
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and trim
