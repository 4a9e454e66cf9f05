"""Orders: lazy sequences of global row ids, computed a chunk at a time.

An :class:`Order` is what the reader iterates: ``len(order)`` row ids, produced by
``order.take(positions)`` (vectorized) or ``order.iter_chunks(chunk_size)``, never
stored whole unless it is small. Global row ids number the rows of file 0 first,
then file 1, and so on; an id ``>= N`` (N = rows in the dataset) stands for the
``j``-th padded sample as ``N + j``.

Concrete orders, each a few numpy operations per chunk:

- :class:`RangeOrder` ``start, start+1, ..., stop-1``;
- :class:`ArrayOrder` an explicit id array (small orders: subsets, samples drawn with
  replacement);
- :class:`PermutationOrder` a keyed bijection of ``[0, n)`` (a Feistel network with
  cycle walking, see below): a full shuffle in O(1) memory;
- :class:`WindowedPermutation` a keyed bijection inside each consecutive window of
  ``window`` positions (the PARTIAL shuffle);
- :class:`SegmentOrder` files (segments) in a given order, rows inside each kept in
  order or permuted (the FILES and INFILE shuffles);
- :class:`ComposedOrder` one order read through another (``base[indices[p]]``);
- :class:`SliceOrder` a contiguous part of another order;
- :class:`ShardView` MindSpore's strided shard split with wraparound;
- :class:`PartitionedOrder` another order cut into contiguous partitions, read
  round-robin, so a strided split gives each shard one contiguous run (BLOCK);
- :class:`PaddedOrder` another order followed by padded ids.

The keyed permutation behind the shuffling orders is in :mod:`mrecord.sampling.permutation`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError, RowIndexError, WrongTypeError
from mrecord.sampling.permutation import (
    ceil_sqrt,
    feistel_side,
    permute,
    round_keys,
    segment_round_keys,
)

__all__ = [
    "SCATTERED",
    "SCATTER_SAMPLE",
    "ArrayOrder",
    "ComposedOrder",
    "IdArray",
    "Order",
    "PaddedOrder",
    "PartitionedOrder",
    "PermutationOrder",
    "RangeOrder",
    "SegmentOrder",
    "ShardView",
    "SliceOrder",
    "WindowedPermutation",
    "scattered_ids",
]

IdArray = npt.NDArray[np.int64]
"""A 1-D array of global row ids (or positions), dtype int64."""

DEFAULT_CHUNK = 1 << 16
"""Default chunk size of :meth:`Order.iter_chunks`."""

_MAX_DOMAIN = 1 << 62


# -------------------------------------------------------------------------- orders


_EMPTY: IdArray = np.zeros(0, dtype=np.int64)


def _concat(pieces: list[IdArray]) -> IdArray:
    if not pieces:
        empty: IdArray = _EMPTY.copy()
        return empty
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate(pieces)


def _as_positions(positions: object) -> IdArray:
    arr = np.asarray(positions)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise WrongTypeError(f"positions must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _check_count(name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise WrongTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum or value >= _MAX_DOMAIN:
        raise ArgumentError(f"{name} must be in [{minimum}, 2**62), got {value!r}")
    return int(value)


_WHOLE_CHUNK = 1 << 18
"""Ids an :meth:`Order.to_array` computes at a time."""


class Order(ABC):
    """A lazy sequence of global row ids (see the module docstring)."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of ids in the order."""

    @abstractmethod
    def _take(self, positions: IdArray) -> IdArray:
        """Ids at ``positions`` (1-D int64, already checked to lie in ``[0, len)``)."""

    def take(self, positions: npt.ArrayLike) -> IdArray:
        """Return the ids at ``positions`` (any integer array shape), as int64.

        Raises IndexError when a position is outside ``[0, len(self))``.
        """
        pos = _as_positions(positions)
        if pos.size:
            n = len(self)
            lo, hi = int(pos.min()), int(pos.max())
            if lo < 0 or hi >= n:
                bad = lo if lo < 0 else hi
                raise RowIndexError(f"position {bad!r} is outside [0, {n}) of this {self!r}")
        flat = pos.reshape(-1)
        return self._take(flat).reshape(pos.shape)

    def _take_range(self, start: int, stop: int) -> IdArray:
        """Ids at positions ``start .. stop - 1`` (``0 <= start <= stop <= len``).

        Orders override this where a contiguous run is cheaper than arbitrary positions.
        """
        return self._take(np.arange(start, stop, dtype=np.int64))

    def iter_chunks(
        self, chunk_size: int = DEFAULT_CHUNK, *, start: int = 0, first_size: int | None = None
    ) -> Iterator[IdArray]:
        """Yield the ids in order from position ``start``, ``chunk_size`` at a time (the
        last chunk may be shorter).

        With ``first_size`` the first chunk has that many ids and each next one twice as
        many, up to ``chunk_size``: a reader hands out its first rows sooner.
        """
        size = _check_count("chunk_size", chunk_size, 1)
        step = size if first_size is None else min(size, _check_count("first_size", first_size, 1))
        n = len(self)
        position = _check_count("start", start, 0)
        while position < n:
            stop = min(n, position + step)
            yield self._take_range(position, stop)
            position, step = stop, min(size, step * 2)

    def to_array(self, dtype: npt.DTypeLike = np.int64) -> IdArray:
        """Materialize the whole order, computed ``_WHOLE_CHUNK`` ids at a time into one
        array: at once, a keyed permutation's temporaries took ~45 bytes an id (8M ids:
        366 MB for a 64 MB result; ``mrecord shuffle-report`` and remote read plans).
        ``dtype``: the ids' integer type (``np.int32`` halves an order whose ids fit; typed
        as ``IdArray`` all the same: every use indexes or counts with it)."""
        n = len(self)
        if n <= _WHOLE_CHUNK:
            small: IdArray = self._take_range(0, n).astype(dtype, copy=False)
            return small
        out: IdArray = np.empty(n, dtype=dtype)
        for lo in range(0, n, _WHOLE_CHUNK):
            hi = min(n, lo + _WHOLE_CHUNK)
            out[lo:hi] = self._take_range(lo, hi)
        return out

    def __iter__(self) -> Iterator[int]:
        """Iterate ids one by one as Python ints (convenient; chunks are faster)."""
        for chunk in self.iter_chunks():
            yield from chunk.tolist()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)})"


class RangeOrder(Order):
    """The ids ``start, start + 1, ..., stop - 1`` (no shuffle)."""

    def __init__(self, start: int, stop: int):
        self.start = _check_count("start", start)
        self.stop = max(self.start, _check_count("stop", stop))

    def __len__(self) -> int:
        return self.stop - self.start

    def _take(self, positions: IdArray) -> IdArray:
        return positions + self.start

    def _take_range(self, start: int, stop: int) -> IdArray:
        return np.arange(self.start + start, self.start + stop, dtype=np.int64)

    def __repr__(self) -> str:
        return f"RangeOrder({self.start}, {self.stop})"


class ArrayOrder(Order):
    """An explicit array of ids (copied and made read-only)."""

    def __init__(self, ids: npt.ArrayLike):
        arr = _as_positions(ids).reshape(-1).copy()
        arr.flags.writeable = False
        self.ids: IdArray = arr

    def __len__(self) -> int:
        return len(self.ids)

    def _take(self, positions: IdArray) -> IdArray:
        return self.ids[positions]

    def _take_range(self, start: int, stop: int) -> IdArray:
        ids: IdArray = self.ids[start:stop].copy()
        return ids


class PermutationOrder(Order):
    """A keyed pseudorandom permutation of ``[0, n)`` that is never materialized.

    Memory is O(1): ``take`` of ``m`` positions costs a few numpy passes over ``m``
    elements. The same ``(n, key)`` always gives the same permutation.
    """

    def __init__(self, n: int, key: int):
        self.n = _check_count("n", n)
        self.key = int(key)
        self._keys = round_keys(self.key)
        self._side = feistel_side(self.n) if self.n else np.uint64(1)

    def __len__(self) -> int:
        return self.n

    def _take(self, positions: IdArray) -> IdArray:
        if self.n <= 1:
            same: IdArray = positions.copy()
            return same
        y = permute(positions.astype(np.uint64), np.uint64(self.n), self._side, self._keys)
        return y.astype(np.int64)


class WindowedPermutation(Order):
    """A keyed permutation inside each consecutive window of ``window`` positions.

    Position ``p`` stays in window ``p // window``; the last window may be shorter.
    Each window has its own key, derived from ``key`` and the window index.
    """

    def __init__(self, n: int, window: int, key: int):
        self.n = _check_count("n", n)
        self.window = _check_count("window", window, 1)
        self.key = int(key)
        self._keys = round_keys(self.key)
        full, rest = divmod(self.n, self.window)
        self._last = full if rest else full - 1
        self._last_size = rest if rest else self.window

    def __len__(self) -> int:
        return self.n

    def _take(self, positions: IdArray) -> IdArray:
        if positions.size == 0 or self.window == 1:
            same: IdArray = positions.copy()
            return same
        w = positions // self.window
        offset = (positions - w * self.window).astype(np.uint64)
        lo, hi = int(w.min()), int(w.max())
        if hi - lo <= positions.size + 64:
            table = segment_round_keys(self._keys, np.arange(lo, hi + 1))
            keys = table[:, w - lo]
        else:
            uniq, inverse = np.unique(w, return_inverse=True)
            keys = segment_round_keys(self._keys, uniq)[:, inverse.reshape(-1)]
        is_last = w == self._last
        n = np.where(is_last, np.uint64(self._last_size), np.uint64(self.window))
        side = np.where(is_last, feistel_side(self._last_size), feistel_side(self.window))
        y = permute(offset, n, side, keys)
        return y.astype(np.int64) + w * self.window

    def _take_range(self, start: int, stop: int) -> IdArray:
        if self.window == 1:
            return np.arange(start, stop, dtype=np.int64)
        pieces = []
        while start < stop:
            w = start // self.window
            base = w * self.window
            end = min(stop, base + self.window)
            size = self._last_size if w == self._last else self.window
            offset = np.arange(start - base, end - base, dtype=np.uint64)
            keys = segment_round_keys(self._keys, np.array([w]))[:, 0]
            y = permute(offset, np.uint64(size), feistel_side(size), keys)
            pieces.append(y.astype(np.int64) + base)
            start = end
        return _concat(pieces)


def _check_counts(counts: Sequence[int] | npt.NDArray[Any]) -> IdArray:
    arr = np.asarray(counts)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise WrongTypeError(f"file_row_counts must be a sequence of ints, got {counts!r}")
    arr = arr.astype(np.int64)
    if arr.size and int(arr.min()) < 0:
        raise ArgumentError(f"file_row_counts must be >= 0, got {arr.tolist()!r}")
    return arr


class SegmentOrder(Order):
    """Segments (files) of ``counts`` rows, visited in ``segment_order``.

    ``segment_order`` is a permutation of the segment indices (file order after a
    FILES shuffle). With ``key=None`` rows inside a segment keep their order (FILES);
    otherwise each segment's rows are permuted by its own keyed permutation (INFILE).
    """

    def __init__(
        self,
        counts: Sequence[int] | npt.NDArray[Any],
        segment_order: npt.ArrayLike | None = None,
        key: int | None = None,
    ):
        self.counts = _check_counts(counts)
        k = len(self.counts)
        if segment_order is None:
            perm = np.arange(k, dtype=np.int64)
        else:
            perm = _as_positions(segment_order).reshape(-1)
            if len(perm) != k or not np.array_equal(np.sort(perm), np.arange(k)):
                raise ArgumentError(
                    f"segment_order must be a permutation of range({k}), got {perm.tolist()!r}"
                )
        self.segment_order = perm
        self.key = key
        self._starts = np.concatenate(([0], np.cumsum(self.counts)[:-1])).astype(np.int64)
        out_counts = self.counts[perm]
        self._out_ends = np.cumsum(out_counts).astype(np.int64)
        self._out_starts = self._out_ends - out_counts
        self._n = int(self.counts.sum())
        if key is not None:
            self._seg_keys = segment_round_keys(round_keys(key), np.arange(k))
            self._seg_n = self.counts.astype(np.uint64)
            self._seg_side = ceil_sqrt(np.maximum(self.counts, 1))

    def __len__(self) -> int:
        return self._n

    def _take(self, positions: IdArray) -> IdArray:
        out_seg = np.searchsorted(self._out_ends, positions, side="right")
        offset = positions - self._out_starts[out_seg]
        seg = self.segment_order[out_seg]
        if self.key is not None and positions.size:
            offset = permute(
                offset.astype(np.uint64),
                self._seg_n[seg],
                self._seg_side[seg],
                self._seg_keys[:, seg],
            ).astype(np.int64)
        return self._starts[seg] + offset

    def _take_range(self, start: int, stop: int) -> IdArray:
        pieces = []
        out_seg = int(np.searchsorted(self._out_ends, start, side="right"))
        while start < stop:
            seg = int(self.segment_order[out_seg])
            seg_start = int(self._out_starts[out_seg])
            end = min(stop, int(self._out_ends[out_seg]))
            if end > start:
                offset = np.arange(start - seg_start, end - seg_start, dtype=np.int64)
                if self.key is not None:
                    offset = permute(
                        offset.astype(np.uint64),
                        self._seg_n[seg],
                        self._seg_side[seg],
                        np.ascontiguousarray(self._seg_keys[:, seg]),
                    ).astype(np.int64)
                pieces.append(offset + int(self._starts[seg]))
            start = end
            out_seg += 1
        return _concat(pieces)


class ComposedOrder(Order):
    """``base`` read through ``indices``: id at ``p`` is ``base[indices[p]]``.

    ``indices`` must yield positions in ``[0, len(base))`` (a child sampler's order is
    the ``base`` and the parent's order over it the ``indices``).
    """

    def __init__(self, indices: Order, base: Order):
        self.indices = indices
        self.base = base

    def __len__(self) -> int:
        return len(self.indices)

    def _take(self, positions: IdArray) -> IdArray:
        return self.base._take(self.indices._take(positions))

    def _take_range(self, start: int, stop: int) -> IdArray:
        return self.base._take(self.indices._take_range(start, stop))


class SliceOrder(Order):
    """Positions ``[start, stop)`` of ``base`` (clipped to its length)."""

    def __init__(self, base: Order, start: int, stop: int):
        n = len(base)
        self.base = base
        self.start = min(_check_count("start", start), n)
        self.stop = max(self.start, min(_check_count("stop", stop), n))

    def __len__(self) -> int:
        return self.stop - self.start

    def _take(self, positions: IdArray) -> IdArray:
        return self.base._take(positions + self.start)

    def _take_range(self, start: int, stop: int) -> IdArray:
        return self.base._take_range(self.start + start, self.start + stop)


class ShardView(Order):
    """Shard ``shard_id`` of ``num_shards`` of ``base``, split MindSpore's way.

    Position ``i`` of the shard is position ``(i * num_shards + shard_id) % len(base)``
    of ``base``: strided, every shard ``ceil(len(base) / num_shards)`` long, the short
    ones wrapping around to the start (10 rows, 3 shards: ``[0, 3, 6, 9]``,
    ``[1, 4, 7, 0]``, ``[2, 5, 8, 1]``).
    """

    def __init__(self, base: Order, num_shards: int, shard_id: int):
        self.base = base
        self.num_shards = _check_count("num_shards", num_shards, 1)
        self.shard_id = _check_count("shard_id", shard_id)
        if self.shard_id >= self.num_shards:
            raise ArgumentError(
                f"shard_id must be in [0, {self.num_shards - 1}], got {self.shard_id!r}"
            )
        self._n = len(base)

    def __len__(self) -> int:
        return -(-self._n // self.num_shards)

    def _take(self, positions: IdArray) -> IdArray:
        return self.base._take((positions * self.num_shards + self.shard_id) % self._n)

    def __repr__(self) -> str:
        return f"ShardView({self.base!r}, num_shards={self.num_shards}, shard_id={self.shard_id})"


class PartitionedOrder(Order):
    """``base`` cut into ``parts`` contiguous partitions, read round-robin.

    Partition ``j`` holds ``ceil((n - j) / parts)`` consecutive positions of ``base``;
    position ``q`` is item ``q // parts`` of partition ``q % parts``. Split strided into
    ``parts`` shards (:class:`ShardView`), shard ``s`` then reads partition ``s``: one
    contiguous run of ``base``, in its order. The same cut as the canonical partitions of
    the PyTorch adapter's stream plan (``torch/plan.py``).
    """

    def __init__(self, base: Order, parts: int):
        self.base = base
        self.parts = _check_count("parts", parts, 1)
        n = len(base)
        sizes = (n - np.arange(self.parts, dtype=np.int64) + self.parts - 1) // self.parts
        self._starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.base)

    def _take(self, positions: IdArray) -> IdArray:
        if self.parts == 1:
            return self.base._take(positions)
        inner = self._starts[positions % self.parts] + positions // self.parts
        return self.base._take(inner)

    def __repr__(self) -> str:
        return f"PartitionedOrder({self.base!r}, parts={self.parts})"


class PaddedOrder(Order):
    """``base`` followed by ``num_padded`` padded ids ``pad_start, pad_start + 1, ...``.

    ``pad_start`` is the dataset's row count N, so padded ids are ``>= N``.
    """

    def __init__(self, base: Order, num_padded: int, pad_start: int):
        self.base = base
        self.num_padded = _check_count("num_padded", num_padded)
        self.pad_start = _check_count("pad_start", pad_start)
        self._nb = len(base)

    def __len__(self) -> int:
        return self._nb + self.num_padded

    def _take(self, positions: IdArray) -> IdArray:
        padded = positions >= self._nb
        if not padded.any():
            return self.base._take(positions)
        out = positions - self._nb + self.pad_start
        real = ~padded
        if real.any():
            out[real] = self.base._take(positions[real])
        return out

    def _take_range(self, start: int, stop: int) -> IdArray:
        cut = min(max(start, self._nb), stop)
        real = self.base._take_range(start, cut) if cut > start else _EMPTY
        pad = np.arange(cut, stop, dtype=np.int64) - self._nb + self.pad_start
        return _concat([real, pad])


SCATTERED = 16
"""Ids are scattered (:func:`scattered_ids`) when at least one in this many comes before
the one ahead of it: a random order, one in two; file order, none; files in a random
order, one a file."""


SCATTER_SAMPLE = 4096
"""The first ids of an order (an epoch's, a read task's) that tell whether it is scattered
enough to sweep (:func:`scattered_ids`); told before a reader is asked for a window,
since asking measures the device."""


def scattered_ids(ids: IdArray) -> bool:
    """Whether ``ids`` (a stretch of an order) are spread over their files rather than
    mostly in file order: what tells a reader to read them in one pass over their
    chunks (``DatasetReader.sweep_rows``) instead of streaming them."""
    descents = int(np.count_nonzero(ids[1:] < ids[:-1]))
    return len(ids) > 1 and descents * SCATTERED >= len(ids)
