"""``map``: apply operations to some columns, row by row, on worker threads or processes.

The input is cut into chunks of :data:`~mrecord.pipeline.engine.chunks.CHUNK_ROWS` rows
(across the input's block boundaries, see :func:`~mrecord.pipeline.engine.chunks.rechunk`);
chunks go to the worker pool (threads by default, spawned processes with
``python_multiprocessing=True``) with a window of ``max(workers, prefetch)`` chunks
in flight, fewer once the chunks' results are seen to weigh more than the run's
``prefetch_bytes`` together (never fewer than the workers); results come back in input
order. Each row's seed key comes from
(config seed, epoch, this node's position, the row's position in this map's input),
so random ops give the same output with any number of workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord import config
from mrecord.arguments import check_workers
from mrecord.block import Block, ColumnValues, block_nbytes
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.chunks import CHUNK_ROWS, rechunk
from mrecord.pipeline.engine.columns import as_name_list, map_column_order
from mrecord.pipeline.engine.effects import ColumnEffects
from mrecord.pipeline.engine.op_chain import ChainSpec
from mrecord.pipeline.engine.seeds import row_keys
from mrecord.pipeline.engine.workers import ProcessPool
from mrecord.pool import ThreadPool, ordered_map

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["MapDataset"]


class MapDataset(Dataset):
    """The node ``dataset.map(...)`` makes (see :meth:`Dataset.map`)."""

    def __init__(
        self,
        child: Dataset,
        operations: Any,
        input_columns: str | Sequence[str] | None = None,
        output_columns: str | Sequence[str] | None = None,
        num_parallel_workers: int | None = None,
        python_multiprocessing: bool = False,
        offload: bool | None = None,
    ) -> None:
        ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        if not ops:
            raise ArgumentError("operations must hold at least one operation, got []")
        for op in ops:
            if not callable(op):
                raise WrongTypeError(f"operations must be callables, got {op!r}")
        if offload is not None and not isinstance(offload, bool):
            raise WrongTypeError(f"offload must be a bool or None, got {offload!r}")
        self.operations: list[Any] = ops
        self.input_columns = as_name_list(input_columns, "input_columns")
        self.output_columns = as_name_list(output_columns, "output_columns")
        self.num_parallel_workers = config.workers_or_default(check_workers(num_parallel_workers))
        self.python_multiprocessing = bool(python_multiprocessing)
        self.offload = offload
        super().__init__([child])

    @property
    def child(self) -> Dataset:
        """The input node."""
        return self.children[0]

    def resolved_input_columns(self) -> list[str]:
        """The input columns (default: the first column, as MindSpore)."""
        if self.input_columns is not None:
            return list(self.input_columns)
        names = self.child._column_names()
        return names[:1]

    def resolved_output_columns(self) -> list[str]:
        """The output columns (default: the input columns)."""
        return list(self.output_columns or self.resolved_input_columns())

    def _validate(self) -> None:
        names = self.child._column_names()
        ins = self.resolved_input_columns()
        missing = [c for c in ins if c not in names]
        if missing or not ins:
            raise PipelineError(
                f"{self!r}: input_columns {missing or ins!r} not in the dataset; "
                f"its columns are {names!r}"
            )
        outs = self.resolved_output_columns()
        clash = [c for c in outs if c in names and c not in ins]
        if clash:
            raise PipelineError(
                f"{self!r}: output_columns {clash!r} would duplicate existing columns "
                f"{names!r}; pick other names or list them in input_columns"
            )

    def _column_effects(self) -> ColumnEffects:
        reads = frozenset(self.resolved_input_columns())
        return ColumnEffects(reads=reads, offload_site=True)

    def _column_names(self) -> list[str]:
        return map_column_order(
            self.child._column_names(),
            self.resolved_input_columns(),
            self.resolved_output_columns(),
        )

    def _num_rows(self) -> int | None:
        return self.child._num_rows()

    def _describe(self) -> str:
        parts = [f"operations={self.operations!r}"]
        if self.input_columns is not None:
            parts.append(f"input_columns={self.input_columns!r}")
        if self.output_columns is not None:
            parts.append(f"output_columns={self.output_columns!r}")
        if self.num_parallel_workers is not None:
            parts.append(f"num_parallel_workers={self.num_parallel_workers}")
        if self.python_multiprocessing:
            parts.append("python_multiprocessing=True")
        if self.offload is not None:
            parts.append(f"offload={self.offload}")
        return f"Map({', '.join(parts)})"

    def _make_pool(self, ctx: ExecContext, spec: ChainSpec) -> Any:
        workers = self.num_parallel_workers or ctx.default_workers
        name = f"mrecord-map{ctx.position(self)}"
        if self.python_multiprocessing:
            return ProcessPool(spec, workers, name, spec.num_outputs)
        return ThreadPool(spec, workers, name)

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        return [(epoch, rows)]

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        split = ctx.graph.offload.maps.get(id(self))
        ops = split.keep if split is not None else tuple(self.operations)
        ins = self.resolved_input_columns()
        outs = self.resolved_output_columns()
        position = ctx.position(self)
        label = f"map #{position} {self!r}"
        spec = ChainSpec(ops, label, tuple(ins), len(outs))
        workers = self.num_parallel_workers or ctx.default_workers
        window = max(workers, ctx.prefetch)
        counter = [ctx.take_resume(self, epoch)]  # row positions key the random ops

        def chunks() -> Iterator[tuple[Block, np.ndarray, np.ndarray]]:
            for part in rechunk(self.child._execute(ctx, epoch), CHUNK_ROWS):
                start = counter[0]
                counter[0] += len(part)
                positions = np.arange(start, counter[0], dtype=np.int64)
                yield part, positions, row_keys(ctx.seed, epoch, position, positions)

        def finish(part: Block, keys: np.ndarray, outputs: list[ColumnValues]) -> Block:
            cols = dict(part.columns)
            order = map_column_order(list(cols), ins, outs)
            for name in ins:
                del cols[name]
            cols.update(zip(outs, outputs, strict=True))
            result = {name: cols[name] for name in order}
            if split is not None:
                result[split.seed_column] = keys
            return Block(result, part.row_ids)

        if not ops:  # every op offloaded: only the seed keys are added
            for part, _positions, keys in chunks():
                yield finish(part, keys, [part.columns[name] for name in ins])
            return
        pool = ctx.pool(self, lambda: self._make_pool(ctx, spec))
        tasks = (
            ((part, keys), ([part.columns[n] for n in ins], keys, positions, part.row_ids))
            for part, positions, keys in chunks()
        )
        width = _Window(window, workers, ctx.prefetch_bytes)
        for (meta, _task), outputs in ordered_map(_Keyed(pool), tasks, width, ctx.stop):
            block = finish(meta[0], meta[1], outputs)
            width.saw(block)
            yield block


class _Window:
    """A map's chunks in flight: as many results of the last one's bytes as ``budget``
    holds, between ``least`` (the workers: each keeps one) and ``most``; ``least`` until
    a result is seen (``most`` at once would have that many chunks' results made before
    their size is known), ``most`` with no budget. A decode making 150 KB values from
    64-row chunks (9.6 MB each) held 16 of them finished, beside the iterator's queue
    (see ``context.PREFETCH_BUDGET_SHARE``)."""

    def __init__(self, most: int, least: int, budget: int | None) -> None:
        self._most = most
        self._least = max(1, min(least, most))
        self._budget = budget
        self._now = most if budget is None else self._least

    def __call__(self) -> int:
        return self._now

    def saw(self, result: Block) -> None:
        """Fit the window to ``result``'s bytes (the next chunks are likely alike)."""
        if self._budget is None:
            return
        fits = self._budget // max(1, block_nbytes(result))
        self._now = max(self._least, min(self._most, fits))


class _Keyed:
    """Adapts a pool so items can carry metadata that is not sent to the workers."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def submit(self, item: tuple[Any, Any]) -> Any:
        return self._pool.submit(item[1])
