"""Argument checks more than one op or source makes (``num_parallel_workers``, row counts).

They sit here, below the ops and sources, so that no op imports another op's module for
them. (Issue 25 §3 moves checks like these to one ground-floor module for all of mrecord.)
"""

from __future__ import annotations

__all__ = ["check_count", "check_workers"]


def check_workers(value: int | None) -> int | None:
    """Validate a ``num_parallel_workers`` argument (None: the config default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"num_parallel_workers must be an int, got {value!r}")
    if not 1 <= value <= 1024:
        raise ValueError(f"num_parallel_workers must be in [1, 1024], got {value!r}")
    return value


def check_count(count: int, argument: str, allow_all: bool) -> int:
    """Validate a row count argument (-1 allowed when ``allow_all``)."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"{argument} must be an int, got {count!r}")
    low = -1 if allow_all else 0
    if count < low or (allow_all and count == 0) or count > 2**31 - 1:
        allowed = "-1 (all) or in [1, 2147483647]" if allow_all else "in [0, 2147483647]"
        raise ValueError(f"{argument} must be {allowed}, got {count!r}")
    return count
