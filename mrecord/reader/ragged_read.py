"""A variable-shape column read as one buffer (``DatasetReader.read_ragged``).

Each page's wanted values are located from its head (where each starts, its shape) and
packed into one new buffer in the read's order (:func:`~mrecord.format.ragged_column.
pack_spans`: a page's run of values in file order is one copy). No array a value: the
form a scan that reads every value in one pass wants (docs/READING.md, "Variable-shape
values as one buffer").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.format.ragged_column import RaggedColumn, pack_spans, runs_in_order
from mrecord.format.schema import Field
from mrecord.storage.shard import ShardFile, rows_by_page

__all__ = ["read_ragged_column"]


def read_ragged_column(
    shards: Sequence[ShardFile], field: Field, groups: list[Any], n: int
) -> RaggedColumn:
    """The ``n`` values of variable-shape ``field`` at the rows of ``groups`` (the
    reader's ``(shard, positions, pages, slots)`` groups), each chunk read and checked
    by its shard's ``verify`` policy."""
    itemsize = field.dtype.itemsize
    lengths = np.zeros(n, dtype=np.int64)  # bytes
    shapes = np.zeros((n, len(field.shape or ())), dtype=np.int64)
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for s, positions, pages, slots in groups:
        shard = shards[s]
        col = shard.field_index(field.name)
        order, bounds, distinct = rows_by_page(pages)
        # A random read's values of the shard's plain chunks: one piece over the whole
        # file, so that they are packed a length at a time across pages, not page by page
        # (100,000 random rows of 2M: 4.6 against ~2 us a row).
        scattered: list[tuple[np.ndarray, np.ndarray]] = []
        for k, page in enumerate(distinct):
            members = order[bounds[k] : bounds[k + 1]]
            head, raw = shard.var_page(page, field)  # checked by the verify policy
            offsets = head.offsets_array
            wanted = slots[members]
            where = members if positions is None else positions[members]
            starts = offsets[wanted]
            sizes = offsets[wanted + 1] - starts
            lengths[where] = sizes
            shapes[where] = np.asarray(head.shapes)[wanted]
            in_file = shard.uncompressed_offset(page, col)
            in_order = bool(np.all(np.diff(where) == 1)) and runs_in_order(starts, sizes)
            if in_file is not None and not in_order:
                scattered.append((where, in_file + head.data_start + starts))
                continue
            data = np.frombuffer(raw, np.uint8, count=int(offsets[-1]), offset=head.data_start)
            pieces.append((data, where, starts))
        if scattered:
            where = np.concatenate([w for w, _ in scattered])
            starts = np.concatenate([a for _, a in scattered])
            pieces.append((shard.file_bytes, where, starts))
    values = pack_spans(pieces, lengths).view(field.dtype)
    item_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths // itemsize, out=item_offsets[1:])
    return RaggedColumn(values, item_offsets, shapes)
