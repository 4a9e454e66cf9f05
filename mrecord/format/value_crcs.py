"""Value checksums (format 1.3): a CRC-32C per value of a plain variable-size chunk.

A chunk's own CRC-32C (in its directory record) covers the whole chunk, so checking one
value means reading all of them: for a random first epoch over data larger than memory
that read every chunk whole on its first touch and each value again when its turn came,
twice the dataset from the disk (docs/READING.md). A chunk that carries a *value table*
can be checked value by value instead: reading a value reads its own bytes only.

Layout: the table lies right before its chunk, ending where the chunk begins (the chunk
still starts on a 64-byte boundary; the writer puts zeros before the table)::

    [zeros] [head CRC: u32] [value 0 CRC: u32] ... [value n-1 CRC: u32] | chunk (64-aligned)

``n`` is the page's row count; the head is the chunk's offsets (and shapes, for a
variable-shape array); value ``i`` is ``data[offsets[i]:offsets[i+1]]``. All CRC-32C
(Castagnoli), little-endian. A chunk has a table when bit 0 (``FLAG_VALUE_CRCS``) of its
directory record's flags byte is set; only plain (codec 0) variable-size chunks may have
one. The chunk's own CRC is still there and still covers the whole chunk, so readers that
do not know tables (format 1.2) read these files unchanged.

Writers add a table where values are at least ``VALUE_CRC_MIN_BYTES`` on average (the
table costs 4 bytes a value: at most 0.4% there; smaller values share their 4 KiB disk
pages with their neighbours anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.format.compression import checksum, checksums
from mrecord.format.layout import align
from mrecord.format.schema import Field, FieldKind

__all__ = [
    "FLAG_VALUE_CRCS",
    "VALUE_CRC_MIN_BYTES",
    "checked_value_crcs",
    "encode_value_crcs",
    "prefix_length",
    "table_length",
]

FLAG_VALUE_CRCS = 1
"""Bit 0 of a chunk record's flags byte: a value table precedes the chunk."""

VALUE_CRC_MIN_BYTES = 1024
"""Writers add a value table to plain variable-size chunks whose values average at least
this many bytes."""


def table_length(rows: int) -> int:
    """Bytes of the value table of a chunk of ``rows`` values (the head's CRC first)."""
    return 4 * (rows + 1)


def prefix_length(rows: int) -> int:
    """Bytes a writer puts before a chunk with a table: zeros, then the table, so that the
    chunk after them starts on a 64-byte boundary (a multiple of 64)."""
    return align(table_length(rows))


def encode_value_crcs(field: Field, parts: Sequence[Any], rows: int) -> bytes | None:
    """The value table of a plain chunk of ``field`` whose stored bytes are ``parts``
    concatenated (``mrecord.format.chunks.encode_chunk_parts``: the head first, then one
    buffer per value, or one buffer of all values for variable-shape arrays), or None when
    the chunk gets none (fixed-width, or values under ``VALUE_CRC_MIN_BYTES`` on
    average)."""
    if field.kind is FieldKind.FIXED or not rows:
        return None
    head, values = parts[0], parts[1:]
    offsets = np.frombuffer(head, dtype="<u8", count=rows + 1)
    if int(offsets[-1]) < VALUE_CRC_MIN_BYTES * rows:
        return None
    crcs = np.empty(rows + 1, dtype="<u4")
    crcs[0] = checksum(head)
    largest = int(np.diff(offsets).max())
    if len(values) == rows:  # one buffer a value, as written
        crcs[1:] = checksums(values, largest)
    else:  # small values joined, or variable-shape arrays: one buffer cut by the offsets
        data = memoryview(values[0])
        bounds = offsets.tolist()
        crcs[1:] = checksums([data[bounds[i] : bounds[i + 1]] for i in range(rows)], largest)
    return crcs.tobytes()


def checked_value_crcs(table: Any, head: Any) -> np.ndarray | None:
    """The CRC-32C of each value from a chunk's ``table`` bytes (head's CRC first), when
    its first entry matches the chunk's ``head`` bytes (offsets, and shapes); else None
    (the head or the table is damaged)."""
    crcs = np.frombuffer(table, dtype="<u4")
    if not len(crcs) or checksum(head) != int(crcs[0]):
        return None
    return crcs[1:].copy()
