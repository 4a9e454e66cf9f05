"""Blocks: the unit of data that flows from readers through the pipeline.

A :class:`Block` holds ``n`` rows column by column, so that work is done once
per block and column instead of once per row:

- a fixed-shape numeric column is one ``np.ndarray`` of shape ``(n, *shape)``;
- any other column (bytes, str, variable-shape arrays, Python objects produced by
  a user function) is a ``list`` of ``n`` values.

``row_ids`` carries the global row id each row came from (``-1`` where it has
none, e.g. a padded sample or a generated row), so errors can name the row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError

__all__ = ["Block", "BytesArray", "ColumnValues", "block_nbytes"]

ColumnValues = np.ndarray | list[Any]


class BytesArray(np.ndarray):  # type: ignore[type-arg]
    """A ``bytes`` value given as a read-only ``uint8`` array viewing the file (no copy).

    It is a plain numpy array to its users (MindSpore gives bytes columns as uint8
    arrays); the subclass only tells ``batch`` that rows of different lengths are
    separate byte strings, to be batched like ``bytes``, not a shape error.
    """


@dataclass
class Block:
    """``n`` rows stored column by column (see the module docstring)."""

    columns: dict[str, ColumnValues]
    row_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        n = self._infer_length()
        if len(self.row_ids) != n:
            if len(self.row_ids) == 0:
                self.row_ids = np.full(n, -1, dtype=np.int64)
            else:
                raise ArgumentError(f"row_ids has {len(self.row_ids)} entries for {n} rows")
        for name, values in self.columns.items():
            if len(values) != n:
                raise ArgumentError(f"column {name!r} has {len(values)} values, expected {n}")

    def _infer_length(self) -> int:
        for values in self.columns.values():
            return len(values)
        return len(self.row_ids)

    def __len__(self) -> int:
        return len(self.row_ids)

    @property
    def column_names(self) -> list[str]:
        """Column names in order."""
        return list(self.columns)

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as a dict of column name to value."""
        return {name: values[i] for name, values in self.columns.items()}

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Yield every row as a dict."""
        names = list(self.columns)
        cols = [self.columns[name] for name in names]
        for values in zip(*cols, strict=True):
            yield dict(zip(names, values, strict=True))

    def take(self, indices: np.ndarray | Sequence[int]) -> Block:
        """A new block with the rows at ``indices`` (in that order)."""
        idx = np.asarray(indices, dtype=np.int64)
        cols: dict[str, ColumnValues] = {}
        for name, values in self.columns.items():
            if isinstance(values, np.ndarray):
                cols[name] = values[idx]
            else:
                cols[name] = [values[i] for i in idx.tolist()]
        return Block(cols, self.row_ids[idx])

    def slice(self, start: int, stop: int) -> Block:
        """A new block with rows ``start:stop`` (arrays are views)."""
        cols = {name: values[start:stop] for name, values in self.columns.items()}
        return Block(cols, self.row_ids[start:stop])

    def to_arrow(self, schema: Any = None) -> Any:
        """The rows as a ``pyarrow.Table`` (needs ``pip install 'mrecord[arrow]'``).

        Fixed-shape arrays become nested ``fixed_size_list`` columns, variable-shape
        arrays ``list`` columns, bytes ``binary``, strings ``string`` (docs/ARROW.md).
        ``schema`` (a ``StoredSchema`` or a list of its fields) gives the exact
        types; without it they are inferred from the values.
        """
        from mrecord.format.arrow_columns import column_to_arrow
        from mrecord.format.arrow_types import import_pyarrow
        from mrecord.format.schema import Field

        pa = import_pyarrow()
        given = {f.name: f for f in (getattr(schema, "fields", schema) or ())}
        arrays = []
        for name, values in self.columns.items():
            field = given.get(name)
            if field is None and isinstance(values, list) and values:
                # bytes read as uint8 views (MindDataset) are still bytes, not arrays
                field = Field(name, "bytes") if isinstance(values[0], BytesArray) else None
            arrays.append(column_to_arrow(name, values, field))
        return pa.Table.from_arrays(arrays, names=list(self.columns))

    @staticmethod
    def from_arrow(table: Any) -> Block:
        """A block from a ``pyarrow.Table`` or ``RecordBatch`` (the inverse of :meth:`to_arrow`).

        Raises :class:`~mrecord.errors.ConversionError` naming the column for types
        mrecord cannot store, nulls, and ragged nested lists.
        """
        from mrecord.format.arrow_columns import column_from_arrow
        from mrecord.format.arrow_types import schema_for_arrow
        from mrecord.format.schema import parse_schema

        schema = parse_schema(schema_for_arrow(table.schema))
        columns: dict[str, ColumnValues] = {
            f.name: column_from_arrow(f.name, table.column(i), f)
            for i, f in enumerate(schema.fields)
        }
        return Block(columns)

    @staticmethod
    def concat(blocks: Iterable[Block]) -> Block:
        """Join blocks with the same columns, row after row."""
        parts = list(blocks)
        if not parts:
            return Block({})
        if len(parts) == 1:
            return parts[0]
        cols: dict[str, ColumnValues] = {}
        for name in parts[0].columns:
            pieces = [b.columns[name] for b in parts]
            if all(isinstance(p, np.ndarray) for p in pieces) and _same_tail(pieces):
                cols[name] = np.concatenate(pieces)  # type: ignore[arg-type]
            else:
                merged: list[Any] = []
                for p in pieces:
                    merged.extend(list(p))
                cols[name] = merged
        return Block(cols, np.concatenate([b.row_ids for b in parts]))


def _same_tail(pieces: Sequence[Any]) -> bool:
    first = pieces[0]
    return all(p.shape[1:] == first.shape[1:] and p.dtype == first.dtype for p in pieces)


_SAMPLED_VALUES = 8  # values of an object column weighed to estimate its bytes


def block_nbytes(block: Block) -> int:
    """About the bytes ``block``'s values hold: numeric arrays exactly; object arrays and
    lists (bytes, strings, variable-shape arrays) from a sample of their values, plus a
    pointer each. Values viewing a shared buffer (a page copy, a map) count each its own
    view's bytes: about the buffer's size."""
    return sum(_values_nbytes(values) for values in block.columns.values())


def _values_nbytes(values: Any) -> int:
    if isinstance(values, np.ndarray):
        if values.dtype != object:
            return int(values.nbytes)
        values = values.ravel()
    count = len(values)
    if not count:
        return 0
    step = max(1, count // _SAMPLED_VALUES)
    sample = [values[i] for i in range(0, count, step)][:_SAMPLED_VALUES]
    each = sum(map(_value_nbytes, sample)) / len(sample)
    return int(each * count) + 8 * count


def _value_nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    return 8  # a number, None, ...
