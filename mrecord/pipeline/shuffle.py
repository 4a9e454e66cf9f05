"""``shuffle(buffer_size)``: shuffle rows through a buffer, reshuffled every epoch.

Same idea as MindSpore's shuffle buffer, done per block: once the buffer holds
``buffer_size`` rows, an incoming block of ``m`` rows sends ``m`` randomly chosen
buffered rows out and takes their slots; at the end the buffer leaves in random
order. Randomness comes from (config seed, epoch, node position): reproducible.
``buffer_size`` >= the dataset size gives a uniform shuffle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from mrecord.block import Block
from mrecord.pipeline.dataset import Dataset

if TYPE_CHECKING:
    from mrecord.pipeline.context import ExecContext

__all__ = ["ShuffleDataset"]


class ShuffleDataset(Dataset):
    """The node ``dataset.shuffle(buffer_size)`` makes."""

    def __init__(self, child: Dataset, buffer_size: int) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise TypeError(f"buffer_size must be an int, got {buffer_size!r}")
        if not 2 <= buffer_size <= 2**31 - 1:
            raise ValueError(f"buffer_size must be in [2, 2147483647], got {buffer_size!r}")
        self.buffer_size = buffer_size
        super().__init__([child])

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
            if buf is None:
                buf = block.take(np.arange(len(block)))  # own copy: slots are written below
                both = buf
            elif len(buf) + len(block) <= size:
                buf = Block.concat([buf, block])
                continue
            elif len(buf) == size and len(block) <= size and _writable(buf, block):
                slots = rng.choice(size, len(block), replace=False)
                out = buf.take(slots)
                _assign(buf, slots, block)
                yield out
                continue
            else:
                both = Block.concat([buf, block])
            if len(both) > size:
                perm = rng.permutation(len(both))
                cut = len(both) - size
                yield both.take(perm[:cut])
                buf = both.take(perm[cut:])
        if buf is not None and len(buf):
            yield buf.take(rng.permutation(len(buf)))


def _writable(buf: Block, block: Block) -> bool:
    """Whether ``block``'s rows can be written into ``buf``'s slots column by column."""
    for name, values in buf.columns.items():
        incoming = block.columns[name]
        if isinstance(values, np.ndarray) and not (
            isinstance(incoming, np.ndarray)
            and incoming.dtype == values.dtype
            and incoming.shape[1:] == values.shape[1:]
        ):
            return False
    return True


def _assign(buf: Block, slots: np.ndarray, block: Block) -> None:
    for name, values in buf.columns.items():
        incoming = block.columns[name]
        if isinstance(values, np.ndarray):
            values[slots] = incoming
        else:
            for slot, value in zip(slots.tolist(), incoming, strict=True):
                values[slot] = value
    buf.row_ids[slots] = block.row_ids
