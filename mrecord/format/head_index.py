"""The head index (format 1.4): every value table and head of a shard, stored together.

A chunk with a value table (``mrecord.format.value_crcs``) can be read value by value,
but only after its head (the values' offsets, and shapes) and its table are known: on a
random first epoch over data larger than memory nearly every row is the first touch of
its chunk, so it cost a small read of the head and table before the read of the value,
two requests a row (on a hard disk's 200 IOPS: half the rate the value reads alone
allow; docs/READING.md). The head index holds a copy of those bytes for every such chunk
of a shard, one after another, so a reader gets all of them with one large read.

Layout: a *region* of the file (after the pages, before the metadata) per entry of the
metadata's ``head_index`` list ``[first_page, offset, length, crc32c]``. An entry covers
pages ``first_page`` up to the next entry's ``first_page`` (the last: to the end); its
region is, for each chunk of those pages with a value table, page by page and field by
field, the chunk's table followed by its head, exactly the bytes that lie in the file
from ``offset − 4 × (n + 1)`` to the end of the head::

    [table of chunk A: 4 × (n_A + 1)] [head of chunk A] [table of chunk B] [head of B] ...

``crc32c`` is the CRC-32C (Castagnoli) of the region. A new shard has one entry (first
page 0); each append adds one for its pages; pages before the first entry (written by
1.3, which had no index) have none, and their heads are read from the chunks as before.

The copies are an optimisation only: every head is still in front of its chunk, covered
by the chunk's own CRC, and the table's first entry (the head's CRC) is checked against
the head wherever it comes from. A reader that finds a region damaged (its CRC differs,
or its length is not what the directory says) ignores it and reads heads from the chunks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mrecord.format.schema import Field, FieldKind, StoredSchema
from mrecord.format.value_crcs import FLAG_VALUE_CRCS

__all__ = ["HeadIndexEntry", "head_length", "head_lengths", "part_lengths", "region_starts"]


class HeadIndexEntry(NamedTuple):
    """One region of the head index: it covers pages from ``first_page`` on (up to the
    next entry's) and lies at file bytes ``offset:offset + length``, CRC-32C ``crc32``."""

    first_page: int
    offset: int
    length: int
    crc32: int


def head_length(field: Field, rows: int) -> int:
    """The head's length of a chunk of ``rows`` values of variable-size ``field``."""
    ndim = len(field.row_shape) if field.kind is FieldKind.VARARRAY else 0
    return 8 * (rows + 1) + 8 * rows * ndim


def head_lengths(schema: StoredSchema, page_rows: np.ndarray) -> np.ndarray:
    """The head's length of each (page, field) chunk of a variable-size field, as stored
    before its values: ``8 × (n + 1)`` offsets, and ``8 × n × ndim`` shapes for a
    variable-shape array (0 for fixed-width fields). Shape ``(pages, fields)``, int64."""
    rows = page_rows.astype(np.int64)[:, None]
    ndims = np.array(
        [len(f.row_shape) if f.kind is FieldKind.VARARRAY else 0 for f in schema.fields],
        dtype=np.int64,
    )
    variable = np.array([f.kind is not FieldKind.FIXED for f in schema.fields])
    return np.where(variable[None, :], 8 * (rows + 1) + 8 * rows * ndims[None, :], 0)


def part_lengths(schema: StoredSchema, page_rows: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Bytes each (page, field) chunk takes in a head index region: its table and head
    when it has a value table, else 0. Shape ``(pages, fields)``, int64."""
    tables = (chunks["flags"] & FLAG_VALUE_CRCS) != 0
    heads = np.minimum(head_lengths(schema, page_rows), chunks["length"].astype(np.int64))
    table = 4 * (page_rows.astype(np.int64)[:, None] + 1)
    return np.where(tables, table + heads, 0)


def region_starts(
    schema: StoredSchema,
    page_rows: np.ndarray,
    chunks: np.ndarray,
    entries: tuple[HeadIndexEntry, ...],
) -> tuple[np.ndarray, list[int]] | None:
    """Where each chunk's table starts in the entries' regions laid end to end (entry 0's
    bytes, then entry 1's, ...): shape ``(pages, fields)``, int64, −1 for a chunk not in
    any region; and the length each entry's region must have. None when there are no
    entries."""
    if not entries:
        return None
    lengths = part_lengths(schema, page_rows, chunks)
    starts = np.full(lengths.shape, -1, dtype=np.int64)
    bounds = [e.first_page for e in entries] + [len(page_rows)]
    expected: list[int] = []
    base = 0
    for k in range(len(entries)):
        block = lengths[bounds[k] : bounds[k + 1]]
        flat = block.reshape(-1)
        ends = np.cumsum(flat)
        here = (ends - flat + base).reshape(block.shape)
        starts[bounds[k] : bounds[k + 1]] = np.where(block > 0, here, -1)
        total = int(ends[-1]) if len(ends) else 0
        expected.append(total)
        base += total
    return starts, expected
