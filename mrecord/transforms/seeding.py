"""Per-row randomness for random transforms: seed -> uniforms, the same for one row or a batch.

Every random op draws its parameters from a per-row ``uint64`` seed, never from a
shared generator, so a row's output does not depend on which worker ran it or on
whether the op ran per row or offloaded over a batch. The draw is a counter-based
generator (splitmix64, Steele et al. 2014) written in numpy ``uint64`` arithmetic:

    state_0 = splitmix64(seed ^ salt)          salt: a 64-bit hash of the op's stream name
    state_i = state_0 + i * GOLDEN             i = 1 .. count
    u_i     = (splitmix64(state_i) >> 11) * 2**-53      in [0, 1), 53 random bits

``uniforms(seeds, count, salt)`` evaluates that for a whole vector of seeds at once;
a per-row call is the same function on a vector of length 1, so both paths agree
bit for bit.

Eager calls without a seed (``op(img)``) draw one from a module generator seeded
with :func:`mrecord.config.get_seed`; it is re-seeded when that seed has changed since the
last draw, or when :func:`reset_eager_seeds` is called (``config.set_seed`` of the same value
again cannot be seen from here: call ``reset_eager_seeds()`` to restart the sequence).
"""

from __future__ import annotations

import functools
import hashlib
import threading

import numpy as np

from mrecord import config
from mrecord.errors import ArgumentError, WrongTypeError

__all__ = [
    "as_seed_array",
    "derive_seed",
    "next_eager_seed",
    "normalize_seed",
    "reset_eager_seeds",
    "splitmix64",
    "stream_salt",
    "uniforms",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1
_TWO_POW_M53 = 2.0**-53


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer applied elementwise to a ``uint64`` array (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def stream_salt(name: str) -> int:
    """A stable 64-bit salt for a named random stream (e.g. an op's class name)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def normalize_seed(seed: object) -> int:
    """Check a per-row seed (a non-negative or negative int) and reduce it modulo 2**64."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise WrongTypeError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
    return int(seed) & _MASK64


def as_seed_array(seeds: object, n: int | None = None) -> np.ndarray:
    """Return ``seeds`` as a 1-D ``uint64`` array, checking its length against ``n``."""
    if isinstance(seeds, np.ndarray) and seeds.dtype == np.uint64:
        arr = seeds.reshape(-1)
    else:
        raw = np.asarray(seeds)
        if raw.dtype.kind not in "iu":
            raise WrongTypeError(f"seeds must be an array of integers, got dtype {raw.dtype}")
        arr = raw.astype(np.uint64).reshape(-1)  # negative ints wrap modulo 2**64
    if n is not None and arr.shape[0] != n:
        raise ArgumentError(f"seeds has {arr.shape[0]} entries for a batch of {n} rows")
    return arr


def _splitmix64_int(z: int) -> int:
    """:func:`splitmix64` on one Python int (bit-identical, without numpy's per-call cost)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


_SMALL_DRAW = 8  # at most this many uniforms in all: plain Python ints beat numpy's call cost


@functools.lru_cache(maxsize=64)
def _increments(count: int) -> np.ndarray:
    """``(i + 1) * GOLDEN mod 2**64`` for ``i < count`` (read-only, shared)."""
    incs = np.array([(0x9E3779B97F4A7C15 * (i + 1)) & _MASK64 for i in range(count)], np.uint64)
    incs.flags.writeable = False
    return incs


def uniforms(seeds: np.ndarray, count: int, salt: int = 0) -> np.ndarray:
    """``(len(seeds), count)`` float64 uniforms in [0, 1), a pure function of (seed, salt).

    All ``count`` draws of all seeds are evaluated at once (one ``(n, count)`` array); a tiny
    draw (a single row's few parameters) uses Python ints instead, with identical results.
    """
    arr = as_seed_array(seeds)
    salt64 = salt & _MASK64
    if arr.shape[0] * count <= _SMALL_DRAW:
        rows = []
        for seed in arr.tolist():
            start = _splitmix64_int(seed ^ salt64)
            rows.append(
                [
                    (_splitmix64_int((start + inc) & _MASK64) >> 11) * _TWO_POW_M53
                    for inc in _increments(count).tolist()
                ]
            )
        return np.array(rows, dtype=np.float64).reshape(arr.shape[0], count)
    base = splitmix64(arr ^ np.uint64(salt64))
    states = base[:, np.newaxis] + _increments(count)  # uint64 arrays wrap modulo 2**64
    out: np.ndarray = (splitmix64(states) >> np.uint64(11)).astype(np.float64)
    out *= _TWO_POW_M53
    return out


def derive_seed(seed: int, index: int) -> int:
    """A sub-seed for the ``index``-th random op under one row seed (used by ``Compose``)."""
    mixed = np.array([(normalize_seed(seed) + (index + 1) * 0xD1B54A32D192ED03) & _MASK64])
    return int(splitmix64(mixed)[0])


class _EagerSource:
    """The generator behind seedless eager calls, re-created when the config seed changes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.base: int | None = None
        self.rng = np.random.Generator(np.random.PCG64(0))

    def next(self) -> int:
        with self.lock:
            base = config.get_seed()
            if self.base != base:
                self.rng = np.random.Generator(np.random.PCG64(base))
                self.base = base
            return int(self.rng.integers(0, 2**64, dtype=np.uint64))

    def reset(self) -> None:
        with self.lock:
            self.base = None


_eager = _EagerSource()


def next_eager_seed() -> int:
    """A seed for a seedless eager call, from a generator seeded by ``config.get_seed()``."""
    return _eager.next()


def reset_eager_seeds() -> None:
    """Restart the seedless eager sequence from ``config.get_seed()`` (as after ``set_seed``)."""
    _eager.reset()


# config.reset() and config.set_seed() restart the seedless eager sequence (config cannot
# import this module: it is below transforms in the layering).
config.on_reset(reset_eager_seeds)
