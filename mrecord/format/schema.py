"""The schema: field names, types, shapes and per-field compression.

A schema is written MindSpore style, a dict of field name to spec::

    {"label": {"type": "int32"},
     "image": {"type": "uint8", "shape": [32, 32, 3]},
     "boxes": {"type": "float32", "shape": [-1, 4], "compression": "zstd"},
     "name": {"type": "string"}}

Types: MindSpore's six (int32, int64, float32, float64, string, bytes) plus
uint8, int8, int16, uint16, float16 and bool. Numeric fields may have a
``shape``; ``-1`` marks a variable dimension (any number of them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from mrecord.errors import SchemaError

__all__ = [
    "NUMERIC_TYPES",
    "Field",
    "FieldKind",
    "Schema",
    "StoredSchema",
    "parse_schema",
]

NUMERIC_TYPES: dict[str, np.dtype[Any]] = {
    "int8": np.dtype("<i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "uint8": np.dtype("<u1"),
    "uint16": np.dtype("<u2"),
    "float16": np.dtype("<f2"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "bool": np.dtype("?"),
}
BLOB_TYPES = ("string", "bytes")
COMPRESSIONS = ("none", "zstd")
_NAME_RE = re.compile(r"^[0-9A-Za-z_]+$")
_MAX_NDIM = 32


class FieldKind(Enum):
    """How a field's values are laid out in a column chunk."""

    FIXED = "fixed"  # numeric with a fully known shape (scalars included)
    VARARRAY = "vararray"  # numeric with at least one -1 dimension
    BYTES = "bytes"
    STRING = "string"


@dataclass(frozen=True)
class Field:
    """One field of a schema."""

    name: str
    type: str
    shape: tuple[int, ...] | None = None
    compression: str = "none"

    @property
    def kind(self) -> FieldKind:
        """The chunk layout used for this field."""
        if self.type == "bytes":
            return FieldKind.BYTES
        if self.type == "string":
            return FieldKind.STRING
        if self.shape is not None and -1 in self.shape:
            return FieldKind.VARARRAY
        return FieldKind.FIXED

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of a numeric field (little-endian)."""
        try:
            return NUMERIC_TYPES[self.type]
        except KeyError:
            raise SchemaError(f"field {self.name!r} of type {self.type!r} has no dtype") from None

    @property
    def is_scalar(self) -> bool:
        """True for numeric fields without a shape: one number per row."""
        return self.type in NUMERIC_TYPES and self.shape is None

    @property
    def row_shape(self) -> tuple[int, ...]:
        """Shape of one value of a FIXED field (``()`` for scalars)."""
        return () if self.shape is None else self.shape

    @property
    def row_nbytes(self) -> int:
        """Bytes per row of a FIXED field."""
        return int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    def to_dict(self) -> dict[str, Any]:
        """The MindSpore-style spec of this field (plus ``compression`` when set)."""
        out: dict[str, Any] = {"type": self.type}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.compression != "none":
            out["compression"] = self.compression
        return out


@dataclass(frozen=True)
class StoredSchema:
    """The fields stored in a dataset's files, in order (what ``FileWriter.add_schema`` takes,
    parsed). Not ``mrecord.Schema``, MindSpore's ``dataset.Schema`` of a pipeline source's
    columns (``mrecord/pipeline/sources/schema.py``)."""

    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        if not self.fields:
            raise SchemaError(
                "schema is empty: give at least one field, e.g. {'label': {'type': 'int32'}}"
            )

    @property
    def names(self) -> list[str]:
        """Field names in order."""
        return [f.name for f in self.fields]

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.fields)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The MindSpore-style schema dict."""
        return {f.name: f.to_dict() for f in self.fields}

    def with_compression(self, codec: str, fields: list[str] | None = None) -> StoredSchema:
        """A copy with ``codec`` set on ``fields`` (all fields when None)."""
        if codec not in COMPRESSIONS:
            raise SchemaError(f"unknown compression {codec!r}; choose one of {list(COMPRESSIONS)}")
        targets = set(self.names if fields is None else fields)
        unknown = targets - set(self.names)
        if unknown:
            raise SchemaError(f"cannot compress unknown field(s) {sorted(unknown)!r}")
        return StoredSchema(
            tuple(
                Field(f.name, f.type, f.shape, codec if f.name in targets else f.compression)
                for f in self.fields
            )
        )


def parse_schema(schema: object) -> StoredSchema:
    """Validate a MindSpore-style schema dict and return a :class:`StoredSchema`.

    Raises :class:`SchemaError` naming the field and the bad value.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError(
            f"schema must be a dict of field name to spec, got {type(schema).__name__}"
        )
    if not schema:
        raise SchemaError(
            "schema is empty: give at least one field, e.g. {'label': {'type': 'int32'}}"
        )
    return StoredSchema(tuple(_parse_field(name, spec) for name, spec in schema.items()))


def _parse_field(name: object, spec: object) -> Field:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise SchemaError(f"field name {name!r} is invalid: use letters, digits and '_' only")
    if not isinstance(spec, Mapping):
        raise SchemaError(
            f"field {name!r}: spec must be a dict like {{'type': 'int32'}}, got {spec!r}"
        )
    unknown_keys = set(spec) - {"type", "shape", "compression"}
    if unknown_keys:
        raise SchemaError(
            f"field {name!r}: unknown key(s) {sorted(unknown_keys)!r} in {dict(spec)!r}"
        )
    ftype = spec.get("type")
    if not isinstance(ftype, str) or (ftype not in NUMERIC_TYPES and ftype not in BLOB_TYPES):
        choices = sorted(NUMERIC_TYPES) + list(BLOB_TYPES)
        raise SchemaError(f"field {name!r}: unknown type {ftype!r}; choose one of {choices}")
    shape = _parse_shape(name, ftype, spec.get("shape"))
    compression = spec.get("compression", "none")
    if compression is None:
        compression = "none"
    if not isinstance(compression, str) or compression not in COMPRESSIONS:
        raise SchemaError(
            f"field {name!r}: unknown compression {compression!r}; choose one of "
            f"{list(COMPRESSIONS)}"
        )
    return Field(name, str(ftype), shape, str(compression))


def _parse_shape(name: str, ftype: str, shape: object) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if ftype in BLOB_TYPES:
        raise SchemaError(f"field {name!r}: type {ftype!r} cannot have a shape (got {shape!r})")
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
        raise SchemaError(f"field {name!r}: shape must be a list of ints, got {shape!r}")
    if not 1 <= len(shape) <= _MAX_NDIM:
        raise SchemaError(
            f"field {name!r}: shape must have 1 to {_MAX_NDIM} dimensions, got {shape!r}"
        )
    dims: list[int] = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise SchemaError(f"field {name!r}: shape dimension {dim!r} is not an int in {shape!r}")
        if dim == -1 or dim >= 0:
            dims.append(int(dim))
        else:
            raise SchemaError(
                f"field {name!r}: shape dimension {dim!r} in {shape!r} must be >= 0, "
                "or -1 for a variable dimension"
            )
    return tuple(dims)


Schema = StoredSchema
"""The name ``StoredSchema`` had before it was renamed apart from ``mrecord.Schema``; kept so
code written against ``mrecord.format.schema.Schema`` keeps working."""
