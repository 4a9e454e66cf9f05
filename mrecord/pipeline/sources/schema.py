"""``Schema``: column names and types for a pipeline source (MindSpore's ``dataset.Schema``).

Only what ``GeneratorDataset(source, schema=...)`` needs: each column's name, its dtype
(a numpy dtype, ``mrecord.int32``-style names or a string) and an optional shape::

    schema = mrecord.Schema()
    schema.add_column("image", de_type=mrecord.uint8, shape=[28, 28, 1])
    schema.add_column("label", de_type=mrecord.int32)
    ds = mrecord.GeneratorDataset(source, schema=schema)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.type_cast import parse_dtype

__all__ = ["Schema", "SchemaColumn"]


@dataclass(frozen=True)
class SchemaColumn:
    """One column: its name, dtype (None: as the source gives it) and shape (None: any)."""

    name: str
    dtype: np.dtype[Any] | None
    shape: tuple[int, ...] | None


class Schema:
    """Columns of a pipeline source, in order (see the module docstring)."""

    def __init__(self) -> None:
        self.columns: list[SchemaColumn] = []

    def add_column(
        self, name: str, de_type: Any = None, shape: Sequence[int] | None = None
    ) -> None:
        """Append a column ``name`` of dtype ``de_type`` and ``shape`` (both optional)."""
        if not isinstance(name, str) or not name:
            raise WrongTypeError(f"Schema.add_column: name must be a non-empty str, got {name!r}")
        if any(column.name == name for column in self.columns):
            raise ArgumentError(f"Schema.add_column: column {name!r} is already in the schema")
        dtype = None if de_type is None else parse_dtype(de_type, "de_type")
        dims = None if shape is None else tuple(int(d) for d in shape)
        self.columns.append(SchemaColumn(name, dtype, dims))

    def column_names(self) -> list[str]:
        """The names, in order."""
        return [column.name for column in self.columns]

    def column_types(self) -> list[np.dtype[Any]] | None:
        """The dtypes in order, or None when any column leaves its dtype open."""
        types = [column.dtype for column in self.columns]
        return None if any(t is None for t in types) else [t for t in types if t is not None]

    def __repr__(self) -> str:
        cols = ", ".join(
            f"{c.name}: {c.dtype.name if c.dtype is not None else 'any'}"
            + (f" {list(c.shape)}" if c.shape is not None else "")
            for c in self.columns
        )
        return f"Schema({cols})"
