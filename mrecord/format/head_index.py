"""The head index (format 1.4): every value table and head of a shard, stored together.

A chunk with a value table (``mrecord.format.value_crcs``) can be read value by value,
but only after its head (the values' offsets, and shapes) and its table are known: on a
random first epoch over data larger than memory nearly every row is the first touch of
its chunk, so it cost a small read of the head and table before the read of the value,
two requests a row (on a hard disk's 200 IOPS: half the rate the value reads alone
allow; docs/READING.md). A page's small chunks (an image's label: 44 bytes beside a
megabyte of images) cost a request of their own the same way. The head index holds a
copy of those bytes for every such chunk of a shard, one after another, so a reader gets
all of them with one large read.

Layout: a *region* of the file (after the pages, before the metadata) per entry of the
metadata's ``head_index`` list ``[first_page, offset, length, crc32c]``. An entry covers
pages ``first_page`` up to the next entry's ``first_page`` (the last: to the end); its
region is, for each chunk of those pages, page by page and field by field:

- a chunk with a value table: its table followed by its head, exactly the bytes that
  lie in the file from ``offset − 4 × (n + 1)`` to the end of the head;
- a *small* chunk (no table, at most ``SMALL_CHUNK_MAX`` stored bytes and at most a
  ``SMALL_CHUNK_SHARE``-th of its page's stored bytes, :func:`copied_chunks`): its
  stored bytes whole (checked by the chunk's own CRC);
- any other chunk: nothing::

    [table of chunk A: 4 × (n_A + 1)] [head of chunk A] [small chunk B] [table of C] ...

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

__all__ = [
    "SMALL_CHUNK_MAX",
    "SMALL_CHUNK_SHARE",
    "HeadIndexEntry",
    "copied_chunks",
    "copied_whole",
    "head_length",
    "head_lengths",
    "part_lengths",
    "region_starts",
]

SMALL_CHUNK_MAX = 4096
"""A chunk without a value table of at most this many stored bytes is copied whole into
the head index (when it is also small beside its page: ``SMALL_CHUNK_SHARE``)."""
SMALL_CHUNK_SHARE = 64
"""... and at most this fraction (1/64) of its page's stored bytes: the copies add at
most ~1.6% a column to the file, and a dataset of tiny pages is not stored twice."""


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


def copied_whole(length: int, page_bytes: int) -> bool:
    """Whether a chunk without a value table, of ``length`` stored bytes in a page of
    ``page_bytes``, is copied whole into the head index (:func:`copied_chunks`' rule for
    one chunk: a writer asks it for every chunk it writes, where numpy costs more)."""
    return length <= SMALL_CHUNK_MAX and SMALL_CHUNK_SHARE * length <= page_bytes


def copied_chunks(chunks: np.ndarray) -> np.ndarray:
    """Which (page, field) chunks a head index region holds whole: no value table, at
    most ``SMALL_CHUNK_MAX`` stored bytes and at most a ``SMALL_CHUNK_SHARE``-th of the
    stored bytes of its page's chunks. A bool array, shape ``(pages, fields)``."""
    lengths = chunks["length"].astype(np.int64)
    page_bytes = lengths.sum(axis=1, keepdims=True)
    tables = (chunks["flags"] & FLAG_VALUE_CRCS) != 0
    small = (lengths <= SMALL_CHUNK_MAX) & (SMALL_CHUNK_SHARE * lengths <= page_bytes)
    return np.asarray(small & ~tables)


def part_lengths(schema: StoredSchema, page_rows: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Bytes each (page, field) chunk takes in a head index region: its table and head
    when it has a value table, its stored bytes when it is copied whole
    (:func:`copied_chunks`), else 0. Shape ``(pages, fields)``, int64."""
    tables = (chunks["flags"] & FLAG_VALUE_CRCS) != 0
    lengths = chunks["length"].astype(np.int64)
    heads = np.minimum(head_lengths(schema, page_rows), lengths)
    table = 4 * (page_rows.astype(np.int64)[:, None] + 1)
    return np.where(tables, table + heads, np.where(copied_chunks(chunks), lengths, 0))


def region_starts(
    schema: StoredSchema,
    page_rows: np.ndarray,
    chunks: np.ndarray,
    entries: tuple[HeadIndexEntry, ...],
) -> tuple[np.ndarray, list[int]] | None:
    """Where each chunk's part (its table, or its copy) starts in the entries' regions
    laid end to end (entry 0's bytes, then entry 1's, ...): shape ``(pages, fields)``,
    int64, −1 for a chunk not in any region; and the length each entry's region must
    have. None when there are no entries."""
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
