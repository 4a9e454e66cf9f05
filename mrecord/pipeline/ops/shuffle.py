"""``shuffle(buffer_size)``: shuffle rows through a buffer, reshuffled every epoch.

MindSpore's shuffle buffer, done a piece at a time: once the buffer holds
``buffer_size`` rows, each incoming piece of ``m <= buffer_size`` rows sends ``m``
randomly chosen buffered rows out and takes their slots; at the end the buffer
leaves in random order. As in MindSpore a row leaves at most ``buffer_size``
positions before its input position. Randomness comes from (config seed, epoch,
node position): reproducible.
``buffer_size`` >= the dataset size gives a uniform shuffle.

Unlike MindSpore, a buffer that cannot fit is refused (:class:`~mrecord.errors.ArgumentError`
naming the rows that would fit) as soon as that is known: at the first rows where the
dataset's size is known, else once the buffer holds more than a ``BUFFER_BUDGET_SHARE``-th
of the memory budget. ``shuffle(buffer_size=10000)``, as MindSpore's tutorials write it,
over 100 KB images in a 300 MB memory group filled memory until the process was killed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from mrecord.block import Block, block_nbytes
from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import split_block
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects
from mrecord.pipeline.engine.owned import owned

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["BUFFER_BUDGET_SHARE", "ShuffleDataset"]

BUFFER_BUDGET_SHARE = 2
"""A shuffle buffer may hold up to ``1 / BUFFER_BUDGET_SHARE`` of the memory budget: the
rest is the reader's read-ahead and the pipeline's queues (an eighth each,
``mrecord.pipeline.engine.context.PREFETCH_BUDGET_SHARE``) and the consumer's."""


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
        fits = _BufferFits(self, ctx.memory_budget)
        buf: Block | None = None
        for block in self.children[0]._execute(ctx, epoch):
            for piece in split_block(_owned(block, size, fits.limit), size):
                if buf is None:
                    fits.check(piece, 0)
                    buf = piece.take(np.arange(len(piece)))  # own copy: slots are written
                    continue
                room = size - len(buf)
                if room:
                    fits.check(piece, len(buf))
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


class _BufferFits:
    """Whether a shuffle buffer fits a ``BUFFER_BUDGET_SHARE``-th of the memory budget, its
    bytes a row measured on the first rows (see the module docstring)."""

    def __init__(self, node: ShuffleDataset, budget: int | None) -> None:
        self._node = node
        self.limit = None if budget is None else budget // BUFFER_BUDGET_SHARE
        """What the buffer may hold (None: no budget known)."""
        self._row_bytes = 0.0
        total = node._num_rows()
        self._full = node.buffer_size if total is None else min(node.buffer_size, total)
        self._known = total is not None

    def check(self, piece: Block, held: int) -> None:
        """Raise :class:`~mrecord.errors.ArgumentError` when the buffer, holding ``held``
        rows and taking ``piece``, cannot fit (or will not, where the rows are counted)."""
        if self.limit is None or not len(piece):
            return
        if not self._row_bytes:
            self._row_bytes = block_nbytes(piece) / len(piece)
        rows = self._full if self._known else min(self._full, held + len(piece))
        if rows * self._row_bytes <= self.limit:
            return
        size = self._node.buffer_size
        most = int(self.limit // max(1.0, self._row_bytes))
        raise ArgumentError(
            f"shuffle(buffer_size={size}) cannot fit in memory: {self._full} rows of about "
            f"{self._row_bytes:,.0f} bytes are {self._full * self._row_bytes / 2**20:,.0f} "
            f"MiB, more than 1/{BUFFER_BUDGET_SHARE} of the memory this process may fill "
            f"({self.limit * BUFFER_BUDGET_SHARE / 2**20:,.0f} MiB). Give a buffer_size of "
            f"at most {most} rows, or shuffle in the source (MindDataset(shuffle=True) "
            "orders rows at no memory cost)"
        )


def _owned(block: Block, buffer_rows: int, limit: int | None) -> Block:
    """``block`` with the values that view a larger buffer copied (:func:`owned`), where
    the buffers a shuffle buffer of ``buffer_rows`` rows would keep alive could pass
    ``limit`` bytes (:func:`_kept_bytes`). Where they fit, the values stay views: the
    copies made a warm shuffle of images 1.35x slower."""
    if limit is None:
        return block
    return owned(block, lambda value, buffer: _kept_bytes(value, buffer, buffer_rows) > limit)


def _kept_bytes(value: np.ndarray, buffer: int, buffer_rows: int) -> float:
    """About the bytes of read buffers like ``value``'s (``buffer`` bytes) that a shuffle
    buffer of ``buffer_rows`` such rows keeps alive: rows enter a buffer's worth at a time
    and leave at random, so a buffer is let go of once its last row left, about
    ``ln(rows a buffer) + 1`` buffers' worth of rows later."""
    per_buffer = buffer / int(value.nbytes)
    buffers = buffer_rows / per_buffer * (math.log(per_buffer) + 1)
    return min(float(buffer_rows), buffers) * buffer


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
