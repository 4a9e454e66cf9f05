"""``zip``: rows of several datasets side by side; stops with the shortest.

Column names must not repeat across the children. Blocks of different sizes are
aligned row by row; the row ids are those of the first dataset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mrecord.block import Block, ColumnValues
from mrecord.errors import PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.context import close_iterator
from mrecord.pipeline.engine.effects import ColumnEffects

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["ZipDataset", "zip"]


def zip(datasets: Sequence[Dataset]) -> ZipDataset:  # MindSpore's name (shadows the builtin here)
    """Zip ``datasets`` (a tuple of at least two) into one (``mindspore.dataset.zip``)."""
    return ZipDataset(list(datasets))


class ZipDataset(Dataset):
    """The node ``a.zip(b)`` / ``zip((a, b))`` makes."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        if len(datasets) < 2:
            raise WrongTypeError(f"zip needs at least two datasets, got {list(datasets)!r}")
        super().__init__(list(datasets))

    def _validate(self) -> None:
        seen: dict[str, Dataset] = {}
        for child in self.children:
            for name in child._column_names():
                if name in seen:
                    raise PipelineError(
                        f"Invalid data, duplicate column names are not allowed in zip: {name!r} "
                        f"is in {seen[name]!r} and in {child!r}; rename one of them first"
                    )
                seen[name] = child

    def _column_effects(self) -> ColumnEffects:
        return ColumnEffects(joins=True)

    def _column_names(self) -> list[str]:
        return [name for child in self.children for name in child._column_names()]

    def _num_rows(self) -> int | None:
        sizes = [child._num_rows() for child in self.children]
        finite = [s for s in sizes if s is not None and s >= 0]
        if finite and min(finite) == 0:
            return 0
        if any(s is None for s in sizes):
            return None
        return min(finite) if finite else -1

    def _describe(self) -> str:
        return f"Zip({len(self.children)} datasets)"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        gens = [child._execute(ctx, epoch) for child in self.children]
        pending: list[Block | None] = [None] * len(gens)
        try:
            while True:
                for i, gen in enumerate(gens):
                    current = pending[i]
                    if current is None or len(current) == 0:
                        nxt = next(gen, None)
                        if nxt is None:
                            return
                        pending[i] = nxt
                parts = [p for p in pending if p is not None]
                n = min(len(p) for p in parts)
                cols: dict[str, ColumnValues] = {}
                for part in parts:
                    cols.update(part.slice(0, n).columns)
                yield Block(cols, parts[0].row_ids[:n])
                pending = [p.slice(n, len(p)) for p in parts]
        finally:
            for gen in gens:
                close_iterator(gen)
