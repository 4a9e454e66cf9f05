"""Blocks ⇄ Arrow tables (``Block.to_arrow`` / ``Block.from_arrow``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mrecord.arrow._deps import import_pyarrow
from mrecord.arrow.columns import column_from_arrow, column_to_arrow
from mrecord.arrow.types import arrow_schema_for, schema_for_arrow
from mrecord.block import Block, ColumnValues
from mrecord.format.schema import Field, Schema, parse_schema

__all__ = ["block_from_arrow", "block_to_arrow", "empty_table"]


def _fields_for(block: Block, schema: Schema | None) -> list[Field | None]:
    if schema is None:
        return [None] * len(block.columns)
    by_name = {f.name: f for f in schema.fields}
    return [by_name.get(name) for name in block.columns]


def block_to_arrow(block: Block, schema: Schema | Sequence[Field] | None = None) -> Any:
    """A ``pyarrow.Table`` with the block's columns (types from ``schema`` where given)."""
    pa = import_pyarrow()
    if schema is not None and not isinstance(schema, Schema):
        schema = Schema(tuple(schema))
    arrays = [
        column_to_arrow(name, values, field)
        for (name, values), field in zip(
            block.columns.items(), _fields_for(block, schema), strict=True
        )
    ]
    return pa.Table.from_arrays(arrays, names=list(block.columns))


def empty_table(fields: Sequence[Field]) -> Any:
    """A table with no rows and the Arrow schema of ``fields``."""
    return arrow_schema_for(list(fields)).empty_table()


def block_from_arrow(table: Any) -> Block:
    """A block from a ``pyarrow.Table`` or ``RecordBatch`` (types mapped as docs/ARROW.md says)."""
    schema = parse_schema(schema_for_arrow(table.schema))
    columns: dict[str, ColumnValues] = {
        f.name: column_from_arrow(f.name, table.column(i), f)
        for i, f in enumerate(schema.fields)
    }
    return Block(columns)
