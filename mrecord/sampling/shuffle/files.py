"""FILES: the order of the files is shuffled; rows inside each file keep their order."""

from __future__ import annotations

from mrecord.sampling.order import Order, SegmentOrder
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_seed_epoch,
    file_permutation,
)
from mrecord.sampling.shuffle.block import BlockLayout

__all__ = ["files_shuffle"]


def files_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """Files visited in a shuffled order, each read from its first row to its last."""
    counts = check_counts(file_row_counts)
    seed, epoch = check_seed_epoch(seed, epoch)
    return SegmentOrder(counts, file_permutation(len(counts), seed, epoch, "files"))
