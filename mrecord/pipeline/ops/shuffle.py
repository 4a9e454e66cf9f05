"""``shuffle(buffer_size)``: shuffle rows through a buffer, reshuffled every epoch.

MindSpore's shuffle buffer, done a piece at a time: once the buffer holds
``buffer_size`` rows, each incoming piece of ``m <= buffer_size`` rows sends ``m``
randomly chosen buffered rows out and takes their slots; at the end the buffer
leaves in random order. As in MindSpore a row leaves at most ``buffer_size``
positions before its input position. Randomness comes from (config seed, epoch,
node position): reproducible.
``buffer_size`` >= the dataset size gives a uniform shuffle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import split_block
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["ShuffleDataset"]


class ShuffleDataset(Dataset):
    """The node ``dataset.shuffle(buffer_size)`` makes."""

    def __init__(self, child: Dataset, buffer_size: int) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise WrongTypeError(f"buffer_size must be an int, got {buffer_size!r}")
        if not 2 <= buffer_size <= 2**31 - 1:
            raise ArgumentError(f"buffer_size must be in [2, 2147483647], got {buffer_size!r}")
        self.buffer_size = buffer_size
        super().__init__([child])

    def _column_effects(self) -> ColumnEffects:
        return PASS_THROUGH

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        return self.children[0]._num_rows()

    def _describe(self) -> str:
        return f"Shuffle(buffer_size={self.buffer_size})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        rng = np.random.default_rng([ctx.seed, epoch, ctx.position(self)])
        size = self.buffer_size
        buf: Block | None = None
        for block in self.children[0]._execute(ctx, epoch):
            for piece in split_block(block, size):
                if buf is None:
                    buf = piece.take(np.arange(len(piece)))  # own copy: slots are written
                    continue
                room = size - len(buf)
                if room:
                    buf = Block.concat([buf, piece.slice(0, min(room, len(piece)))])
                    piece = piece.slice(min(room, len(piece)), len(piece))
                    if not len(piece):
                        continue
                slots = rng.choice(size, len(piece), replace=False)
                out = buf.take(slots)
                _assign(buf, slots, piece)
                yield out
        if buf is not None and len(buf):
            yield buf.take(rng.permutation(len(buf)))


def _assign(buf: Block, slots: np.ndarray, piece: Block) -> None:
    """Write ``piece``'s rows into ``buf``'s ``slots`` (a column becomes a list if needed)."""
    for name, values in buf.columns.items():
        incoming = piece.columns[name]
        if isinstance(values, np.ndarray):
            if (
                isinstance(incoming, np.ndarray)
                and incoming.dtype == values.dtype
                and incoming.shape[1:] == values.shape[1:]
            ):
                values[slots] = incoming
                continue
            values = list(values)
            buf.columns[name] = values
        for slot, value in zip(slots.tolist(), incoming, strict=True):
            values[slot] = value
    buf.row_ids[slots] = piece.row_ids
