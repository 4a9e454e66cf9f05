"""Argument checks shared by the transform ops, worded like MindSpore's validators.

MindSpore raises ``TypeError("Argument prob with value '1' is not of type [<class 'float'>,
<class 'int'>], but got <class 'str'>.")`` and ``ValueError("Input prob is not within the
required interval of [0.0, 1.0].")``; these helpers produce the same sentences, with the
offending value shown with ``repr``. Range errors are :class:`mrecord.errors.ArgumentError`
(a ``ValueError``). The int, interval and type checks are :mod:`mrecord.arguments`'
(re-exported here); the float, size and pair checks are the transforms' own.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import cast

from mrecord.arguments import INT32_MAX, check_int, check_value, type_check
from mrecord.errors import ArgumentError, WrongTypeError

__all__ = [
    "FLOAT_MAX",
    "INT32_MAX",
    "check_factor_range",
    "check_float",
    "check_int",
    "check_minmax_pair",
    "check_size",
    "check_value",
    "type_check",
]

FLOAT_MAX = 16_777_216.0


def check_float(
    value: object, name: str, low: float, high: float, *, left_open: bool = False
) -> float:
    """Check a real-number argument (int or float) in range and return it as float."""
    type_check(value, (float, int), name)
    number = float(cast(float, value))
    check_value(number, low, high, name, left_open=left_open)
    return number


def check_size(value: object, name: str = "size") -> tuple[int, int] | int:
    """A size: a positive int, or a sequence ``(height, width)`` of positive ints."""
    type_check(value, (int, list, tuple), name)
    if isinstance(value, int):
        return check_int(value, name, 1)
    seq = cast(Sequence[object], value)
    if len(seq) != 2:
        raise WrongTypeError(
            f"{name} should be a single integer or a list/tuple (h, w) of length 2, got {value!r}."
        )
    h = check_int(seq[0], f"{name}[0]", 1)
    w = check_int(seq[1], f"{name}[1]", 1)
    return (h, w)


def check_minmax_pair(
    value: object, name: str, low: float, high: float, *, left_open: bool = False
) -> tuple[float, float]:
    """A ``(min, max)`` pair of reals, each in range, with ``min <= max``."""
    type_check(value, (tuple, list), name)
    seq = cast(Sequence[object], value)
    if len(seq) != 2:
        raise WrongTypeError(f"{name} should be a list/tuple of length 2, got {value!r}.")
    lo = check_float(seq[0], f"{name}[0]", low, high, left_open=left_open)
    hi = check_float(seq[1], f"{name}[1]", low, high, left_open=left_open)
    if lo > hi:
        raise ArgumentError(f"{name} should be in (min,max) format. Got (max,min).")
    return (lo, hi)


def check_factor_range(
    value: object, name: str, *, center: float, bound: float
) -> tuple[float, float]:
    """A colour factor: a number v gives ``[max(0, center - v), center + v]``; a pair is a range.

    ``bound`` is the largest allowed value (MindSpore: 16777216 for brightness, contrast and
    saturation; 0.5 for hue, whose centre is 0 and whose range may go negative).
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = check_float(value, name, 0.0, bound)
        low = center - v
        if center > 0:
            low = max(0.0, low)
        return (low, center + v)
    low_bound = -bound if center == 0 else 0.0
    return check_minmax_pair(value, name, low_bound, bound)
