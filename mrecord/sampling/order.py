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
- :class:`PaddedOrder` another order followed by padded ids.

The keyed permutation
---------------------
For a domain ``[0, n)`` let ``a = ceil(sqrt(n))``. A position ``x < a*a`` is split into
``(L, R) = divmod(x, a)`` and sent through ``ROUNDS`` balanced Feistel rounds
(``SMALL_ROUNDS`` when ``n <= 225``) over ``Z_a x Z_a``::

    (L, R) -> (R, (L + F_k(R)) mod a)        F_k(R) = hash64(R xor k) * a >> 32

which is a bijection of ``[0, a*a)`` for any round function. Values that land in
``[n, a*a)`` are sent through the network again ("cycle walking") until they land in
``[0, n)``; this restricts the bijection to ``[0, n)``. Since ``a*a - n < 2a``, a
walk is needed for a fraction ``< 2/sqrt(n)`` of positions. Round keys come from
BLAKE2b of ``(seed, epoch, purpose)`` (:func:`derive_key`), so neighbouring seeds and
epochs give unrelated permutations.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError

__all__ = [
    "ROUNDS",
    "ArrayOrder",
    "ComposedOrder",
    "IdArray",
    "Order",
    "PaddedOrder",
    "PermutationOrder",
    "RangeOrder",
    "SegmentOrder",
    "ShardView",
    "SliceOrder",
    "WindowedPermutation",
    "derive_key",
    "round_keys",
]

IdArray = npt.NDArray[np.int64]
"""A 1-D array of global row ids (or positions), dtype int64."""

_U64 = npt.NDArray[np.uint64]

ROUNDS = 4
"""Feistel rounds of the keyed permutation (3 already give a pseudorandom permutation)."""

SMALL_SIDE = 16
SMALL_ROUNDS = 8
"""Rounds for tiny domains (side < SMALL_SIDE, i.e. n <= 225), which 4 rounds shuffle unevenly."""

DEFAULT_CHUNK = 1 << 16
"""Default chunk size of :meth:`Order.iter_chunks`."""

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_MAX_DOMAIN = 1 << 62


# --------------------------------------------------------------------------- keys


def derive_key(*parts: int | str) -> int:
    """Return a well-mixed 64-bit key from ``parts`` (e.g. ``seed, epoch, "global"``).

    BLAKE2b of the parts' text, so ``(seed, epoch + 1)`` and ``(seed + 1, epoch)``
    give unrelated keys (a plain ``seed + epoch`` would collide).
    """
    h = hashlib.blake2b(digest_size=8, person=b"mrecord.order")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, (int, str)):
            raise TypeError(f"key parts must be int or str, got {part!r}")
        h.update(f"{type(part).__name__}:{part}\x00".encode())
    return int.from_bytes(h.digest(), "little")


def round_keys(key: int, rounds: int = SMALL_ROUNDS) -> _U64:
    """Expand one 64-bit ``key`` into ``rounds`` independent 64-bit round keys."""
    seed = (key & ((1 << 64) - 1)).to_bytes(8, "little")
    digest = b"".join(
        hashlib.blake2b(
            seed + block.to_bytes(4, "little"), digest_size=64, person=b"rounds"
        ).digest()
        for block in range(-(-rounds // 8))
    )
    return np.frombuffer(digest[: 8 * rounds], dtype="<u8").astype(np.uint64)


def _mix64(z: _U64) -> _U64:
    """SplitMix64's finalizer, elementwise (wrapping uint64 arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z *= _M2
    z ^= z >> np.uint64(27)
    z *= _M3
    z ^= z >> np.uint64(31)
    return z


def _segment_round_keys(keys: _U64, segments: npt.NDArray[Any]) -> _U64:
    """Round keys for each segment: shape ``(rounds, len(segments))``."""
    seg = np.asarray(segments, dtype=np.uint64).reshape(1, -1)
    with np.errstate(over="ignore"):
        return _mix64(keys.reshape(-1, 1) ^ (seg * _M1 + _M1))


# --------------------------------------------------------------------- permutation


def _ceil_sqrt(n: npt.NDArray[np.int64]) -> _U64:
    """``ceil(sqrt(n))`` elementwise for ``1 <= n < 2**62`` (exact, not float-rounded)."""
    a = np.ceil(np.sqrt(n.astype(np.float64))).astype(np.int64)
    a = np.where(a * a < n, a + 1, a)
    a = np.where((a - 1) * (a - 1) >= n, a - 1, a)
    return np.maximum(a, 1).astype(np.uint64)


def _side(n: int) -> np.uint64:
    """The Feistel side ``a = ceil(sqrt(n))`` for a scalar domain size ``n >= 1``."""
    root = math.isqrt(n)
    side: np.uint64 = np.uint64(max(1, root if root * root == n else root + 1))
    return side


_Param = np.uint64 | _U64


def _pick(value: _Param, index: npt.NDArray[np.intp]) -> _Param:
    """``value[..., index]`` for a per-element parameter, ``value`` itself otherwise."""
    if isinstance(value, np.ndarray) and value.ndim:
        picked: _U64 = value[index]
        return picked
    return value


def _network(x: _U64, side: _Param, keys: _U64) -> _U64:
    """One pass of the Feistel network on ``[0, side**2)`` (``keys``: one row per round)."""
    left = x // side
    right = x - left * side
    for k in keys:
        f = right ^ k
        f *= _M1
        f ^= f >> np.uint64(29)
        f *= _M2
        f >>= np.uint64(32)
        f *= side
        f >>= np.uint64(32)
        f += left  # < 2 * side; "mod side" below: f - side wraps around when f < side
        np.minimum(f, f - side, out=f)
        left, right = right, f
    left *= side
    left += right
    return left


def _walk(x: _U64, n: _Param, side: _Param, keys: _U64) -> _U64:
    """The network restricted to ``[0, n)`` by cycle walking (all ``x < n``)."""
    y = _network(x, side, keys)
    todo = np.flatnonzero(y >= n)
    while todo.size:
        sub_n, sub_side = _pick(n, todo), _pick(side, todo)
        sub_keys = keys[:, todo] if keys.ndim == 2 else keys
        walked = _network(y[todo], sub_side, sub_keys)
        y[todo] = walked
        todo = todo[walked >= sub_n]
    return y


def _permute(x: _U64, n: _Param, side: _Param, keys: _U64) -> _U64:
    """Apply the keyed bijection of ``[0, n)`` to ``x`` (all ``x < n``).

    ``keys`` has ``SMALL_ROUNDS`` rows (scalars, or one column per element). Domains
    with ``side < SMALL_SIDE`` (n <= 225) use all of them, larger ones the first
    ``ROUNDS``: tiny Feistel domains need more rounds to look uniformly shuffled.
    """
    with np.errstate(over="ignore"):
        if not (isinstance(side, np.ndarray) and side.ndim):
            rounds = SMALL_ROUNDS if side < SMALL_SIDE else ROUNDS
            return _walk(x, n, side, keys[:rounds])
        small = side < SMALL_SIDE
        if not small.any():
            return _walk(x, n, side, keys[:ROUNDS])
        if small.all():
            return _walk(x, n, side, keys[:SMALL_ROUNDS])
        out = np.empty_like(x)
        for mask, rounds in ((small, SMALL_ROUNDS), (~small, ROUNDS)):
            idx = np.flatnonzero(mask)
            sub_keys = keys[:rounds, idx] if keys.ndim == 2 else keys[:rounds]
            out[idx] = _walk(x[idx], _pick(n, idx), side[idx], sub_keys)
        return out


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
        raise TypeError(f"positions must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _check_count(name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum or value >= _MAX_DOMAIN:
        raise ArgumentError(f"{name} must be in [{minimum}, 2**62), got {value!r}")
    return int(value)


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
                raise IndexError(f"position {bad!r} is outside [0, {n}) of this {self!r}")
        flat = pos.reshape(-1)
        return self._take(flat).reshape(pos.shape)

    def _take_range(self, start: int, stop: int) -> IdArray:
        """Ids at positions ``start .. stop - 1`` (``0 <= start <= stop <= len``).

        Orders override this where a contiguous run is cheaper than arbitrary positions.
        """
        return self._take(np.arange(start, stop, dtype=np.int64))

    def iter_chunks(self, chunk_size: int = DEFAULT_CHUNK) -> Iterator[IdArray]:
        """Yield the ids in order, ``chunk_size`` at a time (the last chunk may be shorter)."""
        size = _check_count("chunk_size", chunk_size, 1)
        n = len(self)
        for start in range(0, n, size):
            yield self._take_range(start, min(n, start + size))

    def to_array(self) -> IdArray:
        """Materialize the whole order (for tests and small orders)."""
        return self._take_range(0, len(self))

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
        self._side = _side(self.n) if self.n else np.uint64(1)

    def __len__(self) -> int:
        return self.n

    def _take(self, positions: IdArray) -> IdArray:
        if self.n <= 1:
            same: IdArray = positions.copy()
            return same
        y = _permute(positions.astype(np.uint64), np.uint64(self.n), self._side, self._keys)
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
            table = _segment_round_keys(self._keys, np.arange(lo, hi + 1))
            keys = table[:, w - lo]
        else:
            uniq, inverse = np.unique(w, return_inverse=True)
            keys = _segment_round_keys(self._keys, uniq)[:, inverse.reshape(-1)]
        is_last = w == self._last
        n = np.where(is_last, np.uint64(self._last_size), np.uint64(self.window))
        side = np.where(is_last, _side(self._last_size), _side(self.window))
        y = _permute(offset, n, side, keys)
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
            keys = _segment_round_keys(self._keys, np.array([w]))[:, 0]
            y = _permute(offset, np.uint64(size), _side(size), keys)
            pieces.append(y.astype(np.int64) + base)
            start = end
        return _concat(pieces)


def _check_counts(counts: Sequence[int] | npt.NDArray[Any]) -> IdArray:
    arr = np.asarray(counts)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"file_row_counts must be a sequence of ints, got {counts!r}")
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
            self._seg_keys = _segment_round_keys(round_keys(key), np.arange(k))
            self._seg_n = self.counts.astype(np.uint64)
            self._seg_side = _ceil_sqrt(np.maximum(self.counts, 1))

    def __len__(self) -> int:
        return self._n

    def _take(self, positions: IdArray) -> IdArray:
        out_seg = np.searchsorted(self._out_ends, positions, side="right")
        offset = positions - self._out_starts[out_seg]
        seg = self.segment_order[out_seg]
        if self.key is not None and positions.size:
            offset = _permute(
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
                    offset = _permute(
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
