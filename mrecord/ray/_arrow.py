"""mrecord values ⇄ Arrow tables, the way Ray Data holds blocks.

=====================  ==========================================  ========================
mrecord field          Arrow column (what a read task yields)      numpy batch in Ray
=====================  ==========================================  ========================
numeric scalar         the same primitive type (int32, float16...) ``(n,)`` of the dtype
fixed-shape array      Ray's fixed-shape tensor extension          ``(n, *shape)``
variable-shape array   Ray's variable-shaped tensor extension      object array of arrays
bytes                  ``binary``                                  object array of bytes
string                 ``string``                                  object array of str
=====================  ==========================================  ========================

Writing goes the other way: :func:`schema_from_arrow` infers an mrecord schema from an
Arrow schema (Ray's tensor extensions above; every other type as docs/ARROW.md maps it:
``fixed_size_list`` for fixed arrays, ``list`` for variable ones, ...), and
:func:`columns_from_block` turns any Ray block into columns for
:func:`mrecord.format.columnize.columns_from_columns`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from ray.data.block import BlockAccessor
from ray.data.extensions import (
    ArrowTensorArray,
    ArrowTensorType,
    ArrowTensorTypeV2,
    ArrowVariableShapedTensorArray,
    ArrowVariableShapedTensorType,
)

from mrecord.block import Block
from mrecord.format.arrow_types import field_spec_for_arrow
from mrecord.format.schema import FieldKind, StoredSchema

__all__ = ["block_to_table", "columns_from_block", "data_schema", "schema_from_arrow"]

_RAY_FILE_LISTING = frozenset({"__path", "__file_size", "__file_chunk_metadata"})
"""The columns of Ray's file listing (``ray.data._internal.datasource_v2``'s manifest)."""


def block_to_table(block: Block, schema: StoredSchema, names: Sequence[str]) -> pa.Table:
    """The columns ``names`` of ``block`` as an Arrow table (see the module docstring)."""
    arrays: list[Any] = []
    for name in names:
        field = schema[name]
        values = block.columns[name]
        kind = field.kind
        if kind is FieldKind.FIXED:
            if field.row_shape:
                arrays.append(ArrowTensorArray.from_numpy(np.asarray(values)))
            else:
                arrays.append(pa.array(values))
        elif kind is FieldKind.VARARRAY:
            arrays.append(ArrowVariableShapedTensorArray.from_numpy(list(values)))
        elif kind is FieldKind.BYTES:
            arrays.append(pa.array(values, type=pa.binary()))
        else:
            arrays.append(pa.array(values, type=pa.string()))
    return pa.Table.from_arrays(arrays, names=list(names))


def _field_spec(name: str, arrow_type: pa.DataType) -> dict[str, Any]:
    """Ray's tensor extensions here; every other type as ``mrecord.format.arrow_types`` maps it."""
    if isinstance(arrow_type, (ArrowTensorType, ArrowTensorTypeV2)):
        element = field_spec_for_arrow(name, arrow_type.value_type)["type"]
        return {"type": element, "shape": [int(d) for d in arrow_type.shape]}
    if isinstance(arrow_type, ArrowVariableShapedTensorType):
        element = field_spec_for_arrow(name, arrow_type.value_type)["type"]
        return {"type": element, "shape": [-1] * arrow_type.ndim}
    return field_spec_for_arrow(name, arrow_type)


def data_schema(schema: pa.Schema | None) -> pa.Schema | None:
    """``schema`` if it describes the data; ``None`` if it is Ray's file listing.

    When Ray fuses a file read (``read_parquet``, also followed by ``select_columns`` or
    ``map_batches``) with the write, the schema it passes to ``on_write_start`` is that of
    the read's input: the listing of files and row-group chunks, not the rows. Such a
    schema says nothing about the data, so the write infers it from the blocks instead.
    """
    if schema is None or not set(schema.names) >= _RAY_FILE_LISTING:
        return schema
    return None


def schema_from_arrow(schema: pa.Schema) -> dict[str, dict[str, Any]]:
    """An mrecord schema dict (MindSpore style) for the columns of an Arrow schema.

    Raises :class:`~mrecord.errors.ConversionError` naming a column whose type mrecord
    cannot store, and what to cast it to.
    """
    return {f.name: _field_spec(f.name, f.type) for f in schema}


def columns_from_block(block: Any, schema: StoredSchema) -> dict[str, Any]:
    """A Ray block (Arrow or pandas) as ``{column: values}`` for the writer's validation.

    FIXED fields come as numpy arrays when Ray gives a regular array, anything else as a
    list of values; the writer's validation then checks every value and names the row.
    """
    batch = BlockAccessor.for_block(block).to_batch_format("numpy")
    columns: dict[str, Any] = {}
    for name, values in batch.items():
        field = schema[name] if name in schema else None  # noqa: SIM401 (not a dict)
        if (
            field is not None
            and field.kind is FieldKind.FIXED
            and isinstance(values, np.ndarray)
            and values.dtype != object
        ):
            columns[name] = values
        else:
            columns[name] = list(values)
    return columns
