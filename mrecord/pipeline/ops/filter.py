"""``filter(predicate, input_columns)``: keep the rows the predicate accepts.

The predicate gets the values of ``input_columns`` (default: every column) of one
row and returns a truth value. The number of rows is unknown until the data is
read, so ``get_dataset_size`` runs one pass over a pipeline with a filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord import config
from mrecord.arguments import check_workers
from mrecord.block import Block
from mrecord.errors import OperationError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.chunks import CHUNK_ROWS
from mrecord.pipeline.engine.columns import as_name_list, split_block
from mrecord.pipeline.engine.effects import ColumnEffects
from mrecord.pipeline.engine.owned import owned
from mrecord.pool import ThreadPool, ordered_map

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["FilterDataset"]


class FilterDataset(Dataset):
    """The node ``dataset.filter(...)`` makes."""

    def __init__(
        self,
        child: Dataset,
        predicate: Callable[..., Any],
        input_columns: str | Sequence[str] | None = None,
        num_parallel_workers: int | None = None,
    ) -> None:
        if not callable(predicate):
            raise WrongTypeError(f"predicate must be callable, got {predicate!r}")
        self.predicate = predicate
        self.input_columns = as_name_list(input_columns, "input_columns")
        self.num_parallel_workers = config.workers_or_default(check_workers(num_parallel_workers))
        super().__init__([child])

    def resolved_input_columns(self) -> list[str]:
        """Columns given to the predicate (default: all)."""
        if self.input_columns is not None:
            return list(self.input_columns)
        return self.children[0]._column_names()

    def _validate(self) -> None:
        names = self.children[0]._column_names()
        missing = [c for c in self.resolved_input_columns() if c not in names]
        if missing:
            raise PipelineError(
                f"{self!r}: input_columns {missing!r} are not in the dataset; "
                f"its columns are {names!r}"
            )

    def _column_effects(self) -> ColumnEffects:
        reads = frozenset(self.resolved_input_columns())
        return ColumnEffects(reads=reads, read_by="the predicate of the later")

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        return None

    def _describe(self) -> str:
        cols = "" if self.input_columns is None else f", input_columns={self.input_columns!r}"
        return f"Filter(predicate={self.predicate!r}{cols})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        ins = self.resolved_input_columns()
        predicate = self.predicate
        label = f"filter #{ctx.position(self)} {self!r}"

        def keep(part: Block) -> np.ndarray:
            cols = [part.columns[name] for name in ins]
            mask = np.zeros(len(part), dtype=bool)
            for i in range(len(part)):
                try:
                    mask[i] = bool(predicate(*[col[i] for col in cols]))
                except Exception as exc:
                    raise OperationError(
                        f"{label}: predicate {predicate!r} raised {type(exc).__name__}: {exc} "
                        f"(input column(s) {ins!r}, row id {int(part.row_ids[i])})"
                    ) from exc
            return mask

        workers = self.num_parallel_workers or 1
        name = f"mrecord-filter{ctx.position(self)}"
        pool = ctx.pool(self, lambda: ThreadPool(keep, workers, name))
        blocks = self.children[0]._execute(ctx, epoch)
        parts = (p for b in blocks for p in split_block(b, CHUNK_ROWS))
        for part, mask in ordered_map(pool, parts, max(workers, ctx.prefetch), ctx.stop):
            if mask.all():
                yield part
            elif mask.any():
                kept = part.take(np.flatnonzero(mask))
                # Under half of what was read: rows of their own, not views of the whole
                # read buffers (mrecord.pipeline.engine.owned).
                yield owned(kept) if 2 * len(kept) < len(part) else kept
