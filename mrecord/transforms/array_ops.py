"""Array ops on one column: Concatenate, PadEnd, Slice, Mask (with Relational), Unique."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation, to_array
from mrecord.transforms.type_cast import parse_dtype

__all__ = ["Concatenate", "Mask", "PadEnd", "Relational", "Slice", "Unique", "pad_to"]


class Concatenate(TensorOperation):
    """``prepend``, the input, then ``append``, joined along ``axis`` (1-D inputs, as
    MindSpore). Example: ``Concatenate(0, np.array([9]), np.array([7]))([1, 2])`` is
    ``[9, 1, 2, 7]``."""

    def __init__(
        self, axis: int = 0, prepend: np.ndarray | None = None, append: np.ndarray | None = None
    ) -> None:
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise WrongTypeError(
                f"Argument axis with value {axis!r} is not of type [<class 'int'>]"
            )
        self.axis = axis
        self.prepend = None if prepend is None else np.asarray(prepend)
        self.append = None if append is None else np.asarray(append)

    def _params(self) -> dict[str, object]:
        return {"axis": self.axis, "prepend": self.prepend, "append": self.append}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        arr = to_array(arrays[0], "Concatenate")
        parts = [p for p in (self.prepend, arr, self.append) if p is not None]
        if any(p.ndim != 1 for p in parts):
            raise ArgumentError(
                "Concatenate: only 1-D arrays can be concatenated (MindSpore's rule), got shapes "
                f"{[list(p.shape) for p in parts]!r}"
            )
        try:
            out: np.ndarray = np.concatenate(parts, axis=self.axis)
        except (ValueError, TypeError) as exc:
            raise ArgumentError(f"Concatenate: cannot join {parts!r}: {exc}") from exc
        return out.astype(arr.dtype) if arr.dtype.kind not in "US" else out


class PadEnd(TensorOperation):
    """Pad (or cut) the input at the end of each axis to ``pad_shape`` with ``pad_value``
    (default 0, or ``""`` for strings); a ``None`` in ``pad_shape`` keeps that axis."""

    def __init__(self, pad_shape: Sequence[int | None], pad_value: Any = None) -> None:
        if not isinstance(pad_shape, (list, tuple)):
            raise WrongTypeError(f"pad_shape must be a list, got {pad_shape!r}")
        self.pad_shape = list(pad_shape)
        self.pad_value = pad_value

    def _params(self) -> dict[str, object]:
        return {"pad_shape": self.pad_shape, "pad_value": self.pad_value}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        arr = to_array(arrays[0], "PadEnd")
        if len(self.pad_shape) != arr.ndim:
            raise ArgumentError(
                f"PadEnd: pad_shape {self.pad_shape!r} has {len(self.pad_shape)} axes, the "
                f"input {arr.ndim} (shape {list(arr.shape)})"
            )
        shape = [n if s is None else int(s) for s, n in zip(self.pad_shape, arr.shape, strict=True)]
        return pad_to(arr, shape, self.pad_value)


class Slice(TensorOperation):
    """Index the input with ``*slices``, one per axis: an int (kept as an axis of
    length 1), a list of indices, a ``slice``, ``None`` or ``...`` (the whole axis)."""

    def __init__(self, *slices: Any) -> None:
        self.slices = slices

    def _params(self) -> dict[str, object]:
        return {"slices": list(self.slices)}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        arr = to_array(arrays[0], "Slice")
        index: list[Any] = []
        for s in self.slices:
            if s is None or s is Ellipsis:
                index.append(slice(None))
            elif isinstance(s, (int, np.integer)) and not isinstance(s, bool):
                index.append([int(s)])
            elif isinstance(s, slice):
                index.append(s)
            elif isinstance(s, (list, tuple)):
                index.append([int(i) for i in s])
            else:
                raise WrongTypeError(f"Slice: unsupported slice {s!r}")
        out = arr
        for axis, item in enumerate(index):  # one axis at a time: lists act independently
            out = out[(slice(None),) * axis + (item,)]
        return out


class Relational(IntEnum):
    """The comparison of :class:`Mask` (MindSpore's values)."""

    EQ = 0
    NE = 1
    GT = 2
    GE = 3
    LT = 4
    LE = 5


_COMPARE = {
    Relational.EQ: np.equal,
    Relational.NE: np.not_equal,
    Relational.GT: np.greater,
    Relational.GE: np.greater_equal,
    Relational.LT: np.less,
    Relational.LE: np.less_equal,
}


class Mask(TensorOperation):
    """``input <operator> constant`` element-wise, as ``dtype`` (default bool)."""

    def __init__(self, operator: Relational, constant: Any, dtype: object = np.bool_) -> None:
        if not isinstance(operator, Relational):
            raise WrongTypeError(f"operator must be a Relational, got {operator!r}")
        if not isinstance(constant, (str, bytes, bool, int, float, np.generic)):
            raise WrongTypeError(f"constant must be a number or a string, got {constant!r}")
        self.operator = operator
        self.constant = constant
        self.dtype = parse_dtype(dtype, "dtype")

    def _params(self) -> dict[str, object]:
        return {"operator": self.operator, "constant": self.constant, "dtype": self.dtype.name}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        arr = to_array(arrays[0], "Mask")
        if (arr.dtype.kind in "US") != isinstance(self.constant, (str, bytes)):
            raise WrongTypeError(
                f"Mask: constant {self.constant!r} and the input's dtype {arr.dtype} differ in "
                "kind (both numbers or both strings)"
            )
        out: np.ndarray = _COMPARE[self.operator](arr, self.constant).astype(self.dtype)
        return out


class Unique(TensorOperation):
    """The distinct values of the (flattened) input in order of first appearance, each
    element's index into them, and their counts (three outputs; int32 indices and counts).

    MindSpore's eager call refuses a 1-D input; here any shape is flattened, as its
    pipeline does."""

    def _compute(self, *arrays: Any, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        arr = to_array(arrays[0], "Unique").reshape(-1)
        values, first, inverse, counts = np.unique(
            arr, return_index=True, return_inverse=True, return_counts=True
        )
        order = np.argsort(first, kind="stable")  # first-appearance order, as MindSpore
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return (
            values[order],
            rank[inverse].astype(np.int32),
            counts[order].astype(np.int32),
        )


def pad_to(value: np.ndarray, shape: Sequence[int], fill: Any = None) -> np.ndarray:
    """``value`` padded at the end of each axis (or cut) to ``shape`` with ``fill``
    (default 0, ``""`` for strings)."""
    if value.ndim != len(shape):
        raise ArgumentError(f"cannot pad an array of shape {value.shape} to {list(shape)}")
    if fill is None:
        fill = "" if value.dtype.kind in "US" else 0
    cut = value[tuple(slice(0, n) for n in shape)]
    dtype = np.result_type(cut.dtype, np.asarray(fill).dtype) if cut.dtype.kind in "US" else None
    out = np.full(tuple(shape), fill, dtype=dtype or cut.dtype)
    out[tuple(slice(0, n) for n in cut.shape)] = cut
    return out
