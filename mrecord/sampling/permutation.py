"""The keyed permutation: a bijection of ``[0, n)`` chosen by a 64-bit key, in O(1) memory.

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

:class:`~mrecord.sampling.order.PermutationOrder`, ``WindowedPermutation`` and
``SegmentOrder`` apply it a chunk of positions at a time.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import WrongTypeError

__all__ = [
    "ROUNDS",
    "SMALL_ROUNDS",
    "SMALL_SIDE",
    "ceil_sqrt",
    "derive_key",
    "feistel_side",
    "permute",
    "round_keys",
    "segment_round_keys",
]

_U64 = npt.NDArray[np.uint64]

ROUNDS = 4
"""Feistel rounds of the keyed permutation (3 already give a pseudorandom permutation)."""

SMALL_SIDE = 16
SMALL_ROUNDS = 8
"""Rounds for tiny domains (side < SMALL_SIDE, i.e. n <= 225), which 4 rounds shuffle unevenly."""

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)

# --------------------------------------------------------------------------- keys


def derive_key(*parts: int | str) -> int:
    """Return a well-mixed 64-bit key from ``parts`` (e.g. ``seed, epoch, "global"``).

    BLAKE2b of the parts' text, so ``(seed, epoch + 1)`` and ``(seed + 1, epoch)``
    give unrelated keys (a plain ``seed + epoch`` would collide).
    """
    h = hashlib.blake2b(digest_size=8, person=b"mrecord.order")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, (int, str)):
            raise WrongTypeError(f"key parts must be int or str, got {part!r}")
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


def segment_round_keys(keys: _U64, segments: npt.NDArray[Any]) -> _U64:
    """Round keys for each segment: shape ``(rounds, len(segments))``."""
    seg = np.asarray(segments, dtype=np.uint64).reshape(1, -1)
    with np.errstate(over="ignore"):
        return _mix64(keys.reshape(-1, 1) ^ (seg * _M1 + _M1))


# --------------------------------------------------------------------- permutation


def ceil_sqrt(n: npt.NDArray[np.int64]) -> _U64:
    """``ceil(sqrt(n))`` elementwise for ``1 <= n < 2**62`` (exact, not float-rounded)."""
    a = np.ceil(np.sqrt(n.astype(np.float64))).astype(np.int64)
    a = np.where(a * a < n, a + 1, a)
    a = np.where((a - 1) * (a - 1) >= n, a - 1, a)
    return np.maximum(a, 1).astype(np.uint64)


def feistel_side(n: int) -> np.uint64:
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


def permute(x: _U64, n: _Param, side: _Param, keys: _U64) -> _U64:
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
