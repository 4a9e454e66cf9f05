"""``batch``: group consecutive rows into batches, each column stacked into one array.

A batch leaves the node as one row of a block, its values the stacked arrays
(shape ``(batch, *shape)``): without a ``per_batch_map`` and with a fixed size, every
batch an input block completes goes in one block when all its columns are arrays (a
``(k, batch, *shape)`` array, each batch a view of it), else a block a batch.
``per_batch_map(col1_rows, col2_rows, ...,
batch_info)`` receives each input column as a list of row values and returns a
tuple of per-column sequences; it runs on a thread pool of
``num_parallel_workers`` threads, batches kept in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord import config
from mrecord.arguments import check_workers
from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, OperationError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import as_name_list, batch_column, map_column_order
from mrecord.pipeline.engine.effects import ColumnEffects
from mrecord.pool import ThreadPool, ordered_map

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["BatchDataset", "BatchInfo"]


@dataclass(frozen=True)
class BatchInfo:
    """What ``per_batch_map`` learns about the batch (MindSpore's ``BatchInfo``)."""

    batch_num: int
    epoch_num: int

    def get_batch_num(self) -> int:
        """Index of this batch within the epoch."""
        return self.batch_num

    def get_epoch_num(self) -> int:
        """The epoch (0, 1, ...)."""
        return self.epoch_num


class BatchDataset(Dataset):
    """The node ``dataset.batch(...)`` makes (see :meth:`Dataset.batch`)."""

    def __init__(
        self,
        child: Dataset,
        batch_size: int | Callable[[BatchInfo], int],
        drop_remainder: bool = False,
        num_parallel_workers: int | None = None,
        per_batch_map: Callable[..., Any] | None = None,
        input_columns: str | Sequence[str] | None = None,
        output_columns: str | Sequence[str] | None = None,
    ) -> None:
        self.size_fn: Callable[[BatchInfo], int] | None = (
            batch_size if callable(batch_size) else None
        )
        if not isinstance(drop_remainder, bool):
            raise WrongTypeError(f"drop_remainder must be a bool, got {drop_remainder!r}")
        if per_batch_map is not None and not callable(per_batch_map):
            raise WrongTypeError(f"per_batch_map must be callable, got {per_batch_map!r}")
        # with a size function, 1 stands for "varies" (get_batch_size)
        self.batch_size = 1 if callable(batch_size) else _check_batch_size(batch_size)
        self.drop_remainder = drop_remainder
        self.num_parallel_workers = config.workers_or_default(check_workers(num_parallel_workers))
        self.per_batch_map = per_batch_map
        self.input_columns = as_name_list(input_columns, "input_columns")
        self.output_columns = as_name_list(output_columns, "output_columns")
        if per_batch_map is None and (input_columns is not None or output_columns is not None):
            raise ArgumentError("input_columns and output_columns of batch need a per_batch_map")
        super().__init__([child])

    @property
    def child(self) -> Dataset:
        """The input node."""
        return self.children[0]

    def resolved_input_columns(self) -> list[str]:
        """Columns passed to ``per_batch_map`` (default: all)."""
        if self.input_columns is not None:
            return list(self.input_columns)
        return self.child._column_names()

    def _outputs(self) -> list[str]:
        return list(self.output_columns or self.resolved_input_columns())

    def _validate(self) -> None:
        names = self.child._column_names()
        missing = [c for c in self.resolved_input_columns() if c not in names]
        if missing:
            raise PipelineError(
                f"{self!r}: input_columns {missing!r} not in the dataset; its columns are {names!r}"
            )

    def _column_effects(self) -> ColumnEffects:
        reads = frozenset(self.resolved_input_columns()) if self.per_batch_map else frozenset()
        return ColumnEffects(
            reads=reads, read_by="the per_batch_map of the later", batch_level=True
        )

    def _column_names(self) -> list[str]:
        names = self.child._column_names()
        if self.per_batch_map is None:
            return names
        return map_column_order(names, self.resolved_input_columns(), self._outputs())

    def _num_rows(self) -> int | None:
        rows = self.child._num_rows()
        if rows is None or rows < 0:
            return rows
        if self.size_fn is not None:
            return None  # each batch's size is only known when it is made
        full, rest = divmod(rows, self.batch_size)
        return full + (1 if rest and not self.drop_remainder else 0)

    def _describe(self) -> str:
        size = self.size_fn if self.size_fn is not None else self.batch_size
        parts = [f"batch_size={size!r}", f"drop_remainder={self.drop_remainder}"]
        if self.per_batch_map is not None:
            parts.append(f"per_batch_map={self.per_batch_map!r}")
        if self.input_columns is not None:
            parts.append(f"input_columns={self.input_columns!r}")
        if self.output_columns is not None:
            parts.append(f"output_columns={self.output_columns!r}")
        return f"Batch({', '.join(parts)})"

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        return [(epoch, rows * self.batch_size)]

    def _batches(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        """Blocks of exactly ``batch_size`` rows (the last one shorter unless dropped)."""
        for rows, k in self._batch_runs(ctx, epoch):
            size = len(rows) // k
            for i in range(k):
                yield rows if k == 1 else rows.slice(i * size, (i + 1) * size)

    def _size_of(self, number: int, epoch: int) -> int:
        """The size of batch ``number``: fixed, or the callable's answer."""
        if self.size_fn is None:
            return self.batch_size
        try:
            size = self.size_fn(BatchInfo(number, epoch))
        except Exception as exc:
            raise OperationError(
                f"{self!r}: batch_size function {self.size_fn!r} raised "
                f"{type(exc).__name__}: {exc} (batch {number})"
            ) from exc
        return _check_batch_size(size)

    def _batch_runs(self, ctx: ExecContext, epoch: int) -> Iterator[tuple[Block, int]]:
        """``(rows, k)``: ``k`` batches one after another in ``rows``. With a fixed size,
        every whole batch an input block completes at once; with a size function one
        batch at a time (the function asked for the next size after each is handed on);
        then the shorter last batch (``k`` 1) unless dropped."""
        pending: list[Block] = []
        count = 0
        made = 0
        size = self._size_of(0, ctx.epoch)
        for block in self.child._execute(ctx, epoch):
            if pending and count + len(block) >= size:
                # The leftover rows' batch completed by the block's first rows alone:
                # joining the whole block to them copied every row of it (4 MiB reads
                # of small rows: ~12% of the prefetch thread in a Shuffle.BLOCK epoch).
                need = size - count
                yield Block.concat([*pending, block.slice(0, need)]), 1
                made += 1
                size = self._size_of(made, ctx.epoch)
                block = block.slice(need, len(block))
                pending, count = [], 0
            pending.append(block)
            count += len(block)
            if count < size:
                continue
            rows = Block.concat(pending)
            start = 0
            while count - start >= size:
                k = (count - start) // size if self.size_fn is None else 1
                yield rows.slice(start, start + k * size), k
                start += k * size
                made += k
                size = self._size_of(made, ctx.epoch)
            pending = [rows.slice(start, count)] if start < count else []
            count -= start
        if count and not self.drop_remainder:
            yield Block.concat(pending), 1

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        first = ctx.take_resume(self, epoch)  # batch number BatchInfo starts at
        if self.per_batch_map is None and self.size_fn is None:
            # A block of every batch an input block completes, where the columns allow
            # (fixed-shape arrays: each batch a view, as one batch a block gives): one
            # block a batch cost the iterator and the queues between nodes ~40 us a
            # batch, a third of the main thread's time over 256-row batches of small
            # rows (8M tabular rows at 1.9M rows/s).
            for rows, k in self._batch_runs(ctx, epoch):
                yield from _stack_run(rows, k)
            return
        if self.per_batch_map is None:
            for rows in self._batches(ctx, epoch):
                yield _stack(rows.columns, rows)
            return
        ins, outs = self.resolved_input_columns(), self._outputs()
        fn = self.per_batch_map
        label = f"batch #{ctx.position(self)} {self!r}"

        def run(task: tuple[int, int, Block]) -> Block:
            number, outer_epoch, rows = task
            args = [list(rows.columns[name]) for name in ins]
            try:
                result = fn(*args, BatchInfo(number, outer_epoch))
            except Exception as exc:
                raise OperationError(
                    f"{label}: per_batch_map {fn!r} raised {type(exc).__name__}: {exc} "
                    f"(input column(s) {ins!r}, batch {number} of epoch {epoch})"
                ) from exc
            values = list(result) if isinstance(result, tuple) else [result]
            if len(values) != len(outs):
                raise PipelineError(
                    f"{label}: per_batch_map returned {len(values)} column(s), "
                    f"output_columns has {len(outs)} ({outs!r}); return a tuple, one per column"
                )
            cols = dict(rows.columns)
            order = map_column_order(list(cols), ins, outs)
            for name in ins:
                del cols[name]
            cols.update(zip(outs, values, strict=True))
            return _stack({name: cols[name] for name in order}, rows)

        workers = self.num_parallel_workers or 1
        name = f"mrecord-batch{ctx.position(self)}"
        pool = ctx.pool(self, lambda: ThreadPool(run, workers, name))
        # The pool (and so ``run``) outlives this epoch: the epoch travels with each task.
        outer = ctx.epoch
        numbered = (
            (n, outer, rows) for n, rows in enumerate(self._batches(ctx, epoch), start=first)
        )
        for _task, batch in ordered_map(pool, numbered, max(workers, ctx.prefetch), ctx.stop):
            yield batch


def _check_batch_size(batch_size: object) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise WrongTypeError(f"batch_size must be an int, got {batch_size!r}")
    if not 1 <= batch_size <= 2**31 - 1:
        raise ArgumentError(f"batch_size must be in [1, 2147483647], got {batch_size!r}")
    return batch_size


def _stack_run(rows: Block, k: int) -> Iterator[Block]:
    """``k`` batches of equal size, one after another in ``rows``: one block of ``k``
    rows where every column is an array (each batch a view of it, ``(k, size, *shape)``),
    else a block a batch (:func:`_stack` checks and stacks each)."""
    size = len(rows) // k
    arrays = {name: v for name, v in rows.columns.items() if type(v) is np.ndarray}
    if k == 1 or len(arrays) < len(rows.columns):
        for i in range(k):
            batch = rows.slice(i * size, (i + 1) * size)
            yield _stack(batch.columns, batch)
        return
    columns: dict[str, ColumnValues] = {
        name: values.reshape((k, size, *values.shape[1:])) for name, values in arrays.items()
    }
    yield Block(columns, rows.row_ids[::size].copy())


def _stack(columns: dict[str, Any], rows: Block) -> Block:
    """One batch as a block of one row: every column stacked."""
    stacked: dict[str, ColumnValues] = {}
    for name, values in columns.items():
        seq = values if isinstance(values, (np.ndarray, list)) else list(values)
        stacked[name] = batch_column(seq, name)[None]
    first = rows.row_ids[:1] if len(rows.row_ids) else np.full(1, -1, dtype=np.int64)
    return Block(stacked, first)
