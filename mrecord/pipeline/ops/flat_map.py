"""``flat_map``: each row becomes the rows of the dataset ``func(*row)`` returns.

The inner datasets run in nested pipelines, one after another, in row order. The
columns are those of the first inner dataset (found by running ``func`` on the first
row when the pipeline is built); every inner dataset must have them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from mrecord.block import Block
from mrecord.errors import OperationError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import to_numpy

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["FlatMapDataset"]


class FlatMapDataset(Dataset):
    """The node ``dataset.flat_map(func)`` makes."""

    def __init__(self, child: Dataset, func: Callable[..., Dataset]) -> None:
        if not callable(func):
            raise WrongTypeError(f"flat_map needs a callable, got {func!r}")
        self.func = func
        self._names: list[str] | None = None
        super().__init__([child])

    def _inner(self, values: list[Any]) -> Dataset:
        try:
            inner = self.func(*values)
        except Exception as exc:
            raise OperationError(
                f"{self!r}: func {self.func!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(inner, Dataset):
            raise PipelineError(
                f"{self!r}: func must return a Dataset, got {type(inner).__name__}"
            )
        return inner

    def _rows(self, block: Block) -> Iterator[list[Any]]:
        names = self.children[0]._column_names()
        cols = [block.columns[name] for name in names]
        for i in range(len(block)):
            yield [to_numpy(col[i]) for col in cols]

    def _column_names(self) -> list[str]:
        if self._names is None:
            from mrecord.pipeline.engine.iterator import BlockIterator

            with BlockIterator(self.children[0], num_epochs=1) as blocks:
                for block in blocks:
                    for values in self._rows(block):
                        self._names = self._inner(values).get_col_names()
                        return list(self._names)
            self._names = self.children[0]._column_names()
        return list(self._names)

    def _num_rows(self) -> int | None:
        return None  # known only by running every inner dataset

    def _describe(self) -> str:
        return f"FlatMap(func={self.func!r})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        from mrecord.pipeline.engine.iterator import BlockIterator

        names = self._column_names()
        for block in self.children[0]._execute(ctx, epoch):
            for values in self._rows(block):
                inner = self._inner(values)
                if inner.get_col_names() != names:
                    raise PipelineError(
                        f"{self!r}: an inner dataset has columns {inner.get_col_names()!r}, "
                        f"the first had {names!r}"
                    )
                with BlockIterator(inner, num_epochs=1) as blocks:
                    for inner_block in blocks:
                        ctx.check_stop()
                        yield inner_block
