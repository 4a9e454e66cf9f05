"""GLOBAL: a full shuffle of every row, reseeded each epoch, in O(1) memory."""

from __future__ import annotations

from mrecord.sampling.order import Order, PermutationOrder
from mrecord.sampling.permutation import derive_key
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_seed_epoch,
)
from mrecord.sampling.shuffle.block import BlockLayout

__all__ = ["global_shuffle"]


def global_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """Every row of every file in one pseudorandom order (a keyed permutation).

    The permutation is never materialized: 100,000,000 rows cost a few hundred
    bytes, where MindSpore holds the whole order in memory. ``partial_window``,
    ``adaptive_threshold`` and ``layout`` are accepted for a uniform signature and ignored.
    """
    counts = check_counts(file_row_counts)
    seed, epoch = check_seed_epoch(seed, epoch)
    return PermutationOrder(int(counts.sum()), derive_key(seed, epoch, "global"))
