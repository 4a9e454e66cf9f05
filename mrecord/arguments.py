"""Argument checks shared by every layer, with MindSpore's messages.

The ground floor: imports nothing of mrecord but :mod:`mrecord.errors`, so ``config``,
``sampling``, ``transforms``, ``pipeline``, ``train`` ... all check ints, counts and worker
numbers here, and a user sees one wording for one mistake::

    Argument num_shards with value '2' is not of type [<class 'int'>], but got <class 'str'>.
    Input num_parallel_workers is not within the required interval of [1, 1024].

A wrong type is a :class:`~mrecord.errors.WrongTypeError` (a ``TypeError``, as MindSpore's),
a value out of range an :class:`~mrecord.errors.ArgumentError` (a ``ValueError``). Three
wordings, each for one kind of argument:

- MindSpore's (:func:`type_check`, :func:`check_int`, :func:`check_value`) for arguments
  MindSpore has: the sentences above;
- ``"{name} must be an int, got 2.0 (float)"`` (:func:`require_int`) for integers of
  mrecord's own arithmetic (orders, sharding, slicing);
- ``"{name} must be an int >= 1, got 0"`` (:func:`check_int_at_least`), one
  ``ArgumentError`` for a wrong type or a value too small (training and sink arguments).

**The worker rule.** ``num_parallel_workers`` (of every op, every source, ``RemoteDataset``
and ``config.set_num_parallel_workers``) is an ``int`` in ``[1, MAX_WORKERS]`` = ``[1, 1024]``,
whatever the machine. MindSpore caps it at the CPU count, so a script written on a big
machine fails on a laptop; mrecord's workers are threads that mostly wait on I/O, where more
workers than cores is useful, and the fixed bound only catches mistakes (a row count passed
as a worker count). ``None`` means the process default, read at construction (see
:func:`mrecord.config.workers_or_default`).
"""

from __future__ import annotations

import numbers
from typing import cast

from mrecord.errors import ArgumentError, WrongTypeError

__all__ = [
    "INT32_MAX",
    "MAX_WORKERS",
    "check_count",
    "check_int",
    "check_int_at_least",
    "check_value",
    "check_workers",
    "is_int",
    "require_int",
    "type_check",
    "type_error",
]

INT32_MAX = 2_147_483_647
MAX_WORKERS = 1024


def is_int(value: object) -> bool:
    """True for an ``int`` or a numpy integer, never for a ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def type_error(name: str, value: object, expected: str = "int") -> WrongTypeError:
    """MindSpore's error for an argument of the wrong type (``expected`` as it prints it)."""
    return WrongTypeError(
        f"Argument {name} with value {value!r} is not of type [{expected}], but got {type(value)}."
    )


def require_int(value: object, name: str, minimum: int | None = None) -> int:
    """An integer (``int`` or numpy integer, not a bool) as an ``int``; else
    ``WrongTypeError("{name} must be an int, got 2.0 (float)")``, mrecord's short wording
    for arguments MindSpore does not have (orders, sharding arithmetic, slicing). With
    ``minimum``, a smaller value is an ``ArgumentError("{name} must be >= 1, got 0")``."""
    if not is_int(value):
        raise WrongTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    number = int(cast(int, value))  # is_int proved it an integer
    if minimum is not None and number < minimum:
        raise ArgumentError(f"{name} must be >= {minimum}, got {value!r}")
    return number


def type_check(value: object, types: tuple[type, ...], name: str) -> None:
    """Raise MindSpore's ``TypeError`` unless ``value`` is one of ``types`` (a bool never
    counts as a number unless ``bool`` is listed)."""
    is_bool = isinstance(value, bool) and bool not in types
    if is_bool or not isinstance(value, types):
        listed = ", ".join(str(t) for t in types)
        raise type_error(name, value, listed)


def check_value(
    value: float, low: float, high: float, name: str, *, left_open: bool = False
) -> None:
    """Raise ``ArgumentError`` unless ``low <= value <= high`` (``low < value`` if left_open)."""
    too_low = value <= low if left_open else value < low
    if too_low or value > high:
        bracket = "(" if left_open else "["
        raise ArgumentError(
            f"Input {name} is not within the required interval of {bracket}{low}, {high}]."
        )


def check_int(value: object, name: str, low: int = 0, high: int | None = INT32_MAX) -> int:
    """An ``int`` argument (not a bool, not a numpy integer) in ``[low, high]``, returned.

    ``high=None``: no upper bound; the message then says ``must be >= low`` and the value.
    """
    type_check(value, (int,), name)
    number = int(cast(int, value))  # type_check proved it an int
    if high is None:
        if number < low:
            raise ArgumentError(f"Input {name} must be >= {low}, got {number!r}.")
        return number
    check_value(number, low, high, name)
    return number


def check_int_at_least(value: object, name: str, minimum: int, *, where: str = "") -> int:
    """An ``int`` (not a bool) ``>= minimum``, returned; one :class:`ArgumentError` for a
    wrong type or a value too small: ``{where}{name} must be an int >= {minimum}, got ...``
    (``where``: MindSpore's "For 'Model.train', " prefix where it has one)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ArgumentError(f"{where}{name} must be an int >= {minimum}, got {value!r}")
    return value


def check_workers(value: object) -> int | None:
    """A ``num_parallel_workers`` argument: ``None`` (the default) or an int in
    ``[1, MAX_WORKERS]`` (the worker rule in the module docstring)."""
    if value is None:
        return None
    return check_int(value, "num_parallel_workers", 1, MAX_WORKERS)


def check_count(count: object, argument: str, allow_all: bool) -> int:
    """A row count argument (``take``, ``skip``): an int in ``[0, INT32_MAX]``, or with
    ``allow_all`` -1 (all rows) or ``[1, INT32_MAX]``."""
    type_check(count, (int,), argument)
    number = int(cast(int, count))  # type_check proved it an int
    low = -1 if allow_all else 0
    if number < low or (allow_all and number == 0) or number > INT32_MAX:
        allowed = f"-1 (all) or in [1, {INT32_MAX}]" if allow_all else f"in [0, {INT32_MAX}]"
        raise ArgumentError(f"{argument} must be {allowed}, got {number!r}")
    return number
