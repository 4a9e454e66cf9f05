"""Values that hold their own bytes, for nodes that keep a few rows of many reads.

A reader hands out large values as views of its read buffers (a ``MindDataset``'s 8 MiB
ones; a ``RemoteDataset``'s receive buffers): a value keeps its whole buffer alive. A node
that passes blocks on lets go of them together; one that keeps some rows of many reads
(a shuffle buffer, a filter keeping one row in a hundred ahead of ``batch``) kept a buffer
per row: ``shuffle(buffer_size=700)`` over 100 KB images (a 67 MB buffer) and
``filter(...)`` of 1% of them before ``batch(32)`` were each OOM-killed in a 300 MB memory
group. :func:`owned` copies such values. Views of a file's memory map stay views (the
kernel takes those pages back), and so do values under :data:`OWN_MIN_BYTES`.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = ["OWN_MIN_BYTES", "owned", "viewed_bytes"]

OWN_MIN_BYTES = 4096
"""Values smaller than this stay views: copying each small variable-shape row made a
shuffle of them 1.5x slower, and what they keep is the reader's page copies (about a
megabyte each, a few dozen for a shuffle buffer of 10,000 rows), not its read buffers."""


def viewed_bytes(value: object) -> int:
    """The size of the buffer array ``value`` views, where it is one of
    :data:`OWN_MIN_BYTES` or more viewing a buffer (not a memory map) over twice its
    size; else 0."""
    if not isinstance(value, np.ndarray) or value.base is None:
        return 0
    nbytes = int(value.nbytes)
    if nbytes < OWN_MIN_BYTES:
        return 0
    root: Any = value.base
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if isinstance(root, mmap.mmap):
        return 0
    try:
        size = memoryview(root).nbytes
    except TypeError:  # not a buffer: nothing to tell
        return 0
    return size if size > 2 * nbytes else 0


def owned(block: Block, worth: Callable[[np.ndarray, int], bool] | None = None) -> Block:
    """``block`` with the values that view a larger buffer (:func:`viewed_bytes`) copied,
    read-only where they were; ``worth(value, buffer bytes)`` picks among them (default:
    all). The same block when nothing is copied."""
    columns: dict[str, Any] | None = None
    for name, values in block.columns.items():
        if not isinstance(values, list):
            continue
        copies = [_copy_of(v, worth) for v in values]
        if not any(c is not None for c in copies):
            continue
        if columns is None:
            columns = dict(block.columns)
        columns[name] = [v if c is None else c for v, c in zip(values, copies, strict=True)]
    if columns is None:
        return block
    return Block(columns, block.row_ids)


def _copy_of(value: Any, worth: Callable[[np.ndarray, int], bool] | None) -> Any:
    """A copy of ``value`` where it is to be owned, else None."""
    size = viewed_bytes(value)
    if not size or (worth is not None and not worth(value, size)):
        return None
    copy = value.copy()
    copy.flags.writeable = bool(value.flags.writeable)
    return copy
