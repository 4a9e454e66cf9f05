"""Column helpers shared by the nodes: stacking values, naming rules, hidden columns.

Hidden columns (names starting with :data:`HIDDEN_PREFIX`) carry per-row seeds from
a map whose tail ops were offloaded to the offload step at the end of the
pipeline; every node passes them through and the iterator drops them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.block import Block, BytesArray, ColumnValues
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.transforms import buffers

__all__ = [
    "HIDDEN_PREFIX",
    "as_name_list",
    "batch_column",
    "column_from_values",
    "is_hidden",
    "map_column_order",
    "row_values",
    "split_block",
    "to_numpy",
]

HIDDEN_PREFIX = "\x00mrecord.seed."

_NUMBER_TYPES = (bool, int, float)


def is_hidden(name: str) -> bool:
    """Whether ``name`` is an internal column (never shown to users)."""
    return name.startswith(HIDDEN_PREFIX)


def as_name_list(value: str | Sequence[str] | None, argument: str) -> list[str] | None:
    """Normalize a column argument (``"a"`` or ``["a", "b"]``) to a list; validate names."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names:
        raise ArgumentError(f"{argument} must name at least one column, got {value!r}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise WrongTypeError(f"{argument} must hold non-empty column names (str), got {name!r}")
    if len(set(names)) != len(names):
        raise ArgumentError(f"{argument} has duplicate column names: {names!r}")
    return names


_ARRAY_TYPES = (np.ndarray, np.generic)


def column_from_values(values: list[Any]) -> ColumnValues:
    """One array of shape ``(n, *shape)`` when every value is an array or number of the
    same shape and dtype (or the same Python number type); the list itself otherwise."""
    if not values:
        return values
    first = values[0]
    if isinstance(first, _ARRAY_TYPES):
        shape, dtype = first.shape, first.dtype
        if dtype.kind != "O" and all(
            isinstance(v, _ARRAY_TYPES) and v.dtype == dtype and v.shape == shape for v in values
        ):
            return buffers.stack(values, dtype)
        return values
    kind = type(first)
    if kind in _NUMBER_TYPES and all(type(v) is kind for v in values):
        return np.array(values)
    return values


def batch_column(values: ColumnValues, column: str) -> np.ndarray:
    """Stack one batch of a column into an array of shape ``(batch, *shape)``.

    Raises :class:`PipelineError` naming the column when row shapes differ.
    """
    if isinstance(values, np.ndarray):
        return values
    if all(isinstance(v, str) for v in values):
        return np.array(values)
    if all(isinstance(v, (bytes, BytesArray)) for v in values):
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    arrays = [np.asarray(v) for v in values]
    first = arrays[0]
    for row, arr in enumerate(arrays):
        if arr.shape != first.shape:
            raise PipelineError(
                "Inconsistent batch shapes, batch operation expects same shape for each data "
                f"row, but got inconsistent shape in column {column!r}, expected shape for this "
                f"column is: {list(first.shape)}, got shape: {list(arr.shape)} (row {row} of the "
                "batch); make the rows the same shape with a map (e.g. Resize) before batch"
            )
    return np.stack(arrays)


def to_numpy(value: Any) -> Any:
    """A value as the iterators give it: numpy arrays (bytes as a uint8 array)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(value), dtype=np.uint8)
    return np.asarray(value)


def row_values(values: Any) -> list[Any]:
    """Every row's value of a block column as the iterators give it (see :func:`to_numpy`).

    A numeric column gives views: 0-d arrays ``values[i, ...]`` for a column of scalars,
    rows of the array otherwise (one list built at C speed, no per-row conversion).
    """
    if isinstance(values, np.ndarray) and values.dtype.kind not in "OUS":
        if values.ndim == 1:
            return [values[i, ...] for i in range(len(values))]
        return list(values)
    return [v if type(v) is np.ndarray else to_numpy(v) for v in values]


def map_column_order(
    current: Sequence[str], inputs: Sequence[str], outputs: Sequence[str]
) -> list[str]:
    """Column order after a map (MindSpore's rule).

    Same number of inputs and outputs: each output takes its input's place.
    Otherwise the outputs come first, then the untouched columns in their order.
    """
    if len(inputs) == len(outputs):
        rename = dict(zip(inputs, outputs, strict=True))
        return [rename.get(name, name) for name in current]
    rest = [name for name in current if name not in inputs]
    return [*outputs, *rest]


def split_block(block: Block, rows: int) -> list[Block]:
    """Cut a block into pieces of at most ``rows`` rows (views)."""
    n = len(block)
    if n <= rows:
        return [block]
    return [block.slice(start, min(start + rows, n)) for start in range(0, n, rows)]
