"""``take(count)``: the first ``count`` rows of each epoch (-1: all)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from mrecord.arguments import check_count
from mrecord.block import Block
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.context import close_iterator
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["TakeDataset"]


class TakeDataset(Dataset):
    """The node ``dataset.take(count)`` makes."""

    def __init__(self, child: Dataset, count: int = -1) -> None:
        self.count = check_count(count, "count", allow_all=True)
        super().__init__([child])

    def _column_effects(self) -> ColumnEffects:
        return PASS_THROUGH

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        rows = self.children[0]._num_rows()
        if self.count == -1:
            return rows
        if rows is None:
            return None
        return self.count if rows < 0 else min(rows, self.count)

    def _describe(self) -> str:
        return f"Take(count={self.count})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        child = self.children[0]._execute(ctx, epoch)
        if self.count == -1:
            yield from child
            return
        left = self.count
        try:
            for block in child:
                if len(block) >= left:
                    yield block.slice(0, left)
                    return
                left -= len(block)
                yield block
        finally:
            close_iterator(child)
