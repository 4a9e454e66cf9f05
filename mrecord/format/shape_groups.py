"""Many variable-shape values cut out of one buffer at once, grouped by shape.

A variable-shape column is handed out as one numpy array per value. Cut one at a time
(a slice, a ``frombuffer``, a reshape and maybe a copy per value, in Python) that costs
microseconds a value: more than the bytes. Here the values are grouped by shape and each
group is gathered with one fancy index into one new ``(rows, *shape)`` array; the values
are its rows (views, writeable, not sharing memory with each other or with the buffer).
A value kept alive keeps its group's array alive (at most one call's values of that
shape, of at most :data:`GROUP_MAX_BYTES` each). Values whose shapes differ in their
first dimension alone (a ``[-1, 3]`` column's) are instead packed one after another, in
the order of their places, into one new buffer (copied a length at a time) and handed
out as slices of it, made in that order: the order a consumer takes them in (one
call's values then live as long as any of them). Bigger values are cut one by one: the
copy is their cost there, and an index entry per byte would not be.

Used by the reader (``reader/ragged.py``: values from a shard's pages) and by the
reader service's block format (``serve/protocol/wire.py``: values from a response body).
"""

from __future__ import annotations

import itertools
from collections.abc import MutableSequence
from typing import Any

import numpy as np

__all__ = [
    "GROUP_MAX_BYTES",
    "GROUP_MIN_ROWS",
    "byte_windows",
    "gather_spans",
    "row_products",
    "scatter_spans",
    "shape_keys",
    "stable_order",
    "values_by_shape",
]

GROUP_MAX_BYTES = 4096
"""Values up to this size are gathered in groups; bigger ones one by one."""

GROUP_MIN_ROWS = 8
"""A shape with fewer values is cut one by one (an index costs more than the copies)."""


def values_by_shape(
    data: np.ndarray,
    starts: np.ndarray,
    shapes: np.ndarray,
    dtype: np.dtype[Any],
    where: np.ndarray,
    result: MutableSequence[Any],
    *,
    copy_big: bool = True,
) -> None:
    """Put value ``i`` at ``result[where[i]]``.

    Value ``i`` is ``dtype`` items of shape ``shapes[i]`` (``shapes``: ``(n, ndim)``)
    starting at byte ``starts[i]`` of ``data`` (a contiguous ``uint8`` array). The caller
    has checked that every value lies inside ``data``. Values bigger than
    :data:`GROUP_MAX_BYTES` are copies, or with ``copy_big=False`` views of ``data``.
    """
    if not len(starts):
        return
    shapes = shapes.astype(np.int64, copy=False)
    sizes = row_products(shapes) * dtype.itemsize
    big = sizes > GROUP_MAX_BYTES
    _cut_each(data, starts, shapes, dtype, where, np.flatnonzero(big), copy_big, result)
    small = np.flatnonzero(~big)
    if not len(small):
        return
    if len(small) == len(starts) and _leading_rows_in_order(
        data, starts, shapes, sizes, dtype, where, result
    ):
        return
    key = shape_keys(shapes[small])
    by_key = stable_order(key)
    order, sorted_key = small[by_key], key[by_key]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_key)) + 1).tolist(), len(order)]
    alone: list[np.ndarray] = []  # shapes with too few values to gather: cut one by one
    for lo, hi in itertools.pairwise(bounds):
        rows = order[lo:hi]
        if hi - lo < GROUP_MIN_ROWS:
            alone.append(rows)
            continue
        shape = tuple(shapes[rows[0]].tolist())
        group = gather_spans(data, starts[rows], int(sizes[rows[0]])).view(dtype)
        group = group.reshape((len(rows), *shape))
        for pos, value in zip(where[rows].tolist(), group, strict=True):
            result[pos] = value
    if alone:
        rows = np.concatenate(alone)
        _cut_each(data, starts, shapes, dtype, where, rows, True, result)


def _leading_rows_in_order(
    data: np.ndarray,
    starts: np.ndarray,
    shapes: np.ndarray,
    sizes: np.ndarray,
    dtype: np.dtype[Any],
    where: np.ndarray,
    result: MutableSequence[Any],
) -> bool:
    """Values whose shapes differ in their first dimension alone (a ``[-1, 3]`` column's
    always do), packed into one new buffer in the order of their places (``where``
    ascending) and handed out as slices of it, made in that order; False (nothing done)
    for other shapes.

    Grouped by shape, a consumer taking a ``Shuffle.BLOCK`` block's rows in order met
    their arrays (and their bytes) in the order of 64 shapes, not its own: objects made
    far apart, touched once each, then freed in that order too.
    """
    if shapes.shape[1] == 0:
        return False
    trailing = shapes[0, 1:]
    if shapes.shape[1] > 1 and not (shapes[:, 1:] == trailing).all():
        return False
    row_shape = tuple(trailing.tolist())
    row_bytes = dtype.itemsize * int(np.prod(trailing, dtype=np.int64))
    if row_bytes == 0:
        return False
    by_place = stable_order(where)
    sizes_in_order = sizes[by_place]
    ends = np.cumsum(sizes_in_order)
    dst = np.empty_like(ends)
    dst[by_place] = ends - sizes_in_order
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    scatter_spans(out, data, dst, starts, sizes)
    rows = out.view(dtype).reshape(-1, *row_shape)
    lasts = (ends // row_bytes).tolist()
    firsts = [0, *lasts[:-1]]
    values = [rows[a:b] for a, b in zip(firsts, lasts, strict=True)]
    in_order = where[by_place]
    if bool((np.diff(in_order) == 1).all()):  # ascending one by one: a run
        first = int(in_order[0])
        result[first : first + len(values)] = values
    else:
        for pos, value in zip(in_order.tolist(), values, strict=True):
            result[pos] = value
    return True


def scatter_spans(
    out: np.ndarray, data: np.ndarray, dst: np.ndarray, starts: np.ndarray, sizes: np.ndarray
) -> None:
    """Spans ``data[starts[i]:][:sizes[i]]`` into ``out[dst[i]:]`` (spans of ``out`` that
    never overlap), a group of equal lengths at a time: one fancy index of
    :func:`byte_windows` each, long or rare lengths one by one."""
    by_size = stable_order(sizes)
    sorted_sizes = sizes[by_size]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_sizes)) + 1).tolist(), len(by_size)]
    for lo, hi in itertools.pairwise(bounds):
        rows = by_size[lo:hi]
        size = int(sorted_sizes[lo])
        if size == 0:
            continue
        if size > GROUP_MAX_BYTES or len(rows) < GROUP_MIN_ROWS:
            for a, b in zip(starts[rows].tolist(), dst[rows].tolist(), strict=True):
                out[b : b + size] = data[a : a + size]
            continue
        # the spans as windows of ``data``, written to windows of ``out``; as rows of
        # ``as_strided`` views, 2-2.5x slower (``gather_spans``)
        byte_windows(out, size)[dst[rows]] = byte_windows(data, size)[starts[rows]]


def _cut_each(
    data: np.ndarray,
    starts: np.ndarray,
    shapes: np.ndarray,
    dtype: np.dtype[Any],
    where: np.ndarray,
    rows: np.ndarray,
    copy: bool,
    result: MutableSequence[Any],
) -> None:
    """Values ``rows`` cut out one at a time (copies, or views of ``data``), each an array
    straight over its bytes, their places, starts and shapes taken as Python lists first:
    a numpy scalar a field a value, and a slice, view and reshape a value, cost 5.3 us a
    value in a read of 256 values of 64 shapes (each too rare to gather), now 1.7."""
    if not len(rows):
        return
    fields = (where[rows], starts[rows], shapes[rows])
    over = np.ndarray  # an array straight over the bytes: one call, not a slice, view, reshape
    for pos, a, shape in zip(*(f.tolist() for f in fields), strict=True):
        value = over(shape, dtype, data, a)
        result[pos] = value.copy() if copy else value


def row_products(shapes: np.ndarray) -> np.ndarray:
    """The product of each row of an ``(n, ndim)`` int64 array (1 where ``ndim`` is 0): a
    multiply a dimension (``np.prod(axis=1)`` over a few columns cost 15 ns a row, ~10x)."""
    n, ndim = shapes.shape
    if ndim == 0:
        return np.ones(n, dtype=np.int64)
    product = shapes[:, 0].copy()
    for d in range(1, ndim):
        product *= shapes[:, d]
    return product


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for an int array, in fewer steps where it can:
    a permutation of a run of ints (a block's places) inverted with one scatter, and keys
    within a span of 2**16 sorted as ``uint16`` (numpy's radix sort: 3.3 against 24-44 ns
    a key for 10,000 keys)."""
    n = len(keys)
    if n < 2:
        return np.zeros(n, dtype=np.intp)
    low, high = int(keys.min()), int(keys.max())
    if high - low == n - 1:
        order = np.zeros(n, dtype=np.intp)  # a repeated key leaves zeros: still in range
        order[keys - low] = np.arange(n, dtype=np.intp)
        if np.array_equal(keys[order] - low, np.arange(n)):  # each key once: a permutation
            return order
    if high - low < 1 << 16:
        return np.argsort((keys - low).astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def shape_keys(shapes: np.ndarray) -> np.ndarray:
    """One int64 per row, equal exactly when the shapes are equal."""
    if shapes.shape[1] == 0:
        return np.zeros(len(shapes), dtype=np.int64)
    dims = shapes.max(axis=0) + 1
    if float(np.prod(dims.astype(np.float64))) < 2.0**62:
        keys = np.ravel_multi_index(tuple(shapes.T), tuple(dims.tolist()))
        return np.asarray(keys, dtype=np.int64)
    _, inverse = np.unique(shapes, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def gather_spans(data: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """A new ``(len(starts), size)`` uint8 array: row ``i`` is ``data[starts[i]:][:size]``
    (every span inside ``data``: the caller checks).

    One index entry a row, not a byte: ``data`` seen as every ``size``-byte window of
    itself, each one item of a ``size``-byte void dtype (an array straight over the
    bytes, no memory), indexed by the starts; numpy copies each item whole. The same
    windows as rows of a two-dimensional strided view (``as_strided``) cost 2-2.5x as
    much: 13-14 us against 6 for a few rows, 207 against 84 us for 4,096 of 64 bytes
    (a variable-shape ``Shuffle.BLOCK`` read calls this once a shape a page). ``data``
    must be contiguous (``np.take`` on the view would copy all of ``data`` first).
    """
    if size == 0 or not len(starts):
        return np.empty((len(starts), size), dtype=np.uint8)
    rows: np.ndarray = byte_windows(data, size)[starts].view(np.uint8).reshape(len(starts), size)
    return rows


def byte_windows(buffer: np.ndarray, size: int) -> np.ndarray:
    """Every ``size``-byte window of the contiguous ``uint8`` array ``buffer`` (``size`` >=
    1, at most its length), window ``i`` starting at byte ``i``, as one item of a
    ``size``-byte void dtype: a view, writeable where ``buffer`` is. Indexing it copies
    each window whole (see :func:`gather_spans`); windows overlap, so a write through
    it must not touch two that do."""
    item = np.dtype((np.void, size))
    return np.ndarray((len(buffer) - size + 1,), item, buffer, 0, (1,))
