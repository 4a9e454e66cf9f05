"""Gathering variable-shape arrays (VARARRAY columns) many rows at a time.

One numpy array per value is what the reader hands out (MindSpore's semantics: each row's
value is its own writeable array). Built one row at a time that is a slice, a reshape and
a copy per row, in Python (rates before and after: docs/BENCHMARKS.md, "Issue 14, second
round"). (Pages of which a quarter or more is wanted
are copied whole and handed out as views, in ``DatasetReader``.) Here the wanted rows of
a shard's other uncompressed pages, when a call wants at least ``GROUPED_MIN_ROWS`` of
them, are grouped by shape and each group is gathered from the file's memory map with
one fancy index into one new ``(rows, *shape)`` array; the values are its rows (views,
writeable, not sharing memory with each other or with the file). A value kept alive
keeps its group's array alive (at most one call's rows of that shape, values of at most
4 KiB each). Rows whose values are big are copied one by one instead: the copy is the
cost there, and an index array per byte would not be.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.format.chunks import DecodedVarChunk
from mrecord.format.schema import Field

__all__ = ["GROUPED_MIN_ROWS", "PageRows", "gather_by_shape"]

GROUPED_MIN_ROWS = 1024
"""Calls for fewer rows of a shard are faster row by row (grouping has a fixed cost)."""

_GROUP_MAX_BYTES = 4096  # values up to this size are gathered in groups
_GROUP_MIN_ROWS = 8  # ... of at least this many rows of one shape

PageRows = tuple[int, DecodedVarChunk, np.ndarray, np.ndarray]
"""(absolute file offset of the chunk, its decoded head, result positions, slots)."""


def gather_by_shape(
    field: Field, file_bytes: np.ndarray, pages: Sequence[PageRows], result: list[Any]
) -> None:
    """Put the values of ``pages``' wanted rows into ``result`` at their positions.

    ``file_bytes`` is the whole shard file as a ``uint8`` array (a view of the map); each
    page's chunk is stored uncompressed at the given offset and has been checksummed.
    """
    dtype = field.dtype
    itemsize = dtype.itemsize
    starts = np.concatenate(
        [offset + head.data_start + head.offsets_array[slots] for offset, head, _, slots in pages]
    )
    shapes = np.concatenate(
        [np.asarray(head.shapes)[slots] for _, head, _, slots in pages]
    ).astype(np.int64)
    where = np.concatenate([positions for _, _, positions, _ in pages])
    sizes = np.prod(shapes, axis=1) * itemsize

    def copy_rows(rows: list[int]) -> None:  # one copy per value
        for row in rows:
            a, n = int(starts[row]), int(sizes[row])
            value = file_bytes[a : a + n].view(dtype).reshape(tuple(shapes[row].tolist()))
            result[int(where[row])] = value.copy()

    big = sizes > _GROUP_MAX_BYTES
    copy_rows(np.flatnonzero(big).tolist())
    small = np.flatnonzero(~big)
    if not len(small):
        return
    key = _shape_keys(shapes[small])
    by_key = np.argsort(key, kind="stable")
    order, sorted_key = small[by_key], key[by_key]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_key)) + 1).tolist(), len(order)]
    aligned = not np.any(starts[small] % itemsize)
    items = file_bytes[: len(file_bytes) // itemsize * itemsize].view(dtype) if aligned else None
    for lo, hi in itertools.pairwise(bounds):
        rows = order[lo:hi]
        shape = tuple(shapes[rows[0]].tolist())
        count = int(np.prod(shape, dtype=np.int64))
        if 0 < len(rows) < _GROUP_MIN_ROWS:  # a few rows: copies cost less than an index
            copy_rows(rows.tolist())
            continue
        if count == 0:
            group = np.empty((len(rows), *shape), dtype=dtype)
        elif items is not None:
            index = (starts[rows] // itemsize)[:, None] + np.arange(count, dtype=np.int64)
            group = items[index].reshape((len(rows), *shape))
        else:
            index = starts[rows][:, None] + np.arange(count * itemsize, dtype=np.int64)
            group = file_bytes[index].view(dtype).reshape((len(rows), *shape))
        for pos, value in zip(where[rows].tolist(), group, strict=True):
            result[pos] = value


def _shape_keys(shapes: np.ndarray) -> np.ndarray:
    """One int64 per row, equal exactly when the shapes are equal."""
    if shapes.shape[1] == 0:
        return np.zeros(len(shapes), dtype=np.int64)
    dims = shapes.max(axis=0) + 1
    if float(np.prod(dims.astype(np.float64))) < 2.0**62:
        keys = np.ravel_multi_index(tuple(shapes.T), tuple(dims.tolist()))
        return np.asarray(keys, dtype=np.int64)
    _, inverse = np.unique(shapes, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)
