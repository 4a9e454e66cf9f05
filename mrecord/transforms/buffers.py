"""Recycled memory for large arrays made per chunk or batch (float32 images: tens of MB).

A fresh large numpy array is a fresh ``mmap`` (glibc maps allocations over 32 MB directly
and unmaps them on free), so every new batch pays the kernel for zeroing its pages: about
a quarter of the time of writing a 64 x 3 x 224 x 224 float32 batch. :func:`empty` lends a
recycled block instead: the array is a view of a pooled block, and the block goes back to
the pool when the last view of it is gone (a ``weakref.finalize`` on the view's buffer
object), so no array in use ever shares memory with another.

The same holds below that size in worker threads, whose malloc arenas give freed memory
back to the kernel: a chunk of 64 decoded 224 x 224 images (9.6 MB) faults its pages in
again every time. Small arrays (below :data:`MIN_BYTES`) are plain ``np.empty``.
The pool keeps at most :data:`MAX_BLOCKS` free blocks per size and :data:`MAX_POOLED_BYTES`
in all; blocks beyond that are simply freed, and :func:`release` frees them all. Arrays from
the pool are views (``owndata`` is False), so ``ndarray.resize`` in place does not work on
them; everything else does.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_BLOCKS",
    "MAX_POOLED_BYTES",
    "MIN_BYTES",
    "empty",
    "pooled_bytes",
    "release",
    "stack",
]

MIN_BYTES = 4 << 20
MAX_BLOCKS = 2
MAX_POOLED_BYTES = 256 << 20

_lock = threading.Lock()
_free: dict[int, list[np.ndarray]] = {}


def _give_back(block: np.ndarray) -> None:
    with _lock:
        blocks = _free.setdefault(block.nbytes, [])
        total = sum(b.nbytes for free in _free.values() for b in free)
        if len(blocks) < MAX_BLOCKS and total + block.nbytes <= MAX_POOLED_BYTES:
            blocks.append(block)


def _take(nbytes: int) -> np.ndarray:
    with _lock:
        blocks = _free.get(nbytes)
        if blocks:
            return blocks.pop()
    return np.empty(nbytes, dtype=np.uint8)


def empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array, in recycled memory when it is large."""
    dt = np.dtype(dtype)
    count = math.prod(shape)
    nbytes = count * dt.itemsize
    if nbytes < MIN_BYTES or dt.hasobject:
        return np.empty(tuple(shape), dtype=dt)
    block = _take(nbytes)
    # through a memoryview, numpy records a buffer object of its own as the array's base:
    # every view of the result keeps that object (and so the block) alive, and nothing else
    flat = np.frombuffer(block.data, dtype=dt, count=count)
    owner = flat.base
    if not isinstance(owner, memoryview) or owner.obj is not block:  # pragma: no cover
        return np.empty(tuple(shape), dtype=dt)
    weakref.finalize(owner, _give_back, block)
    return flat.reshape(tuple(shape))


def release() -> None:
    """Free every pooled block now (arrays in use are not affected)."""
    with _lock:
        _free.clear()


def pooled_bytes() -> int:
    """Bytes held in free blocks now (for tests and diagnostics)."""
    with _lock:
        return sum(b.nbytes for free in _free.values() for b in free)


def stack(values: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
    """``np.stack(values)`` (same shapes and ``dtype``), in recycled memory when large."""
    first = values[0]
    out = empty((len(values), *first.shape), dtype)
    if out.flags.owndata:  # small: numpy's own C-level stack is the fastest
        return np.array(values, dtype=dtype)
    for i, value in enumerate(values):
        out[i] = value
    return out
