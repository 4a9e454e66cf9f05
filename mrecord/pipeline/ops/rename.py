"""``rename(input_columns, output_columns)``: rename columns, keeping their order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mrecord.block import Block
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import as_name_list
from mrecord.pipeline.engine.effects import ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["RenameDataset"]


class RenameDataset(Dataset):
    """The node ``dataset.rename(input_columns, output_columns)`` makes."""

    def __init__(
        self,
        child: Dataset,
        input_columns: str | Sequence[str],
        output_columns: str | Sequence[str],
    ) -> None:
        ins = as_name_list(input_columns, "input_columns")
        outs = as_name_list(output_columns, "output_columns")
        if ins is None or outs is None:
            raise WrongTypeError("rename needs input_columns and output_columns")
        if len(ins) != len(outs):
            raise ArgumentError(
                f"input_columns {ins!r} and output_columns {outs!r} must have the same length"
            )
        self.input_columns = ins
        self.output_columns = outs
        super().__init__([child])

    def _mapping(self) -> dict[str, str]:
        return dict(zip(self.input_columns, self.output_columns, strict=True))

    def _validate(self) -> None:
        names = self.children[0]._column_names()
        missing = [c for c in self.input_columns if c not in names]
        if missing:
            raise PipelineError(
                f"{self!r}: input_columns {missing!r} are not in the dataset; "
                f"its columns are {names!r}"
            )
        result = self._column_names()
        if len(set(result)) != len(result):
            raise PipelineError(
                f"{self!r}: renaming gives duplicate column names {result!r}; pick other names"
            )

    def _column_effects(self) -> ColumnEffects:
        pairs = tuple(zip(self.input_columns, self.output_columns, strict=True))
        return ColumnEffects(reads=frozenset(), renames=pairs)

    def _column_names(self) -> list[str]:
        mapping = self._mapping()
        return [mapping.get(n, n) for n in self.children[0]._column_names()]

    def _num_rows(self) -> int | None:
        return self.children[0]._num_rows()

    def _describe(self) -> str:
        ins, outs = self.input_columns, self.output_columns
        return f"Rename(input_columns={ins!r}, output_columns={outs!r})"

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        return [(epoch, rows)]

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        mapping = self._mapping()
        for block in self.children[0]._execute(ctx, epoch):
            cols = {mapping.get(k, k): v for k, v in block.columns.items()}
            yield Block(cols, block.row_ids)
