"""``project(columns)``: keep only some columns, in the given order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mrecord.block import Block
from mrecord.errors import PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import as_name_list, is_hidden
from mrecord.pipeline.engine.effects import ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["ProjectDataset"]


class ProjectDataset(Dataset):
    """The node ``dataset.project(columns)`` makes."""

    def __init__(self, child: Dataset, columns: str | Sequence[str]) -> None:
        names = as_name_list(columns, "columns")
        if names is None:
            raise WrongTypeError("columns must name at least one column, got None")
        self.columns = names
        super().__init__([child])

    def _validate(self) -> None:
        names = self.children[0]._column_names()
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise PipelineError(
                f"{self!r}: columns {missing!r} are not in the dataset; its columns are {names!r}"
            )

    def _column_effects(self) -> ColumnEffects:
        return ColumnEffects(reads=frozenset(), drops=True)

    def _column_names(self) -> list[str]:
        return list(self.columns)

    def _num_rows(self) -> int | None:
        return self.children[0]._num_rows()

    def _describe(self) -> str:
        return f"Project(columns={self.columns!r})"

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        return [(epoch, rows)]

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        for block in self.children[0]._execute(ctx, epoch):
            cols = {name: block.columns[name] for name in self.columns}
            cols.update((k, v) for k, v in block.columns.items() if is_hidden(k))
            yield Block(cols, block.row_ids)
