"""The shuffle modes: a registry of pure functions ``(file_row_counts, seed, epoch) -> Order``.

Each algorithm lives in its own module and has the signature of :class:`ShuffleFn`::

    order = SHUFFLES["global"]([1000, 1000, 500], seed=5489, epoch=0)
    order.take(np.arange(8))          # the first 8 global row ids of this epoch

The same ``(file_row_counts, seed, epoch)`` always gives the same order, on every rank;
the next epoch gives another one (keys come from a hash of ``(seed, epoch)``).

=========  =================================================================
mode       order
=========  =================================================================
GLOBAL     every row in one pseudorandom order (keyed permutation, O(1) memory)
PARTIAL    file order shuffled, then rows shuffled inside windows of
           ``partial_window`` consecutive rows (default 1,000,000)
FILES      file order shuffled, rows inside each file in order
INFILE     file order kept, rows inside each file shuffled
ADAPTIVE   GLOBAL up to ``adaptive_threshold`` rows (default 100,000,000), else PARTIAL;
           BLOCK when the caller measured slow storage (``layout.adaptive``)
BLOCK      page-aligned blocks in a shuffled order, rows mixed across a window of
           ``window_blocks`` blocks (``block.py``): for low-IOPS storage
=========  =================================================================

``layout`` (a :class:`~mrecord.sampling.shuffle.block.BlockLayout`: page boundaries and
block/window sizes) is read by BLOCK and ADAPTIVE and ignored by the other modes.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from mrecord.errors import UnknownNameError, WrongTypeError
from mrecord.sampling.order import Order, RangeOrder
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
)
from mrecord.sampling.shuffle.adaptive import adaptive_shuffle
from mrecord.sampling.shuffle.block import BlockLayout, block_shuffle
from mrecord.sampling.shuffle.files import files_shuffle
from mrecord.sampling.shuffle.global_shuffle import global_shuffle
from mrecord.sampling.shuffle.infile import infile_shuffle
from mrecord.sampling.shuffle.partial import partial_shuffle

__all__ = [
    "DEFAULT_ADAPTIVE_THRESHOLD",
    "DEFAULT_PARTIAL_WINDOW",
    "SHUFFLES",
    "BlockLayout",
    "Shuffle",
    "ShuffleFn",
    "adaptive_shuffle",
    "block_shuffle",
    "files_shuffle",
    "get_shuffle",
    "global_shuffle",
    "infile_shuffle",
    "parse_shuffle",
    "partial_shuffle",
    "shuffle_order",
]


class Shuffle(str, Enum):
    """Shuffle modes, named and valued as ``mindspore.dataset.Shuffle``.

    ``FALSE`` means no shuffle (the same as ``shuffle=False``); it has no algorithm.
    ``BLOCK`` is mrecord's own (MindSpore has no such mode).
    """

    FALSE = "false"
    ADAPTIVE = "adaptive"
    GLOBAL = "global"
    PARTIAL = "partial"
    FILES = "files"
    INFILE = "infile"
    BLOCK = "block"


class ShuffleFn(Protocol):
    """The signature every registered shuffle algorithm has."""

    def __call__(
        self,
        file_row_counts: Counts,
        seed: int,
        epoch: int,
        *,
        partial_window: int = ...,
        adaptive_threshold: int = ...,
        layout: BlockLayout | None = ...,
    ) -> Order:
        """Return this epoch's order of the global row ids."""
        ...


SHUFFLES: dict[str, ShuffleFn] = {
    Shuffle.GLOBAL.value: global_shuffle,
    Shuffle.PARTIAL.value: partial_shuffle,
    Shuffle.FILES.value: files_shuffle,
    Shuffle.INFILE.value: infile_shuffle,
    Shuffle.ADAPTIVE.value: adaptive_shuffle,
    Shuffle.BLOCK.value: block_shuffle,
}
"""Shuffle algorithms by :class:`Shuffle` value."""

_TYPE_MESSAGE = (
    "shuffle must be of boolean or enum of 'Shuffle' values like 'Shuffle.GLOBAL' or "
    "'Shuffle.FILES' or 'Shuffle.INFILE'."
)


def parse_shuffle(shuffle: object) -> Shuffle | None:
    """Map a ``shuffle=`` argument to a mode: True -> GLOBAL, False or Shuffle.FALSE -> None
    (no shuffle),
    None -> ADAPTIVE, a :class:`Shuffle` -> itself.

    Raises TypeError (MindSpore's message) for anything else.
    """
    if shuffle is None:
        return Shuffle.ADAPTIVE
    if isinstance(shuffle, bool):
        return Shuffle.GLOBAL if shuffle else None
    if shuffle is Shuffle.FALSE:
        return None
    if isinstance(shuffle, Shuffle):
        return shuffle
    raise WrongTypeError(f"{_TYPE_MESSAGE} Got {shuffle!r}.")


def get_shuffle(name: str | Shuffle) -> ShuffleFn:
    """The registered algorithm for ``name`` (a :class:`Shuffle` or its value)."""
    key = name.value if isinstance(name, Shuffle) else name
    try:
        return SHUFFLES[key]
    except KeyError:
        raise UnknownNameError(
            f"unknown shuffle mode {name!r}; known modes: {sorted(SHUFFLES)!r}"
        ) from None


def shuffle_order(
    mode: Shuffle | None,
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """This epoch's order for ``mode``; ``None`` (or ``Shuffle.FALSE``) is no shuffle."""
    if mode is None or mode is Shuffle.FALSE:
        return RangeOrder(0, int(check_counts(file_row_counts).sum()))
    return get_shuffle(mode)(
        file_row_counts,
        seed,
        epoch,
        partial_window=partial_window,
        adaptive_threshold=adaptive_threshold,
        layout=layout,
    )
