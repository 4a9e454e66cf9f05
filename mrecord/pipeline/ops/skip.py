"""``skip(count)``: drop the first ``count`` rows of each epoch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from mrecord.arguments import check_count
from mrecord.block import Block
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["SkipDataset"]


class SkipDataset(Dataset):
    """The node ``dataset.skip(count)`` makes."""

    def __init__(self, child: Dataset, count: int) -> None:
        self.count = check_count(count, "count", allow_all=False)
        super().__init__([child])

    def _column_effects(self) -> ColumnEffects:
        return PASS_THROUGH

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        rows = self.children[0]._num_rows()
        return rows if rows is None or rows < 0 else max(rows - self.count, 0)

    def _describe(self) -> str:
        return f"Skip(count={self.count})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        left = self.count
        for block in self.children[0]._execute(ctx, epoch):
            if left >= len(block):
                left -= len(block)
                continue
            yield block.slice(left, len(block)) if left else block
            left = 0
