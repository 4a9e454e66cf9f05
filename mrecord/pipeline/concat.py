"""``concat`` / ``+``: the rows of several datasets one after the other.

Every child must have the same column names in the same order. Each epoch runs
every child's same epoch in turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mrecord.block import Block
from mrecord.errors import PipelineError
from mrecord.pipeline.dataset import Dataset

if TYPE_CHECKING:
    from mrecord.pipeline.context import ExecContext

__all__ = ["ConcatDataset"]


class ConcatDataset(Dataset):
    """The node ``a + b`` / ``a.concat([b, c])`` makes."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        if len(datasets) < 2:
            raise TypeError(f"concat needs at least two datasets, got {list(datasets)!r}")
        flat: list[Dataset] = []
        for ds in datasets:
            if not isinstance(ds, Dataset):
                raise TypeError(f"concat takes datasets, got {ds!r} ({type(ds).__name__})")
            flat.append(ds)
        super().__init__(flat)

    def _validate(self) -> None:
        first = self.children[0]._column_names()
        for child in self.children[1:]:
            names = child._column_names()
            if names != first:
                raise PipelineError(
                    f"concat needs the same columns in every dataset: {self.children[0]!r} has "
                    f"{first!r} but {child!r} has {names!r}; use project/rename to align them"
                )

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        sizes = [child._num_rows() for child in self.children]
        if any(s is not None and s < 0 for s in sizes):
            return -1
        if any(s is None for s in sizes):
            return None
        return sum(s for s in sizes if s is not None)

    def _describe(self) -> str:
        return f"Concat({len(self.children)} datasets)"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        for child in self.children:
            yield from child._execute(ctx, epoch)
