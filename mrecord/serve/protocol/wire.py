"""The binary block format of both transports (pure: bytes in, bytes out).

Request, one MessagePack map (the body of ``POST /api/datasets/{name}/blocks``; the
same fields in a same-host ``read`` message)::

    {"ids": <bytes: int64 little-endian global row ids>, "columns": [name, ...] | nil}

HTTP response body, a small MessagePack header followed by the raw column buffers::

    [header length: uint32 LE] [header: MessagePack map] [buffer 0] [buffer 1] ...

    header = {"rows": n, "columns": [{"name", "kind", "dtype", "shape", "sizes"}, ...]}

Each column contributes ``len(sizes)`` buffers, in column order:

- ``fixed``     (numbers of one shape): ``[values: n * prod(shape) * itemsize]``, C order;
- ``bytes``, ``string`` (UTF-8):        ``[offsets: (n + 1) int64] [data: offsets[-1]]``;
- ``vararray``  (numbers, shape per row): ``[offsets: (n + 1) int64, in bytes]
  [shapes: n * ndim int64] [data: offsets[-1]]``.

Same-host answers (:func:`encode_block_into`) put the same buffers into the reader's
segment, anywhere, and say where: the header is the reply's ``"block"`` map, with

- ``"offsets"`` in each column: where each of its ``sizes`` buffers starts in the
  segment (a buffer written by the server before the header, at its own place);
- ``"refs": True`` on a bytes column sent as places instead of values: its one buffer
  is ``[file numbers: n int64] [offsets: n int64] [lengths: n int64]`` (a (3, n) array),
  value ``i`` being bytes ``offset:offset + length`` of shared file ``file`` (a file of
  ``"files"``), or of the segment itself where ``file`` is -1 (a value stored
  compressed, copied in);
- ``"files"``: the shard files the references name (ask for their descriptors with a
  ``files`` message, :mod:`~mrecord.serve.protocol.local`).

``dtype`` is numpy's explicit-endian string (``"<f4"``, ``"|u1"``); ``shape`` is the
field's row shape (``-1`` for variable dimensions). Buffers are sent as they are in
memory (no per-value encoding), and decoded as numpy views of one receive buffer, so
the cost per row is a copy, not Python work. Why MessagePack rather than Arrow IPC:
docs/SERVE.md.
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from mrecord.block import BytesArray, ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError, FormatError
from mrecord.format.shape_groups import values_by_shape

_SHAPE = operator.attrgetter("shape")

__all__ = [
    "MAX_HEADER_BYTES",
    "BytesRefs",
    "NeedsRoom",
    "decode_block",
    "decode_block_at",
    "decode_request",
    "encode_block",
    "encode_block_into",
    "encode_request",
    "encode_request_fields",
    "request_fields",
]

MAX_HEADER_BYTES = 1 << 20
_LEN = struct.Struct("<I")
_NUMERIC_KINDS = "biuf"
_JOIN_INTO_BUFFER = 16 << 10
"""Mean bytes per value from which a bytes column is copied into one buffer from ``alloc``
(a reused one: fresh pages cost a fault and zeroing each) rather than ``b"".join``ed.
Joined, a column is one buffer that goes out in a few big writes; sent value by value,
each 100 KB image would be one write through the ASGI stack, whose Python overhead per
write (tens of microseconds) costs more than the copy."""


def _empty(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, dtype=np.uint8)


def encode_request(ids: np.ndarray, columns: Sequence[str] | None) -> bytes:
    """The request body asking for rows ``ids`` (and only ``columns`` when given)."""
    return bytes(msgpack.packb(encode_request_fields(ids, columns)))


def encode_request_fields(ids: np.ndarray, columns: Sequence[str] | None) -> dict[str, Any]:
    """The request map (before MessagePack): ``ids`` as int64 LE bytes, ``columns``."""
    data = np.ascontiguousarray(ids, dtype="<i8").tobytes()
    return {"ids": data, "columns": list(columns) if columns else None}


def decode_request(body: bytes, max_ids: int) -> tuple[np.ndarray, list[str] | None]:
    """Parse a request body; ArgumentError saying what is wrong with it."""
    try:
        req = msgpack.unpackb(body, raw=False, max_bin_len=len(body), max_array_len=4096)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ArgumentError(f"request body is not a MessagePack block request ({exc})") from exc
    return request_fields(req, max_ids)


def request_fields(req: Any, max_ids: int) -> tuple[np.ndarray, list[str] | None]:
    """The ids and columns of a decoded request map; ArgumentError saying what is wrong."""
    if not isinstance(req, dict) or not isinstance(req.get("ids"), bytes):
        raise ArgumentError('request body must be a map with "ids": int64 little-endian bytes')
    raw = req["ids"]
    if len(raw) % 8:
        raise ArgumentError(f'"ids" holds {len(raw)} bytes, not a multiple of 8 (int64)')
    if len(raw) // 8 > max_ids:
        raise ArgumentError(f"asked for {len(raw) // 8} rows; at most {max_ids} per request")
    columns = req.get("columns")
    if columns is not None and (
        not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)
    ):
        raise ArgumentError(f'"columns" must be a list of names or nil, got {columns!r}')
    return np.frombuffer(raw, dtype="<i8").astype(np.int64), columns


def encode_block(
    columns: dict[str, ColumnValues],
    kinds: dict[str, tuple[str, str, list[int]]],
    rows: int,
    alloc: Callable[[int], np.ndarray] = _empty,
    *,
    gather: bool = False,
) -> list[bytes | memoryview]:
    """The response body as a list of buffers (send them in order, as they are).

    ``kinds`` maps a column to (kind, dtype string, row shape) from the schema.
    ``alloc(n)`` gives the ``uint8`` buffer a column of big bytes values is copied into
    (a :class:`~mrecord.serve.buffers.BufferPool`'s ``take`` on the server). With
    ``gather`` such values are not copied: each is a buffer of the list, as it was given
    (for a transport that writes many buffers at once, ``serve/server/gather.py``).
    """
    header_cols = []
    buffers: list[bytes | memoryview] = []
    for name, values in columns.items():
        kind, dtype, shape = kinds[name]
        parts = _column_parts(values, kind, dtype, shape, alloc, _JOIN_INTO_BUFFER, gather)
        header_cols.append(
            {
                "name": name,
                "kind": kind,
                "dtype": dtype,
                "shape": shape,
                "sizes": [sum(memoryview(p).nbytes for p in pieces) for pieces in parts],
            }
        )
        for pieces in parts:
            buffers.extend(pieces)
    header = msgpack.packb({"rows": rows, "columns": header_cols})
    return [_LEN.pack(len(header)), header, *buffers]


class NeedsRoom(Exception):
    """The block does not fit the region it was to be written into: ``nbytes`` would."""

    def __init__(self, nbytes: int) -> None:
        super().__init__(f"the block needs {nbytes} bytes")
        self.nbytes = nbytes


@dataclass(frozen=True)
class BytesRefs:
    """A bytes column given by where its values lie (the same-host transport).

    Value ``i`` is bytes ``offsets[i]:offsets[i] + lengths[i]`` of shared file
    ``files[i]``, which the reader maps too, so the value is never copied; where
    ``files[i]`` is -1 the value is ``inline[i]`` and is copied into the region.
    """

    files: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    inline: Mapping[int, Any]


def encode_block_into(
    columns: Mapping[str, ColumnValues | BytesRefs],
    kinds: dict[str, tuple[str, str, list[int]]],
    rows: int,
    region: np.ndarray,
) -> dict[str, Any]:
    """Write a block's buffers into ``region`` (uint8) and return its header.

    The same buffers as :func:`encode_block`, each placed at an ``offsets`` entry of its
    column in the header (the same-host transport: the region is the client's shared
    memory, so the bytes are copied once, from the file's map into it). Big bytes values
    are copied straight into place; a bytes column given as :class:`BytesRefs` is sent
    as references, and only its inline values are copied. Raises :class:`NeedsRoom`
    when the region is too small.
    """
    room = _Bump(region)
    header_cols = []
    referenced: set[int] = set()
    for name, values in columns.items():
        kind, dtype, shape = kinds[name]
        entry: dict[str, Any] = {"name": name, "kind": kind, "dtype": dtype, "shape": shape}
        if isinstance(values, BytesRefs):
            refs = _bytes_refs(values, room)
            referenced.update(values.files.tolist())
            entry["refs"] = True
            parts: list[list[bytes | memoryview]] = [[_bytes_view(refs)]]
        else:
            parts = _column_parts(values, kind, dtype, shape, room.alloc, 0)
        entry["sizes"] = [sum(memoryview(p).nbytes for p in pieces) for pieces in parts]
        entry["offsets"] = [
            room.place(pieces, size) for pieces, size in zip(parts, entry["sizes"], strict=True)
        ]
        header_cols.append(entry)
    if room.missing:
        raise NeedsRoom(room.used + room.missing)
    referenced.discard(-1)
    return {"rows": rows, "columns": header_cols, "files": sorted(referenced)}


def _bytes_refs(values: BytesRefs, room: _Bump) -> np.ndarray:
    """``values`` as an int64 array ``(3, n)``: file number (-1: in the region), offset,
    length of each value, with the inline values copied into the region."""
    offsets = values.offsets.astype(np.int64, copy=True)
    lengths = values.lengths.astype(np.int64, copy=True)
    for i, value in values.inline.items():
        data = value.reshape(-1).view(np.uint8) if isinstance(value, np.ndarray) else value
        view = np.frombuffer(data, dtype=np.uint8)
        out = room.alloc(len(view))
        out[:] = view
        offsets[i], lengths[i] = room.used - len(view), len(view)
    return np.stack([values.files.astype(np.int64), offsets, lengths]).astype("<i8")


class _Bump:
    """Hands out consecutive pieces of a region; counts what did not fit."""

    def __init__(self, region: np.ndarray) -> None:
        self.region = region
        self.start = int(region.ctypes.data)
        self.used = 0
        self.missing = 0

    def alloc(self, nbytes: int) -> np.ndarray:
        if self.used + nbytes <= len(self.region):
            out = self.region[self.used : self.used + nbytes]
            self.used += nbytes
            return out
        self.missing += nbytes
        return np.empty(nbytes, dtype=np.uint8)

    def place(self, pieces: list[bytes | memoryview], size: int) -> int:
        """The offset of one logical buffer in the region, copying it there if needed."""
        if len(pieces) == 1 and size:
            at = int(np.frombuffer(pieces[0], dtype=np.uint8).ctypes.data) - self.start
            if 0 <= at < len(self.region):
                return at  # alloc() placed it already
        missing = self.missing
        out = self.alloc(size)
        if self.missing != missing:
            return -1  # no room: encode_block_into raises NeedsRoom with the total
        pos = 0
        for piece in pieces:
            view = np.frombuffer(piece, dtype=np.uint8)
            out[pos : pos + len(view)] = view
            pos += len(view)
        return self.used - size


def _column_parts(
    values: ColumnValues,
    kind: str,
    dtype: str,
    shape: list[int],
    alloc: Callable[[int], np.ndarray],
    join_at: int,
    gather: bool = False,
) -> list[list[bytes | memoryview]]:
    """A column's logical buffers, each a list of pieces sent one after the other.

    A bytes column whose mean value is at least ``join_at`` bytes is copied into one
    buffer from ``alloc`` (with ``gather``: left as one piece per value); smaller values
    are ``b"".join``ed.
    """
    if kind == "fixed":
        arr = np.ascontiguousarray(values, dtype=np.dtype(dtype))
        return [[_bytes_view(arr)]]
    if kind in ("bytes", "string"):
        items = [v.encode("utf-8") for v in values] if kind == "string" else list(values)
        offsets = _offsets(len(v) for v in items)
        if kind == "bytes" and len(items) and offsets[-1] >= join_at * len(items):
            if gather:
                data: list[bytes | memoryview] = [memoryview(v) for v in items]
            else:
                data = [_join_into(items, offsets, alloc)]
        else:
            data = [b"".join(items)]
        return [[offsets.tobytes()], data]
    return _vararray_parts(values, np.dtype(dtype), len(shape))


def _vararray_parts(values: Any, dtype: np.dtype[Any], ndim: int) -> list[list[bytes | memoryview]]:
    """A variable-shape column's offsets, shapes and data, without a Python step per
    value beyond its ``ascontiguousarray`` (6.1 us a row to encode, 1.2 after)."""
    arrays = [np.ascontiguousarray(v, dtype=dtype) for v in values]
    if any(a.ndim != ndim for a in arrays):
        raise FormatError(f"a value's dimensions differ from the column's {ndim}")
    shapes = np.fromiter(
        itertools.chain.from_iterable(map(_SHAPE, arrays)), dtype="<i8", count=len(arrays) * ndim
    ).reshape(len(arrays), ndim)
    offsets = _offsets(np.prod(shapes, axis=1) * dtype.itemsize)
    # C-contiguous arrays are bytes-like: one join, no memoryview made per value
    return [[offsets.tobytes()], [shapes.tobytes()], [b"".join(arrays)]]  # type: ignore[arg-type]


def _bytes_view(arr: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without a copy."""
    return memoryview(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def _join_into(
    items: Sequence[Any], offsets: np.ndarray, alloc: Callable[[int], np.ndarray]
) -> memoryview:
    """``items`` (bytes-like) one after the other in a buffer from ``alloc``."""
    out = alloc(int(offsets[-1]))
    for item, lo, hi in zip(items, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        out[lo:hi] = np.frombuffer(item, dtype=np.uint8)
    return out.data


def _offsets(lengths: Any) -> np.ndarray:
    sizes = np.fromiter(lengths, dtype=np.int64)
    out = np.zeros(len(sizes) + 1, dtype="<i8")
    np.cumsum(sizes, out=out[1:])
    return out


def decode_block(buf: bytearray | bytes | memoryview) -> tuple[int, dict[str, ColumnValues]]:
    """(rows, columns) of a response body; values view ``buf`` (no copy where possible).

    Fixed-shape columns come as one array ``(n, *shape)``, bytes as ``BytesArray``
    (uint8) views, strings as ``str``, variable-shape arrays as a list of arrays:
    what ``MindDataset`` yields for the same rows.
    """
    try:
        return _decode(memoryview(buf))
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
        raise DatasetServerError(f"the server sent a malformed block ({exc})") from exc


def _decode(view: memoryview) -> tuple[int, dict[str, ColumnValues]]:
    (hlen,) = _LEN.unpack_from(view, 0)
    if hlen > MAX_HEADER_BYTES or 4 + hlen > len(view):
        raise FormatError(f"header length {hlen} does not fit a {len(view)}-byte body")
    header = msgpack.unpackb(view[4 : 4 + hlen], raw=False)
    pos = 4 + hlen
    placed = []
    for col in header["columns"]:
        offsets = []
        for size in col["sizes"]:
            offsets.append(pos)
            pos += int(size)
        placed.append({**col, "offsets": offsets})
    return _decode_columns({**header, "columns": placed}, view, {})


def decode_block_at(
    header: Any, region: np.ndarray, files: Mapping[int, np.ndarray] | None = None
) -> tuple[int, dict[str, ColumnValues]]:
    """(rows, columns) of a block written by :func:`encode_block_into`; values view
    ``region`` (and ``files``, {file number: uint8 array of the mapped file}, for a
    column sent as references). DatasetServerError when the header does not fit them."""
    try:
        return _decode_columns(header, region.reshape(-1).view(np.uint8).data, files or {})
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise DatasetServerError(f"the server sent a malformed block ({exc})") from exc


def _decode_columns(
    header: Any, view: memoryview, files: Mapping[int, np.ndarray]
) -> tuple[int, dict[str, ColumnValues]]:
    """Columns whose buffers lie at ``col["offsets"]`` in ``view``, bounds checked."""
    n = int(header["rows"])
    out: dict[str, ColumnValues] = {}
    for col in header["columns"]:
        sizes = [int(s) for s in col["sizes"]]
        offsets = [int(o) for o in col["offsets"]]
        if len(offsets) != len(sizes):
            raise FormatError(
                f"column {col['name']!r} has {len(sizes)} sizes, {len(offsets)} offsets"
            )
        parts = []
        for at, size in zip(offsets, sizes, strict=True):
            if at < 0 or size < 0 or at + size > len(view):
                raise FormatError(f"column {col['name']!r} runs past the end of the body")
            parts.append(view[at : at + size])
        if col.get("refs"):
            out[str(col["name"])] = _decode_refs(col, parts[0], n, view, files)
        else:
            out[str(col["name"])] = _decode_column(col, parts, n)
    return n, out


def _decode_refs(
    col: dict[str, Any], part: memoryview, n: int, view: memoryview, files: Mapping[int, np.ndarray]
) -> list[Any]:
    """A bytes column sent as references: read-only views of the files or the region."""
    refs = np.frombuffer(part, dtype="<i8").reshape(3, n)
    region = np.frombuffer(view, dtype=np.uint8)
    values: list[Any] = []
    for where, start, length in zip(*refs.tolist(), strict=True):
        base = region if where < 0 else files[where]
        if start < 0 or length < 0 or start + length > len(base):
            raise FormatError(f"column {col['name']!r}: a value runs past the end of its file")
        value = base[start : start + length].view(BytesArray)
        if where < 0:  # the segment is writable memory; the files are mapped read-only
            value.flags.writeable = False
        values.append(value)
    return values


def _numeric(dtype: str) -> np.dtype[Any]:
    dt = np.dtype(dtype)
    if dt.kind not in _NUMERIC_KINDS:
        raise FormatError(f"dtype {dtype!r} is not numeric")
    return dt


def _decode_column(col: dict[str, Any], parts: list[memoryview], n: int) -> ColumnValues:
    kind = col["kind"]
    if kind == "fixed":
        shape = tuple(int(d) for d in col["shape"] or ())
        return np.frombuffer(parts[0], dtype=_numeric(col["dtype"])).reshape((n, *shape))
    offsets = np.frombuffer(parts[0], dtype="<i8")
    if len(offsets) != n + 1:
        raise FormatError(f"column {col['name']!r} has {len(offsets)} offsets for {n} rows")
    if kind == "vararray":
        return _decode_vararray(col, offsets, parts, n)
    bounds = offsets.tolist()
    if kind == "bytes":
        data = np.frombuffer(parts[1], dtype=np.uint8)
        values: list[Any] = []
        for a, b in itertools.pairwise(bounds):
            value = data[a:b].view(BytesArray)
            value.flags.writeable = False
            values.append(value)
        return values
    if kind == "string":
        text = bytes(parts[1])
        return [str(text[a:b], "utf-8") for a, b in itertools.pairwise(bounds)]
    raise FormatError(f"unknown column kind {kind!r}")


def _decode_vararray(
    col: dict[str, Any], offsets: np.ndarray, parts: list[memoryview], n: int
) -> list[Any]:
    """A variable-shape column's values, cut out by shape (``values_by_shape``): small
    values are copies (one fancy index a shape, not a ``frombuffer`` and a reshape a
    value: 3.0 us a row to decode, 1.4 after), big ones views of the body."""
    dtype = _numeric(col["dtype"])
    shapes = np.frombuffer(parts[1], dtype="<i8").reshape(n, len(col["shape"]))
    data = np.frombuffer(parts[2], dtype=np.uint8)
    sizes = np.diff(offsets)
    if n and (
        offsets[0] != 0
        or offsets[-1] > len(data)
        or np.any(shapes < 0)
        or np.any(sizes != np.prod(shapes, axis=1) * dtype.itemsize)
    ):
        raise FormatError(f"column {col['name']!r}: offsets and shapes do not match the data")
    values: list[Any] = [None] * n
    values_by_shape(data, offsets[:-1], shapes, dtype, np.arange(n), values, copy_big=False)
    return values
