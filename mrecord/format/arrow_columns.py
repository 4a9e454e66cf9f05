"""Arrow arrays ⇄ mrecord column values, a whole column at a time.

mrecord column values are what a ``mrecord.Block`` holds: one
``np.ndarray`` of shape ``(n, *shape)`` for fixed-shape numbers, a list of ``n``
arrays for variable-shape arrays, a list of ``bytes`` or ``str`` otherwise.

Nested lists are converted without a Python loop over elements: every list
level contributes one array of lengths, the leaf values are one numpy array, and
each row's shape comes from those lengths (rows must be rectangular: the inner
lists of one row all have the same length).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import ConversionError
from mrecord.format.arrow_types import (
    _is_bool8,
    _is_encoded_file,
    _is_list,
    arrow_type_for_field,
    import_pyarrow,
)
from mrecord.format.schema import NUMERIC_TYPES, Field, FieldKind, parse_schema

__all__ = ["ColumnValues", "column_from_arrow", "column_to_arrow", "field_for_values"]

ColumnValues = np.ndarray | list[Any]
"""A block column: one array of shape ``(n, ...)``, or a list of ``n`` values."""


def _check_nulls(column: str, arr: Any, where: str = "") -> None:
    if arr.null_count:
        first = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        place = f"row {first}" if not where else f"{where} (element {first})"
        raise ConversionError(
            f"column {column!r}: {place} is null; mrecord has no nulls: fill or drop them "
            "first (pyarrow.compute.fill_null / drop_null, or Dataset.filter)"
        )


def _leaf_numpy(column: str, arr: Any, dtype: np.dtype[Any], where: str = "") -> np.ndarray:
    pa = import_pyarrow()
    if isinstance(arr.type, pa.DictionaryType):
        arr = arr.dictionary_decode()
    _check_nulls(column, arr, where)
    values = arr.to_numpy(zero_copy_only=False)
    return np.asarray(values).astype(dtype, copy=False)


def column_from_arrow(column: str, arr: Any, field: Field) -> ColumnValues:
    """mrecord values of ``field`` from an Arrow array or chunked array."""
    pa = import_pyarrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    type_ = arr.type
    if isinstance(type_, pa.FixedShapeTensorType):
        _check_nulls(column, arr)
        return np.ascontiguousarray(arr.to_numpy_ndarray(), dtype=field.dtype)
    if isinstance(type_, pa.BaseExtensionType):  # HF's Array2D..5D, bool8, uuid...: storage
        _check_nulls(column, arr)
        arr = arr.storage
        if _is_bool8(type_):
            arr = arr.cast(pa.bool_()) if not pa.types.is_boolean(arr.type) else arr
    if isinstance(arr.type, pa.DictionaryType):
        _check_nulls(column, arr)
        arr = arr.dictionary_decode()
    if _is_encoded_file(arr.type):
        _check_nulls(column, arr)
        data = arr.field("bytes")
        if data.null_count:
            row = int(np.flatnonzero(data.is_null().to_numpy(zero_copy_only=False))[0])
            raise ConversionError(
                f"column {column!r}: row {row} has no embedded bytes, only the path "
                f"{arr.field('path')[row].as_py()!r}; mrecord reads no files a dataset names: "
                "embed them first (datasets.table.embed_table_storage)"
            )
        arr = data
    kind = field.kind
    if kind is FieldKind.STRING:
        _check_nulls(column, arr)
        return [str(v) for v in arr.to_pylist()]
    if kind is FieldKind.BYTES:
        _check_nulls(column, arr)
        return [bytes(v) for v in arr.to_pylist()]
    if not _is_list(arr.type):
        if field.shape:
            raise ConversionError(
                f"column {column!r} has Arrow type {arr.type}, not a list for shape "
                f"{list(field.shape)}"
            )
        return _leaf_numpy(column, arr, field.dtype)
    return _nested_from_arrow(column, arr, field)


def _nested_from_arrow(column: str, arr: Any, field: Field) -> ColumnValues:
    pa = import_pyarrow()
    import pyarrow.compute as pc

    n = len(arr)
    levels: list[np.ndarray] = []
    cur = arr
    while _is_list(cur.type):
        _check_nulls(column, cur, "" if not levels else "a nested list")
        if pa.types.is_fixed_size_list(cur.type):
            lengths = np.full(len(cur), cur.type.list_size, dtype=np.int64)
        else:
            lengths = pc.list_value_length(cur).to_numpy(zero_copy_only=False)
            lengths = lengths.astype(np.int64, copy=False)
        levels.append(lengths)
        cur = cur.flatten()
    spec = field.shape or ()
    if len(levels) != len(spec):
        raise ConversionError(
            f"column {column!r} has {len(levels)} list levels, shape {list(spec)} needs {len(spec)}"
        )
    leaf = _leaf_numpy(column, cur, field.dtype, "a list element")
    shapes = _row_shapes(column, n, levels, spec)
    if field.kind is FieldKind.FIXED:
        bad = np.flatnonzero(np.any(shapes != np.asarray(spec, dtype=np.int64), axis=1))
        if len(bad):
            row = int(bad[0])
            raise ConversionError(
                f"column {column!r}: row {row} has shape {tuple(shapes[row].tolist())}, the "
                f"schema says {tuple(spec)}"
            )
        return leaf.reshape((n, *spec))
    sizes = np.prod(shapes, axis=1, dtype=np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    return [
        leaf[s:e].reshape(shape)
        for s, e, shape in zip(starts.tolist(), ends.tolist(), shapes.tolist(), strict=True)
    ]


def _row_shapes(column: str, n: int, levels: list[np.ndarray], spec: tuple[int, ...]) -> np.ndarray:
    """Each row's shape (``n × ndim``) from the lengths at every list level."""
    shapes = np.zeros((n, len(levels)), dtype=np.int64)
    row_of = np.arange(n, dtype=np.int64)
    for k, lengths in enumerate(levels):
        if k == 0:
            shapes[:, 0] = lengths
        else:
            counts = np.bincount(row_of, minlength=n)
            nonempty = np.flatnonzero(counts)
            if len(nonempty):
                starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
                lo = np.minimum.reduceat(lengths, starts)
                hi = np.maximum.reduceat(lengths, starts)
                ragged = np.flatnonzero(lo != hi)
                if len(ragged):
                    row = int(nonempty[ragged[0]])
                    raise ConversionError(
                        f"column {column!r}: row {row} is ragged (inner lists of lengths "
                        f"{int(lo[ragged[0]])} and {int(hi[ragged[0]])}); mrecord stores "
                        "rectangular arrays: pad the lists or split the column"
                    )
                shapes[nonempty, k] = lo
            empty = counts == 0
            shapes[empty, k] = max(spec[k], 0)
        row_of = np.repeat(row_of, lengths)
    return shapes


def column_to_arrow(column: str, values: ColumnValues, field: Field | None = None) -> Any:
    """An Arrow array of ``values``; ``field`` gives the exact type (else it is inferred)."""
    pa = import_pyarrow()
    if field is None:
        field = field_for_values(column, values)
        if field is None:
            try:
                return pa.array(list(values))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise ConversionError(
                    f"column {column!r} holds values Arrow cannot represent: {exc}"
                ) from exc
    type_ = arrow_type_for_field(field)
    n = len(values)
    if field.kind is FieldKind.STRING:
        try:
            encoded = [str(v).encode() for v in values]
        except UnicodeEncodeError as exc:
            raise ConversionError(
                f"column {column!r} holds a string that is not valid Unicode ({exc}); "
                "store it as bytes"
            ) from exc
        return _joined_binary(encoded, type_)
    if field.kind is FieldKind.BYTES:
        return _joined_binary([_as_bytes(v) for v in values], type_)
    if field.kind is FieldKind.FIXED:
        data = np.ascontiguousarray(np.asarray(values, dtype=field.dtype))
        if data.shape != (n, *field.row_shape):
            raise ConversionError(
                f"column {column!r} has values of shape {data.shape[1:]}, the schema says "
                f"{field.row_shape}"
            )
        return _wrap_fixed(_flat_arrow(data.reshape(-1)), field.row_shape, type_)
    return _vararray_to_arrow(column, list(values), field, type_)


def _flat_arrow(data: np.ndarray) -> Any:
    """A flat Arrow array over a 1-D numpy array's buffer (bools packed into bits).

    Not ``pa.array(data)``: that imports pandas where it is installed (``datasets`` installs
    it), 389 modules and 31 MB of resident memory for an export that never uses it."""
    pa = import_pyarrow()
    if not data.dtype.isnative:
        data = data.astype(data.dtype.newbyteorder("="))
    data = np.ascontiguousarray(data)
    if data.dtype == np.bool_:
        bits = np.packbits(data, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])
    type_ = pa.from_numpy_dtype(data.dtype)
    return pa.Array.from_buffers(type_, len(data), [None, pa.py_buffer(data)])


_BINARY_OFFSET_MAX = int(np.iinfo(np.int32).max)
"""The most bytes one ``binary``/``string`` array holds (its offsets are int32)."""


def _joined_binary(items: list[bytes], type_: Any) -> Any:
    """A ``binary`` or ``string`` array of ``type_`` over ``items`` (bytes, already UTF-8
    for a string), as one joined buffer and its offsets that the array wraps.

    Not ``pa.array(items)``: its builder grows its buffer by doubling in Arrow's pool,
    which kept what it freed. Exporting 8 MB blocks of 100 KB values grew the process by
    ~90 MB (``tests/cli/test_cli_memory.py``), and ``mrecord cat --format arrow`` of
    2.4 GB of images in a 150 MB memory group crawled (151 s against 8 s). Past the
    offsets' range the builder is left to split or refuse as it does."""
    pa = import_pyarrow()
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    total = int(lengths.sum())
    if total > _BINARY_OFFSET_MAX:
        return pa.array(items, type_)
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:], dtype=np.int32)
    data = b"".join(items)
    return pa.Array.from_buffers(
        type_, len(items), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return value.tobytes()
    return bytes(value)


def _list_types(type_: Any, ndim: int) -> list[Any]:
    """The list types of the outer ``ndim`` levels of ``type_``, outermost first."""
    out = []
    for _ in range(ndim):
        out.append(type_)
        type_ = type_.value_type
    return out


def _wrap_fixed(flat: Any, dims: tuple[int, ...], type_: Any) -> Any:
    """Nested fixed-size lists of type ``type_`` over ``flat`` (a row has shape ``dims``)."""
    pa = import_pyarrow()
    out = flat
    for t in reversed(_list_types(type_, len(dims))):
        out = pa.FixedSizeListArray.from_arrays(out, type=t)
    return out


def _vararray_to_arrow(column: str, values: list[Any], field: Field, type_: Any) -> Any:
    pa = import_pyarrow()
    arrays = [np.asarray(v) for v in values]
    ndim = len(field.row_shape)
    for i, a in enumerate(arrays):
        if a.ndim != ndim:
            raise ConversionError(
                f"column {column!r}: row {i} has {a.ndim} dimensions, the schema says {ndim}"
            )
    flat = (
        np.concatenate([a.reshape(-1) for a in arrays]).astype(field.dtype, copy=False)
        if arrays
        else np.zeros(0, field.dtype)
    )
    shapes = np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(arrays), ndim)
    out = _flat_arrow(flat)
    # Build from the innermost level out: level k has one element per (row, index < dim 0..k-1).
    counts = np.ones(len(arrays), dtype=np.int64)
    per_level = []
    for k in range(ndim):
        per_level.append((np.repeat(shapes[:, k], counts), counts))
        counts = counts * shapes[:, k]
    types = _list_types(type_, ndim)
    for k in reversed(range(ndim)):
        lengths = per_level[k][0]
        if field.row_shape[k] == -1:
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            if offsets[-1] > np.iinfo(np.int32).max:
                raise ConversionError(
                    f"column {column!r}: {int(offsets[-1])} list elements in one block, more "
                    "than an Arrow list holds; export fewer rows at a time"
                )
            out = pa.ListArray.from_arrays(
                _flat_arrow(offsets.astype(np.int32)), out, type=types[k]
            )
        else:
            out = pa.FixedSizeListArray.from_arrays(out, type=types[k])
    return out


def field_for_values(column: str, values: ColumnValues) -> Field | None:
    """The mrecord field that fits a block column, or None when there is none to infer."""
    if isinstance(values, np.ndarray):
        name = values.dtype.name
        if name not in NUMERIC_TYPES:
            return None
        spec: dict[str, Any] = {"type": name}
        if values.ndim > 1:
            spec["shape"] = list(values.shape[1:])
        return parse_schema({column: spec}).fields[0]
    first = next(iter(values), None)
    if isinstance(first, str):
        return parse_schema({column: {"type": "string"}}).fields[0]
    if isinstance(first, (bytes, bytearray, memoryview)):
        return parse_schema({column: {"type": "bytes"}}).fields[0]
    if isinstance(first, np.ndarray) and first.ndim and first.dtype.name in NUMERIC_TYPES:
        # Axis 0 varies; an inner axis is fixed where every row agrees on it.
        shapes = {np.shape(v) for v in values}
        shape = [-1] + [
            sizes.pop() if len(sizes) == 1 and 0 not in sizes else -1
            for sizes in ({s[k] for s in shapes if len(s) > k} for k in range(1, first.ndim))
        ]
        spec = {"type": first.dtype.name, "shape": shape}
        return parse_schema({column: spec}).fields[0]
    return None
