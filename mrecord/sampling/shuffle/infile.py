"""INFILE: files are read in their order; the rows inside each file are shuffled."""

from __future__ import annotations

from mrecord.sampling.order import Order, SegmentOrder
from mrecord.sampling.permutation import derive_key
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_seed_epoch,
)
from mrecord.sampling.shuffle.block import BlockLayout

__all__ = ["infile_shuffle"]


def infile_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """File 0's rows in a shuffled order, then file 1's, and so on (O(files) memory)."""
    counts = check_counts(file_row_counts)
    seed, epoch = check_seed_epoch(seed, epoch)
    return SegmentOrder(counts, None, key=derive_key(seed, epoch, "infile"))
