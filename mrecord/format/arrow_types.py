"""Arrow types ⇄ mrecord field specs (the table in docs/ARROW.md); pure, pyarrow imported lazily.

Arrow → mrecord:

- ``int8/16/32/64``, ``uint8/16``, ``float16/32/64``, ``bool`` keep their type; ``uint32``
  widens to ``int64`` (lossless); ``uint64`` is refused (mrecord's widest integer is int64).
- ``string`` / ``large_string`` / ``string_view`` → ``string``; ``binary``, ``large_binary``,
  ``binary_view``, ``fixed_size_binary`` → ``bytes``.
- ``fixed_size_list<T>[n]`` → shape ``[n]``; nested fixed-size lists → ``[n, m, ...]``.
- ``list<T>`` / ``large_list<T>`` → a variable dimension ``-1``: ``list<fixed_size_list<T>[4]>``
  is ``[-1, 4]``, ``list<list<T>>`` is ``[-1, -1]`` (each row must be rectangular).
- Tensor extension types: ``arrow.fixed_shape_tensor`` → its shape; Hugging Face's
  ``Array2D``…``Array5D`` → their shape (a dynamic first dimension becomes ``-1``).
- ``dictionary<values=T>`` → the mapping of ``T`` (values are decoded).
- Hugging Face ``Image`` / ``Audio`` storage (``struct<bytes, path>``) → ``bytes``: the encoded
  file as stored (a row with only a path is refused: mrecord reads no files a dataset names).
- Anything else (timestamps, decimals, structs, maps, lists of strings, ...) raises
  :class:`~mrecord.errors.ConversionError` naming the column and saying what to cast it to.

mrecord → Arrow: numeric scalars → the same primitive type; fixed shapes → nested
``fixed_size_list``; a ``-1`` dimension → ``list``; ``bytes`` → ``binary``;
``string`` → ``string``.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from mrecord.errors import ConversionError, MissingDependencyError
from mrecord.format.schema import NUMERIC_TYPES, Field

__all__ = [
    "arrow_schema_for",
    "arrow_type_for_field",
    "field_spec_for_arrow",
    "import_pyarrow",
    "schema_for_arrow",
]

_FIELD_NAME = re.compile(r"^[0-9A-Za-z_]+$")


def import_pyarrow() -> ModuleType:
    """``pyarrow``, or an ImportError naming the extra to install."""
    try:
        import pyarrow
    except ImportError as exc:
        raise MissingDependencyError(
            "Arrow, Parquet and Hugging Face support needs pyarrow: "
            "pip install 'mrecord[arrow]'"
        ) from exc
    return pyarrow  # type: ignore[no-any-return]

_NUMERIC = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "int64",  # widened, lossless
    "halffloat": "float16",
    "float16": "float16",
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
    "bool": "bool",
}
_STRING = ("string", "large_string", "utf8", "large_utf8", "string_view")
_BINARY = ("binary", "large_binary", "binary_view")
_CASTS = "int8..int64, uint8, uint16, float16..float64, bool, string, binary or lists of numbers"


def _cannot(column: str, type_: Any, why: str = "") -> ConversionError:
    reason = f" ({why})" if why else ""
    return ConversionError(
        f"column {column!r} has Arrow type {type_}, which mrecord cannot store{reason}; "
        f"cast it to one of: {_CASTS} (see docs/ARROW.md)"
    )


def _is_hf_array(type_: Any) -> bool:
    """Hugging Face's ``Array2D``..``Array5D`` extension types (shape + value_type)."""
    pa = import_pyarrow()
    return (
        isinstance(type_, pa.ExtensionType)
        and isinstance(getattr(type_, "shape", None), tuple)
        and isinstance(getattr(type_, "value_type", None), str)
    )


def _is_bool8(type_: Any) -> bool:
    """Whether ``type_`` is Arrow's ``bool8`` extension (pyarrow 18 and later; older
    pyarrow, which the ``arrow`` extra allows from 14, has no such type)."""
    kind = getattr(import_pyarrow(), "Bool8Type", None)
    return kind is not None and isinstance(type_, kind)


def _is_encoded_file(type_: Any) -> bool:
    """Hugging Face's ``Image`` / ``Audio`` storage: ``struct<bytes: binary, path: string>``."""
    pa = import_pyarrow()
    if not pa.types.is_struct(type_) or type_.num_fields != 2:
        return False
    names = {type_.field(i).name: type_.field(i).type for i in range(type_.num_fields)}
    return set(names) == {"bytes", "path"} and (
        pa.types.is_binary(names["bytes"]) or pa.types.is_large_binary(names["bytes"])
    )


def _numeric(column: str, type_: Any, whole: Any = None) -> str:
    """The mrecord numeric type for ``type_`` (the element type of ``whole``, if given)."""
    pa = import_pyarrow()
    whole = type_ if whole is None else whole
    if isinstance(type_, pa.DictionaryType):
        return _numeric(column, type_.value_type, whole)
    name = str(type_)
    if name in _NUMERIC:
        return _NUMERIC[name]
    if name == "uint64":
        raise _cannot(
            column, whole, "mrecord's widest integer is int64: cast to int64 if the values fit"
        )
    if name in _STRING or name in _BINARY or name.startswith("fixed_size_binary"):
        raise _cannot(column, whole, "lists of strings or bytes have no fixed element size")
    raise _cannot(column, whole)


def field_spec_for_arrow(column: str, type_: Any) -> dict[str, Any]:
    """The mrecord field spec (``{"type": ..., "shape": [...]}``) for an Arrow type."""
    pa = import_pyarrow()
    types = pa.types
    if isinstance(type_, pa.FixedShapeTensorType):
        return {"type": _numeric(column, type_.value_type), "shape": list(type_.shape)}
    if _is_hf_array(type_):
        shape = [-1 if d is None else int(d) for d in type_.shape]
        return {"type": _numeric(column, pa.from_numpy_dtype(type_.value_type)), "shape": shape}
    if _is_bool8(type_):
        return {"type": "bool"}
    if isinstance(type_, pa.BaseExtensionType):  # Python-defined (HF) or C++ (arrow.uuid)
        return field_spec_for_arrow(column, type_.storage_type)
    if isinstance(type_, pa.DictionaryType):
        return field_spec_for_arrow(column, type_.value_type)
    if _is_encoded_file(type_):
        return {"type": "bytes"}
    name = str(type_)
    if name in _STRING:
        return {"type": "string"}
    if name in _BINARY or types.is_fixed_size_binary(type_):
        return {"type": "bytes"}
    dims: list[int] = []
    inner = type_
    while _is_list(inner):
        dims.append(inner.list_size if types.is_fixed_size_list(inner) else -1)
        inner = inner.value_type
    if not dims:
        return {"type": _numeric(column, type_)}
    if isinstance(inner, pa.BaseExtensionType):
        raise _cannot(column, type_, "extension types inside lists are not supported")
    if 0 in dims:
        raise _cannot(column, type_, "a fixed-size list of size 0")
    return {"type": _numeric(column, inner, type_), "shape": dims}


def _is_list(type_: Any) -> bool:
    types = import_pyarrow().types
    return bool(
        types.is_list(type_)
        or types.is_large_list(type_)
        or types.is_fixed_size_list(type_)
        or getattr(types, "is_list_view", lambda _t: False)(type_)
        or getattr(types, "is_large_list_view", lambda _t: False)(type_)
    )


def schema_for_arrow(schema: Any) -> dict[str, dict[str, Any]]:
    """An mrecord schema dict for an Arrow schema (field names must be valid mrecord names)."""
    out: dict[str, dict[str, Any]] = {}
    for f in schema:
        name = f.name
        if not _FIELD_NAME.match(name):
            raise ConversionError(
                f"Arrow column {name!r} is not a valid field name (letters, digits and _ "
                "only); rename it in the source"
            )
        if name in out:
            raise ConversionError(f"Arrow column {name!r} appears twice; rename one of them")
        out[name] = field_spec_for_arrow(name, f.type)
    if not out:
        raise ConversionError("the Arrow table has no columns")
    return out


def arrow_type_for_field(field: Field) -> Any:
    """The Arrow type an mrecord field is exported as (see the module docstring)."""
    pa = import_pyarrow()
    if field.type == "string":
        return pa.string()
    if field.type == "bytes":
        return pa.binary()
    if field.type not in NUMERIC_TYPES:  # pragma: no cover - parse_schema refuses these
        raise ConversionError(f"field {field.name!r} has unknown type {field.type!r}")
    type_ = pa.from_numpy_dtype(field.dtype)
    for dim in reversed(field.shape or ()):
        if dim == 0:
            raise ConversionError(
                f"field {field.name!r} has shape {list(field.shape or ())}: Arrow has no "
                "fixed-size list of size 0"
            )
        type_ = pa.list_(type_) if dim == -1 else pa.list_(type_, dim)
    return type_


def arrow_schema_for(fields: list[Field]) -> Any:
    """The Arrow schema for mrecord fields, in order."""
    pa = import_pyarrow()
    return pa.schema([pa.field(f.name, arrow_type_for_field(f)) for f in fields])
