"""Pure decoding of MindRecord records (no file I/O).

Byte layouts, as written by MindSpore 2.10 (``version "3.0"``):

Record framing (raw and blob pages alike)::

    [length: 8, little-endian uint64] [payload: length bytes]

Raw payload: MessagePack map of the raw (scalar) fields.

Blob payload, one blob field::

    [field bytes]

Blob payload, several blob fields (in ``blob_fields`` order, i.e. by name)::

    ([length: 8, BIG-endian uint64] [field bytes: length]) * n_blob_fields

Field bytes of an int32 / int64 array (MindSpore's integer compression)::

    [count: 4, big-endian uint32]
    [width codes: ceil(count / 4) bytes; 2 bits per value, most significant bits first;
     0 = int8, 1 = int16, 2 = int32, 3 = int64]
    [values: each little-endian signed, at its own width]

Field bytes of a float32 / float64 array: the values, native little-endian.
A schema without blob fields still writes a 4-byte dummy blob per row (ignored).
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Sequence

import numpy as np

from mrecord.errors import CorruptFileError

__all__ = [
    "LENGTH_PREFIX",
    "decode_array",
    "decode_int_array",
    "split_blob",
    "split_records",
]

LENGTH_PREFIX = 8
"""Bytes of the little-endian length in front of every record."""

_INT_DTYPES = ("<i1", "<i2", "<i4", "<i8")


def split_records(
    buf: bytes | mmap.mmap, start: int, size: int, *, path: str, page_id: int
) -> list[tuple[int, int]]:
    """Return ``(start, end)`` of every record payload in ``buf[start:start + size]``.

    Offsets are positions in ``buf`` (the file); only the 8-byte lengths are read.
    """
    stop = start + size
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < stop:
        if pos + LENGTH_PREFIX > stop:
            raise CorruptFileError(
                f"{path!r}: page {page_id} ends inside a record length at byte {pos} "
                f"(page has {size} used bytes); the file is damaged",
                path=path,
                page=page_id,
                offset=pos,
            )
        length = int.from_bytes(buf[pos : pos + LENGTH_PREFIX], "little")
        begin = pos + LENGTH_PREFIX
        end = begin + length
        if end > stop:
            raise CorruptFileError(
                f"{path!r}: record at byte {pos} of page {page_id} claims {length} bytes "
                f"but only {stop - begin} remain in the page; the file is damaged or truncated",
                path=path,
                page=page_id,
                offset=pos,
            )
        spans.append((begin, end))
        pos = end
    return spans


def split_blob(
    payload: bytes, fields: Sequence[str], *, path: str, offset: int
) -> dict[str, bytes]:
    """Split one blob record payload into ``{field: bytes}`` (see the module docstring)."""
    if not fields:
        return {}
    if len(fields) == 1:
        return {fields[0]: payload}
    out: dict[str, bytes] = {}
    pos = 0
    size = len(payload)
    for name in fields:
        if pos + 8 > size:
            raise CorruptFileError(
                f"{path!r}: blob record at byte {offset} ends before field {name!r}; "
                "the file is damaged",
                path=path,
                offset=offset,
            )
        length = int.from_bytes(payload[pos : pos + 8], "big")
        pos += 8
        if pos + length > size:
            raise CorruptFileError(
                f"{path!r}: blob field {name!r} at byte {offset + pos} claims {length} bytes "
                f"but only {size - pos} remain in the record; the file is damaged",
                path=path,
                offset=offset,
            )
        out[name] = payload[pos : pos + length]
        pos += length
    if pos != size:
        raise CorruptFileError(
            f"{path!r}: blob record at byte {offset} has {size - pos} unexplained bytes "
            "after its last field; the file is damaged",
            path=path,
            offset=offset,
        )
    return out


def decode_int_array(data: bytes, dtype: str, *, path: str, field: str, offset: int) -> np.ndarray:
    """Decode MindSpore's compressed int32/int64 array encoding to a flat array of ``dtype``."""

    def bad(why: str) -> CorruptFileError:
        return CorruptFileError(
            f"{path!r}: field {field!r} at byte {offset}: {why}; the file is damaged",
            path=path,
            offset=offset,
        )

    if len(data) < 4:
        raise bad(f"integer array needs a 4-byte count, got {len(data)} bytes")
    count = int.from_bytes(data[:4], "big")
    n_code_bytes = math.ceil(count / 4)
    # Every value takes at least one byte: bound the count by the bytes present
    # before allocating anything proportional to it.
    if 4 + n_code_bytes + count > len(data):
        raise bad(f"integer array claims {count} values but has only {len(data)} bytes")
    codes_raw = np.frombuffer(data, dtype=np.uint8, count=n_code_bytes, offset=4)
    shifts = np.array([6, 4, 2, 0], dtype=np.uint8)
    codes = ((codes_raw[:, None] >> shifts) & 3).reshape(-1)[:count]
    widths = np.left_shift(1, codes.astype(np.int64))
    body_start = 4 + n_code_bytes
    ends = np.cumsum(widths)
    total = int(ends[-1]) if count else 0
    if body_start + total != len(data):
        raise bad(
            f"integer array of {count} values needs {body_start + total} bytes, "
            f"record has {len(data)}"
        )
    body = np.frombuffer(data, dtype=np.uint8, offset=body_start)
    starts = ends - widths
    out = np.empty(count, dtype=dtype)
    for code, width in enumerate((1, 2, 4, 8)):
        sel = np.flatnonzero(codes == code)
        if sel.size == 0:
            continue
        idx = starts[sel][:, None] + np.arange(width)
        values = body[idx].copy().view(_INT_DTYPES[code]).reshape(-1)
        if code == 3 and np.dtype(dtype).itemsize < 8:
            info = np.iinfo(dtype)
            if values.min() < info.min or values.max() > info.max:
                raise bad(f"a value does not fit the field's type {dtype}")
        out[sel] = values
    return out


def decode_array(
    data: bytes,
    type_name: str,
    shape: Sequence[int],
    *,
    path: str,
    field: str,
    offset: int,
) -> np.ndarray:
    """Decode one array field's bytes and give it the schema's ``shape``.

    One ``-1`` in ``shape`` is resolved from the element count; with several,
    the array is returned flat (MindRecord does not store their sizes).
    """
    if type_name in ("int32", "int64"):
        flat = decode_int_array(data, type_name, path=path, field=field, offset=offset)
    elif type_name in ("float32", "float64"):
        itemsize = 4 if type_name == "float32" else 8
        if len(data) % itemsize:
            raise CorruptFileError(
                f"{path!r}: field {field!r} at byte {offset} has {len(data)} bytes, "
                f"not a whole number of {type_name} values; the file is damaged",
                path=path,
                offset=offset,
            )
        flat = np.frombuffer(data, dtype="<f4" if itemsize == 4 else "<f8").astype(
            type_name, copy=True
        )
    else:
        raise CorruptFileError(
            f"{path!r}: field {field!r} has a shape but type {type_name!r}; "
            "MindRecord arrays are int32, int64, float32 or float64",
            path=path,
            offset=offset,
        )
    return _reshape(flat, shape, path=path, field=field, offset=offset)


def _reshape(
    flat: np.ndarray, shape: Sequence[int], *, path: str, field: str, offset: int
) -> np.ndarray:
    dims = list(shape)
    unknown = dims.count(-1)
    if unknown > 1:
        return flat
    known = math.prod(d for d in dims if d != -1)
    if unknown == 1:
        if (known == 0 and flat.size) or (known and flat.size % known):
            raise CorruptFileError(
                f"{path!r}: field {field!r} at byte {offset} has {flat.size} values, which "
                f"does not fit shape {dims}; the file is damaged",
                path=path,
                offset=offset,
            )
        dims[dims.index(-1)] = flat.size // known if known else 0
    elif flat.size != known:
        raise CorruptFileError(
            f"{path!r}: field {field!r} at byte {offset} has {flat.size} values, shape "
            f"{dims} needs {known}; the file is damaged",
            path=path,
            offset=offset,
        )
    return flat.reshape(dims)
