"""A pass over a whole dataset in row order, a bounded number of bytes at a time: what
``mrecord stats`` and ``cat`` and :func:`mrecord.to_hf` read through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = ["BLOCK_BYTES", "iter_dataset_blocks"]

BLOCK_BYTES = 8 << 20
"""A block of a whole-dataset pass holds at most this many bytes of rows: ``mrecord
stats`` read 4,096 rows a call, 410 MB of 100 KB images, and was OOM-killed over 2.4 GB
of them in a 200 MB memory group."""


def iter_dataset_blocks(
    reader: Any, chunk: int, start: int = 0, stop: int | None = None
) -> Iterator[Block]:
    """Read rows ``start:stop`` of a DatasetReader in order, ``chunk`` at a time, fewer
    where that many would hold more than :data:`BLOCK_BYTES` (``reader.mean_row_bytes``)."""
    row_bytes = int(getattr(reader, "mean_row_bytes", 0) or 0)
    if row_bytes:
        chunk = max(1, min(chunk, BLOCK_BYTES // row_bytes))
    n = int(reader.num_rows)
    end = n if stop is None else min(stop, n)
    for lo in range(start, end, chunk):
        ids = np.arange(lo, min(lo + chunk, end), dtype=np.int64)
        block: Block = reader.read_rows(ids)
        yield block
