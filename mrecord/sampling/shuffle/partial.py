"""PARTIAL: file order shuffled, then rows shuffled inside consecutive windows."""

from __future__ import annotations

from mrecord.sampling.order import (
    ComposedOrder,
    Order,
    SegmentOrder,
    WindowedPermutation,
)
from mrecord.sampling.permutation import derive_key
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_option,
    check_seed_epoch,
    file_permutation,
)
from mrecord.sampling.shuffle.block import BlockLayout

__all__ = ["partial_shuffle"]


def partial_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """Shuffle the file order, then the rows inside each window of ``partial_window`` rows.

    Windows are consecutive positions of the file-shuffled sequence (a window may span
    the end of one file and the start of the next), so a row moves at most
    ``partial_window - 1`` places from where the FILES order puts it.
    """
    counts = check_counts(file_row_counts)
    seed, epoch = check_seed_epoch(seed, epoch)
    window = check_option("partial_window", partial_window)
    files = SegmentOrder(counts, file_permutation(len(counts), seed, epoch, "partial-files"))
    windows = WindowedPermutation(len(files), window, derive_key(seed, epoch, "partial-rows"))
    return ComposedOrder(windows, files)
