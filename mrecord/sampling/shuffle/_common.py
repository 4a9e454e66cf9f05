"""Helpers shared by the shuffle algorithms: argument checks, defaults, file permutations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.sampling.order import IdArray
from mrecord.sampling.permutation import derive_key

__all__ = [
    "DEFAULT_ADAPTIVE_THRESHOLD",
    "DEFAULT_PARTIAL_WINDOW",
    "Counts",
    "check_counts",
    "check_option",
    "check_seed_epoch",
    "file_permutation",
]

Counts = Sequence[int] | npt.NDArray[np.integer[Any]]
"""Rows per file, in file order."""

DEFAULT_PARTIAL_WINDOW = 1_000_000
"""Rows per window of the PARTIAL shuffle (MindSpore: every 1 million samples)."""

DEFAULT_ADAPTIVE_THRESHOLD = 100_000_000
"""ADAPTIVE is GLOBAL up to this many rows, PARTIAL above (MindSpore: 100 million)."""


def check_counts(file_row_counts: Counts) -> IdArray:
    """Validate per-file row counts; return them as an int64 array."""
    if isinstance(file_row_counts, (str, bytes)):
        raise WrongTypeError(f"file_row_counts must be a sequence of ints, got {file_row_counts!r}")
    values = list(file_row_counts)
    for i, count in enumerate(values):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise WrongTypeError(
                f"file_row_counts[{i}] must be an int, got {count!r} ({type(count).__name__})"
            )
        if count < 0:
            raise ArgumentError(f"file_row_counts[{i}] must be >= 0, got {count!r}")
    return np.array(values, dtype=np.int64).reshape(-1)


def check_seed_epoch(seed: object, epoch: object) -> tuple[int, int]:
    """Validate ``seed`` (int >= 0) and ``epoch`` (int >= 0)."""
    for name, value in (("seed", seed), ("epoch", epoch)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise WrongTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
        if value < 0:
            raise ArgumentError(f"{name} must be >= 0, got {value!r}")
    return int(seed), int(epoch)  # type: ignore[call-overload]


def check_option(name: str, value: object) -> int:
    """Validate a positive row-count option such as ``partial_window``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise WrongTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ArgumentError(f"{name} must be >= 1 rows, got {value!r}")
    return int(value)


def file_permutation(num_files: int, seed: int, epoch: int, purpose: str) -> IdArray:
    """A permutation of the file indices, a pure function of ``(seed, epoch, purpose)``."""
    rng = np.random.default_rng(derive_key(seed, epoch, purpose))
    perm: IdArray = rng.permutation(num_files).astype(np.int64)
    return perm
