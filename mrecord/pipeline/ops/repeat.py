"""``repeat``: run the child ``count`` times per epoch (None or -1: forever).

Repetition ``r`` of outer epoch ``e`` runs the child's epoch ``e * count + r``, so
shuffles and random ops differ from one repetition to the next.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from mrecord.block import Block
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["RepeatDataset", "one_pass_sizes"]

_ONE_PASS: ContextVar[bool] = ContextVar("mrecord_repeat_one_pass", default=False)


@contextmanager
def one_pass_sizes() -> Iterator[None]:
    """Within this block an endless ``repeat`` reports its child's size (one pass).

    ``get_dataset_size`` uses it: MindSpore reports one pass of an endlessly repeated
    dataset rather than -1. Internally an endless repeat stays endless (-1).
    """
    token = _ONE_PASS.set(True)
    try:
        yield
    finally:
        _ONE_PASS.reset(token)


class RepeatDataset(Dataset):
    """The node ``dataset.repeat(count)`` makes."""

    def __init__(self, child: Dataset, count: int | None = None) -> None:
        if count is None:
            count = -1
        if isinstance(count, bool) or not isinstance(count, int):
            raise WrongTypeError(f"count must be an int or None, got {count!r}")
        if count == 0 or count < -1:
            raise ArgumentError(f"count must be -1 (forever) or positive, got {count!r}")
        self.count = count
        super().__init__([child])

    def _column_effects(self) -> ColumnEffects:
        return PASS_THROUGH

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        if self.count == -1:
            return self.children[0]._num_rows() if _ONE_PASS.get() else -1
        rows = self.children[0]._num_rows()
        return rows if rows is None or rows < 0 else rows * self.count

    def _describe(self) -> str:
        return f"Repeat(count={self.count})"

    def _split(self, rows: int) -> tuple[int, int]:
        """(repetitions to skip, rows of the next one to skip) for ``rows`` output rows."""
        size = self.children[0]._num_rows()
        if not size or size < 0:
            raise PipelineError(
                f"{self!r} cannot resume mid-epoch: its input's size is unknown ({size!r})"
            )
        return divmod(rows, size)

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        first, within = self._split(rows)
        base = 0 if self.count == -1 else epoch * self.count
        return [(base + first, within)]

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        child = self.children[0]
        skip = ctx.take_resume(self, epoch)
        first = self._split(skip)[0] if skip else 0
        if self.count == -1:
            for r in itertools.count(first):
                yield from child._execute(ctx, r)
            return
        for r in range(first, self.count):
            yield from child._execute(ctx, epoch * self.count + r)
