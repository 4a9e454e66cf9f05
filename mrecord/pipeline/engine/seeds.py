"""Per-row seeds for random operations, reproducible with any number of workers.

A row's *key* is a pure function of (config seed, epoch, map node position, row
position in that map's input stream); an op's seed for the row mixes in the op's
index in the map's operation list. Both are computed for a whole block at once
with splitmix64 (a bijective 64-bit mixer), so distinct positions get distinct keys.
Offloaded ops get exactly the seeds they would have got inside the map.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["op_seeds", "row_keys"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64, copy=True) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))  # type: ignore[no-any-return]


def _scalar(value: int) -> np.ndarray:
    return np.array([value & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)


@functools.lru_cache(maxsize=256)
def _stream_base(seed: int, epoch: int, node_position: int) -> np.ndarray:
    """The key base of one map's input stream in one epoch (read-only, cached)."""
    base = _mix(_mix(_mix(_scalar(seed)) ^ _scalar(epoch)) ^ _scalar(node_position))
    base.flags.writeable = False
    return base


@functools.lru_cache(maxsize=64)
def _op_salt(op_index: int) -> np.ndarray:
    salt = _mix(_scalar(op_index + 1))
    salt.flags.writeable = False
    return salt


def row_keys(seed: int, epoch: int, node_position: int, positions: np.ndarray) -> np.ndarray:
    """uint64 key of each row ``positions`` (int64) of a map's input stream."""
    base = _stream_base(seed, epoch, node_position)
    return _mix(np.asarray(positions).astype(np.uint64) ^ base)


def op_seeds(keys: np.ndarray, op_index: int) -> np.ndarray:
    """uint64 seed per row for the op at ``op_index`` in a map's operation list."""
    return _mix(keys ^ _op_salt(op_index))
