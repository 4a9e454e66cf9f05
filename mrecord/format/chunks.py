"""Column chunks: one field's values for the rows of one page, as bytes.

Layouts (all integers little-endian; ``n`` = rows in the page):

FIXED (numeric, known shape; scalars have shape ``()``)::

    [values: n * prod(shape) * itemsize]            bool is one byte, 0 or 1

BYTES / STRING (string values are UTF-8)::

    [offsets: (n + 1) * u64] [data]                  value i = data[offsets[i]:offsets[i+1]]

VARARRAY (numeric with -1 dimensions, ``ndim`` from the schema)::

    [offsets: (n + 1) * u64] [shapes: n * ndim * u64] [data]
    value i = data[offsets[i]:offsets[i+1]] viewed as dtype, reshaped to shapes[i]

``offsets[0]`` is 0 and ``offsets[n]`` is the length of ``data``. Decoders check
every declared size against the bytes present before trusting it, so a damaged
chunk raises :class:`ChunkFormatError` instead of reading out of bounds.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Any

import numpy as np

from mrecord.errors import ChunkFormatError
from mrecord.format.columnize import value_shapes
from mrecord.format.schema import Field, FieldKind

__all__ = [
    "DecodedVarChunk",
    "decode_fixed",
    "decode_var",
    "encode_chunk",
    "encode_chunk_parts",
    "kept_shapes",
    "value_nbytes",
]

_U64 = np.dtype("<u8")


def encode_chunk(field: Field, values: np.ndarray | Sequence[Any]) -> bytes:
    """Encode one column of already-validated values (see the module docstring)."""
    return b"".join(encode_chunk_parts(field, values))


def encode_chunk_parts(field: Field, values: np.ndarray | Sequence[Any]) -> list[Any]:
    """:func:`encode_chunk` as a list of buffers whose concatenation is the chunk.

    The writer hands the list to one vectored write (and checksums it piece by piece),
    so a page of large blobs is never copied into one joined buffer first; small values
    (``JOIN_VALUES_BELOW`` on average) come joined, as one buffer after the offsets.
    """
    kind = field.kind
    if kind is FieldKind.FIXED:
        arr = np.ascontiguousarray(values, dtype=field.dtype)
        return [arr.reshape(-1).view(np.uint8)] if arr.size else [b""]
    if kind is FieldKind.BYTES:
        return _blob_parts([v if type(v) is bytes else bytes(v) for v in values])
    if kind is FieldKind.STRING:
        return _blob_parts([str(v).encode("utf-8") for v in values])
    return _vararray_parts(field, list(values))


# Values of at most this many bytes on average are joined into one buffer: each buffer
# costs the writer a checksum call and a copy step in Python (~3 us), more than copying
# a few KiB once. 200,000 values of ~1.5 KB: 0.6 s of checksum calls and 0.8 s of copy
# steps in a 1.3-1.8 s write (cProfile of FileWriter to /dev/shm, docs/CONVERT.md).
# A 100 KB image stays a buffer of its own, never copied before its write.
JOIN_VALUES_BELOW = 8 << 10


def _blob_parts(blobs: list[bytes]) -> list[Any]:
    lengths = np.fromiter(map(len, blobs), dtype=_U64, count=len(blobs))
    offsets = np.zeros(len(blobs) + 1, dtype=_U64)
    np.cumsum(lengths, out=offsets[1:])
    if len(blobs) > 1 and int(offsets[-1]) <= JOIN_VALUES_BELOW * len(blobs):
        return [offsets.tobytes(), b"".join(blobs)]
    return [offsets.tobytes(), *blobs]


def _vararray_parts(field: Field, values: Sequence[Any]) -> list[Any]:
    # The arrays themselves joined (no bytes object a value), their shapes in one array
    # and their lengths from the shapes: 12,500 values of float32[k, 3] in ~10 ms against
    # 17 ms a value at a time.
    ndim, dtype = len(field.row_shape), field.dtype
    arrays: Sequence[Any] = values
    if not _plain_arrays(values, dtype):
        arrays = [np.ascontiguousarray(v, dtype=dtype) for v in values]
    shapes = value_shapes(arrays, ndim).astype(_U64)
    lengths = np.prod(shapes, axis=1, dtype=_U64) * np.uint64(dtype.itemsize)
    offsets = np.zeros(len(arrays) + 1, dtype=_U64)
    np.cumsum(lengths, out=offsets[1:])
    return [offsets.tobytes() + shapes.tobytes(), b"".join(arrays)]


def _plain_arrays(values: Sequence[Any], dtype: np.dtype[Any]) -> bool:
    """Whether every value is a C-contiguous numpy array of ``dtype`` (joined as it is)."""
    return (
        set(map(type, values)) <= {np.ndarray}
        and set(map(attrgetter("dtype"), values)) <= {dtype}
        and all(map(attrgetter("flags.c_contiguous"), values))
    )


def value_nbytes(field: Field, values: np.ndarray | Sequence[Any]) -> np.ndarray:
    """Encoded payload bytes of each value (used to cut pages near the target size)."""
    kind = field.kind
    n = len(values)
    if kind is FieldKind.FIXED:
        return np.full(n, field.row_nbytes, dtype=np.int64)
    if kind is FieldKind.VARARRAY:
        return np.fromiter((v.nbytes + 8 * (1 + v.ndim) for v in values), dtype=np.int64, count=n)
    if kind is FieldKind.STRING:
        # UTF-8 is at most 4 bytes a character; len() is exact for ASCII, which is the usual case.
        return np.fromiter((len(v) + 8 for v in values), dtype=np.int64, count=n)
    return np.fromiter((len(v) + 8 for v in values), dtype=np.int64, count=n)


def decode_fixed(field: Field, buf: Any, n_rows: int) -> np.ndarray:
    """View a FIXED chunk as an array of shape ``(n_rows, *shape)`` without copying."""
    expected = n_rows * field.row_nbytes
    if len(buf) != expected:
        raise ChunkFormatError(
            f"fixed chunk of field {field.name!r} has {len(buf)} bytes, expected {expected} "
            f"for {n_rows} rows of {field.row_nbytes} bytes"
        )
    arr = np.frombuffer(buf, dtype=field.dtype, count=expected // field.dtype.itemsize)
    if field.type == "bool" and arr.size and int(arr.view(np.uint8).max()) > 1:
        raise ChunkFormatError(f"bool chunk of field {field.name!r} holds a byte other than 0 or 1")
    return arr.reshape((n_rows, *field.row_shape))


@dataclass
class DecodedVarChunk:
    """The parsed head of a BYTES, STRING or VARARRAY chunk.

    ``data_start`` is where the data region begins inside the chunk buffer;
    ``offsets`` (Python ints, n+1 of them) index into that region.
    """

    offsets: Sequence[int]
    shapes: np.ndarray | None
    data_start: int

    @property
    def offsets_array(self) -> np.ndarray:
        """``offsets`` as a read-only int64 array (vectorized gathers): a view of them when
        they are kept as 8-byte ints, a fresh widened copy when kept as 4-byte ones
        (:func:`kept_offsets`; not kept with the head, which would double what it
        holds), built once for a list."""
        offsets = self.offsets
        if isinstance(offsets, array):
            view = np.frombuffer(offsets, dtype=np.int64 if offsets.itemsize == 8 else np.uint32)
            if view.dtype != np.int64:
                view = view.astype(np.int64)
            view.flags.writeable = False
            return view
        listed = self.__dict__.get("_offsets_array")
        if listed is None:
            listed = np.array(offsets, dtype=np.int64)
            listed.flags.writeable = False
            self.__dict__["_offsets_array"] = listed
        return listed

    @cached_property
    def shapes_list(self) -> list[tuple[int, ...]]:
        """Each value's shape as a tuple of ints (VARARRAY chunks)."""
        if self.shapes is None:
            return []
        return [tuple(row) for row in self.shapes.tolist()]


ARRAY_OFFSETS_FROM = 64
"""Rows from which a parsed head keeps its offsets as packed ints (``array``, 4 or 8 bytes
each), not as a list of Python ints (36 bytes each with the list's pointer). A random
epoch over small variable-shape rows touches every page in each block and so holds every
page's head at once: 2,000,000 rows of ~420 bytes held 104 MB of offset lists and 16 MB
of their arrays (tracemalloc), and a 266 MB memory group was OOM-killed in two GLOBAL
runs of three. A head of a few rows (images: 11 a page) keeps its list: indexing it is
the cheapest."""

_OFFSET_32 = next(code for code in "ILH" if array(code).itemsize == 4)
"""The ``array`` type code of a 4-byte unsigned int on this platform."""


def kept_offsets(offsets: np.ndarray) -> Sequence[int]:
    """How a parsed head keeps its checked offsets (``offsets``: the ``n + 1`` of them, any
    integer dtype, rising from 0): a list of ints for a head of fewer than
    ``ARRAY_OFFSETS_FROM`` rows, else an ``array`` of 4-byte ints where the last offset
    fits (a chunk's data under 4 GiB, every page of every dataset seen), else of 8-byte
    ones (indexing, ``len``, ``bisect`` and slices work on all three, and give ints).
    Half the bytes of 8-byte ints: the heads of 2M small variable-shape rows then fit the
    head cache of a reader in a 500 MB memory group (:func:`kept_shapes`)."""
    if len(offsets) - 1 < ARRAY_OFFSETS_FROM:
        listed: list[int] = offsets.tolist()
        return listed
    if int(offsets[-1]) < 1 << 32:
        kept = array(_OFFSET_32)
        kept.frombytes(np.ascontiguousarray(offsets, dtype="=u4").tobytes())
        return kept
    kept = array("q")
    kept.frombytes(np.ascontiguousarray(offsets, dtype="=i8").tobytes())
    return kept


_NARROW_UINTS = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32))


def kept_shapes(shapes: np.ndarray) -> np.ndarray:
    """A copy of a parsed head's ``shapes`` (``(n, ndim)``, checked) to keep with the head:
    in the narrowest unsigned dtype that holds its largest dimension (uint8 for a
    ``[-1, 3]`` column of up to 255 points a row: 2 bytes a row, not 16). Every reader of a
    kept head's shapes indexes them and widens what it took (``astype``, ``tolist``).

    The heads of 2M variable-shape rows of ~420 bytes took 48 MB kept as 8-byte ints,
    where a reader in a 500 MB memory group (under PyTorch) keeps 34 MB of heads: a
    ``MapDataset`` read of 256 random rows at a time re-read and re-parsed a 61 KB head
    for half its rows (500 MB/s off the disk for 9.1K rows/s); with every head kept,
    33.7K rows/s."""
    largest = int(shapes.max()) if shapes.size else 0
    for dtype in _NARROW_UINTS:
        if largest <= np.iinfo(dtype).max:
            return shapes.astype(dtype)
    return shapes.copy()


def decode_var(field: Field, buf: Any, n_rows: int, length: int | None = None) -> DecodedVarChunk:
    """Parse and check the offsets (and shapes) of a variable-size chunk: ``buf`` holds
    the chunk, or at least its head when ``length`` gives the chunk's length (a head
    from the head index, ``mrecord.format.head_index``)."""
    head = 8 * (n_rows + 1)
    ndim = len(field.row_shape) if field.kind is FieldKind.VARARRAY else 0
    shapes_len = 8 * n_rows * ndim
    if length is None:
        length = len(buf)
    if min(len(buf), length) < head + shapes_len:
        raise ChunkFormatError(
            f"chunk of field {field.name!r} has {length} bytes, too short for the "
            f"{head + shapes_len}-byte head of {n_rows} rows"
        )
    offsets = np.frombuffer(buf, dtype=_U64, count=n_rows + 1)
    data_len = length - head - shapes_len
    if n_rows < ARRAY_OFFSETS_FROM:
        kept: Sequence[int] = offsets.tolist()
        # Checked on the list the head keeps anyway: a cold random read parses a head for
        # nearly every row, and three numpy calls on ~10 offsets cost more than the list's
        # comparisons (sorting a sorted list is one linear pass).
        consistent = kept[0] == 0 and kept[-1] == data_len and kept == sorted(kept)
    else:
        consistent = (
            int(offsets[0]) == 0
            and int(offsets[-1]) == data_len
            and not bool(np.any(offsets[1:] < offsets[:-1]))
        )
        kept = kept_offsets(offsets) if consistent else []
    if not consistent:
        raise ChunkFormatError(
            f"chunk of field {field.name!r} has inconsistent offsets "
            f"(first {int(offsets[0])}, last {int(offsets[-1])}, data {data_len} bytes)"
        )
    shapes = None
    if ndim:
        shapes = np.frombuffer(buf, dtype=_U64, count=n_rows * ndim, offset=head).reshape(
            n_rows, ndim
        )
        _check_shapes(field, shapes, offsets)
    return DecodedVarChunk(kept, shapes, head + shapes_len)


def _check_shapes(field: Field, shapes: np.ndarray, offsets: np.ndarray) -> None:
    """Check a chunk's ``shapes`` (``(n, ndim)`` uint64) against the field's fixed
    dimensions and its ``offsets`` (``n + 1`` uint64, already checked to rise from 0 to the
    data's length): ChunkFormatError names what breaks.

    Column by column, each a few whole-array operations: a reduction along rows of two or
    three dimensions (``np.prod(axis=1)``) costs ~20x as much, and this check was 210 of
    the 270 us that parsing the head of a 2,500-row chunk took, parsed again whenever a
    random read found the head evicted (most of a warm GLOBAL epoch of small
    variable-shape rows)."""
    columns = list(shapes.T)
    for dim, column in zip(field.row_shape, columns, strict=True):
        if dim >= 0 and bool((column != dim).any()):
            raise ChunkFormatError(
                f"chunk of field {field.name!r} has a shape that breaks {field.row_shape}"
            )
    if not shapes.size:
        return
    largest = int(shapes.max())
    # Every non-zero product is at most largest ** ndim: within 2**62, nothing is absurd
    # (the exact, slower rule is for the rest).
    if largest ** len(columns) > _MAX_ELEMENTS and _absurd_shapes(shapes):
        raise ChunkFormatError(f"chunk of field {field.name!r} declares an absurdly large shape")
    sizes = columns[0].copy()
    for column in columns[1:]:
        sizes *= column  # each product within 2**62 (checked above): no overflow
    itemsize = field.dtype.itemsize
    # A size beyond the whole data region disagrees with its offsets; checking that first
    # keeps ``sizes * itemsize`` within 2**64.
    if int(sizes.max()) > int(offsets[-1]) // itemsize or bool(
        (sizes * itemsize != np.diff(offsets)).any()
    ):
        raise ChunkFormatError(
            f"chunk of field {field.name!r} has shapes that disagree with its offsets"
        )


_MAX_ELEMENTS = 1 << 62


def _absurd_shapes(shapes: np.ndarray) -> bool:
    """Whether any row's shape (uint64 dimensions from the file) is one no array can have.

    In integers, never in floats: a zero dimension makes a float product 0 whatever
    the other dimensions are, and ``(0, 2**64 - 1)`` would pass to ``reshape`` (a bare
    ValueError). Every dimension, and the product of a row's non-zero dimensions, must
    stay within 2**62 (checked before each multiplication, so nothing overflows).
    """
    if np.any(shapes > _MAX_ELEMENTS):
        return True
    product = np.ones(len(shapes), dtype=np.uint64)
    for dim in shapes.T:
        dim = np.maximum(dim, 1)
        if np.any(product > _MAX_ELEMENTS // dim):
            return True
        product *= dim
    return False
