"""Many heads of one column's chunks parsed from the head index at once (format 1.4).

A cold random epoch over images parses a head for nearly every row it reads in its first
thousands of rows (a 241-row block touches ~230 chunks of 11 rows): one at a time
(:func:`mrecord.format.chunks.decode_var` and
:func:`mrecord.format.value_crcs.checked_value_crcs`) that is ~18 us of Python a head,
on the GIL the reading threads need to start their reads. Here the value tables and heads
of chunks with the same number of rows are taken from the index as one array and checked
together; the rules are theirs, so a chunk passes here exactly when it passes there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mrecord.format.chunks import ARRAY_OFFSETS_FROM, kept_offsets
from mrecord.format.compression import checksums
from mrecord.format.shape_groups import gather_spans
from mrecord.format.value_crcs import table_length

__all__ = ["parse_heads"]


def parse_heads(
    index: memoryview, starts: Sequence[int], rows: int, lengths: Sequence[int]
) -> list[tuple[Sequence[int], np.ndarray] | None]:
    """Parse the heads of chunks of a bytes or string column, each of ``rows`` values,
    whose value table and head (``table_length(rows)`` then ``8 × (rows + 1)`` bytes) lie
    at ``starts`` in ``index`` and whose stored lengths are ``lengths`` (each at least its
    head's: the caller sends shorter ones down the one-at-a-time path, which names them).

    Per chunk: ``(offsets, value_crcs)`` (the offsets kept as ``decode_var`` keeps them,
    :func:`~mrecord.format.chunks.kept_offsets`; the CRC-32C of each value as a ``<u4``
    array), or None where the copy's offsets are inconsistent (not
    starting at 0, not ending at the chunk's data length, decreasing) or its head's CRC
    differs from the table's first entry."""
    table, head = table_length(rows), 8 * (rows + 1)
    if not len(starts):
        return []
    # (chunks, table + head), a copy: one index entry a chunk, not a byte
    both = gather_spans(
        np.frombuffer(index, dtype=np.uint8), np.asarray(starts, dtype=np.int64), table + head
    )
    crcs = np.ascontiguousarray(both[:, :table]).view("<u4")
    heads = np.ascontiguousarray(both[:, table:])
    offsets = heads.view("<u8")
    data_lengths = np.asarray(lengths, dtype=np.int64) - head
    ok = (
        (offsets[:, 0] == 0)
        & (offsets[:, -1].astype(np.int64) == data_lengths)
        & np.all(offsets[:, 1:] >= offsets[:, :-1], axis=1)
    )
    flat = memoryview(heads.data).cast("B")
    head_crcs = checksums([flat[i * head : (i + 1) * head] for i in range(len(starts))], head)
    ok &= np.asarray(head_crcs, dtype=np.uint32) == crcs[:, 0]
    value_crcs = np.ascontiguousarray(crcs[:, 1:])
    # kept as one at a time keeps them (kept_offsets): a list of ints for a few rows
    if rows < ARRAY_OFFSETS_FROM:
        kept: Sequence[Sequence[int]] = offsets.tolist()
    else:
        kept = [kept_offsets(row) for row in offsets]
    return [(kept[i], value_crcs[i]) if good else None for i, good in enumerate(ok.tolist())]
