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
Arrow schema (the tensor extensions above, ``fixed_size_list`` for fixed arrays, ``list``
for variable ones), and :func:`columns_from_block` turns any Ray block into columns
for :func:`mrecord.format.columnize.columns_from_columns`.
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
from mrecord.errors import SchemaError
from mrecord.format.schema import NUMERIC_TYPES, FieldKind, Schema

__all__ = ["block_to_table", "columns_from_block", "schema_from_arrow"]

_TYPE_NAMES = {dtype: name for name, dtype in NUMERIC_TYPES.items()}
_FIXED_TENSORS: tuple[type, ...] = (ArrowTensorType, ArrowTensorTypeV2, pa.FixedShapeTensorType)


def block_to_table(block: Block, schema: Schema, names: Sequence[str]) -> pa.Table:
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


def _type_name(name: str, arrow_type: pa.DataType) -> str:
    try:
        dtype = np.dtype(arrow_type.to_pandas_dtype())
    except (NotImplementedError, TypeError):
        dtype = None
    type_name = None if dtype is None else _TYPE_NAMES.get(dtype.newbyteorder("<"))
    if type_name is None or not (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
    ):
        raise SchemaError(
            f"column {name!r} has Arrow type {arrow_type}, which mrecord cannot store "
            f"(numbers: {sorted(NUMERIC_TYPES)}, plus bytes and string); cast it in "
            "map_batches or pass schema= to MRecordDatasink"
        )
    return type_name


def _field_spec(name: str, arrow_type: pa.DataType) -> dict[str, Any]:
    if isinstance(arrow_type, _FIXED_TENSORS):
        tensor: Any = arrow_type
        shape = [int(d) for d in tensor.shape]
        return {"type": _type_name(name, tensor.value_type), "shape": shape}
    if isinstance(arrow_type, ArrowVariableShapedTensorType):
        return {"type": _type_name(name, arrow_type.value_type), "shape": [-1] * arrow_type.ndim}
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return {"type": "bytes"}
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return {"type": "string"}
    if pa.types.is_fixed_size_list(arrow_type) or pa.types.is_list(arrow_type):
        inner = _field_spec(name, arrow_type.value_type)
        if inner["type"] in ("bytes", "string"):
            raise SchemaError(f"column {name!r}: lists of {inner['type']} cannot be stored")
        dim = arrow_type.list_size if pa.types.is_fixed_size_list(arrow_type) else -1
        inner["shape"] = [dim, *inner.get("shape", [])]
        return inner
    return {"type": _type_name(name, arrow_type)}


def schema_from_arrow(schema: pa.Schema) -> dict[str, dict[str, Any]]:
    """An mrecord schema dict (MindSpore style) for the columns of an Arrow schema.

    Raises :class:`SchemaError` naming a column whose type mrecord cannot store.
    """
    return {f.name: _field_spec(f.name, f.type) for f in schema}


def columns_from_block(block: Any, schema: Schema) -> dict[str, Any]:
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
