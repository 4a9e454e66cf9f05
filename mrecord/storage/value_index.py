"""Where every value of a variable-shape column lies, a whole shard at once.

A random read of a few rows from each of many pages finds each row's value through its
page's head (value offsets and shapes): the page's check, its head and two small index
operations a page, 10-20 us, most of a read of 10,000 random rows of 2M over 800 pages.
Once every chunk of the column is checked and the file is in memory, one array of every
row's value start and one of every row's shape answer that for the whole read at once
(a fancy index each). Built from the pages' heads (what the page-by-page path parses
anyway), at most half the column's stored bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mrecord.storage.shard import ShardFile

__all__ = ["INDEX_MAX_BYTES", "ValueIndex", "build_value_index"]

INDEX_MAX_BYTES = 512 << 20
"""An index never takes more memory than this (nor more than half the column's stored
bytes: 12 bytes a row of float32[k, 3] values of ~400): past it, reads go page by page."""


@dataclass(frozen=True)
class ValueIndex:
    """Every row of one shard's variable-shape column: ``starts[r]`` is the file offset
    where row ``r``'s value begins (int64), ``shapes[r]`` its shape (``(rows, rank)``,
    int32 where every dimension fits, else int64)."""

    starts: np.ndarray
    shapes: np.ndarray


def build_value_index(shard: ShardFile, col: int) -> ValueIndex | None:
    """The index of column ``col`` of ``shard`` from every page's head, or None where it
    cannot serve: a chunk not stored plain in a local map, or an index larger than
    ``INDEX_MAX_BYTES`` or half the column's stored bytes. Reads every page's head
    through ``shard.var_page`` (each chunk checked by the shard's policy first)."""
    field = shard.meta.schema.fields[col]
    rows = int(shard.page_starts[-1])
    rank = len(field.shape or ())
    stored = int(shard.meta.chunks[:, col]["length"].sum()) if shard.meta.num_pages else 0
    limit = min(INDEX_MAX_BYTES, stored // 2)
    if not rows or not rank or rows * (8 + 4 * rank) > limit:  # int32 shapes: checked below
        return None
    starts = np.empty(rows, dtype=np.int64)
    shapes = np.empty((rows, rank), dtype=np.int64)
    first = shard.page_starts_list
    for page in range(shard.meta.num_pages):
        offset = shard.uncompressed_offset(page, col)
        if offset is None:
            return None
        head, _ = shard.var_page(page, field)
        lo, hi = first[page], first[page + 1]
        starts[lo:hi] = head.offsets_array[:-1] + (offset + head.data_start)
        shapes[lo:hi] = np.asarray(head.shapes)
    if shapes.size and int(shapes.max()) < 1 << 31:
        shapes = shapes.astype(np.int32)
    if starts.nbytes + shapes.nbytes > limit:
        return None
    return ValueIndex(starts, shapes)
