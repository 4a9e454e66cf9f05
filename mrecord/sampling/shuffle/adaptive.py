"""ADAPTIVE: GLOBAL for datasets up to a threshold of rows, PARTIAL above it; BLOCK when
the caller measured slow storage."""

from __future__ import annotations

from mrecord.sampling.order import Order
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_option,
)
from mrecord.sampling.shuffle.block import BlockLayout, block_shuffle
from mrecord.sampling.shuffle.global_shuffle import global_shuffle
from mrecord.sampling.shuffle.partial import partial_shuffle

__all__ = ["adaptive_shuffle"]


def adaptive_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """BLOCK when ``layout.adaptive`` (the caller measured storage too slow for random
    reads of data larger than its memory: ``block.prefers_block``), else GLOBAL when the
    dataset has at most ``adaptive_threshold`` rows, else PARTIAL.

    mrecord's GLOBAL needs no memory per row, so the threshold only matters for
    reading locality; it is kept for compatibility with MindSpore.
    """
    counts = check_counts(file_row_counts)
    threshold = check_option("adaptive_threshold", adaptive_threshold)
    if layout is not None and layout.adaptive:
        return block_shuffle(counts.tolist(), seed, epoch, layout=layout)
    if int(counts.sum()) <= threshold:
        return global_shuffle(counts.tolist(), seed, epoch)
    return partial_shuffle(counts.tolist(), seed, epoch, partial_window=partial_window)
