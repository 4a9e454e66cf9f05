"""Iterators over a pipeline: blocks, dict rows, tuple rows.

Creating an iterator builds the pipeline (tree check, offload plan) and starts
one prefetch thread that runs every epoch's generator chain and puts the output
blocks (offload applied, hidden columns dropped) on a queue bounded by
``config.get_prefetch_size()`` blocks and by an eighth of the process's memory budget
in bytes (``context.PREFETCH_BUDGET_SHARE``; one block always fits). Offloaded ops run
on a small thread pool of their own, a few output blocks at a time, kept in order.
Errors raised anywhere in the pipeline travel through that queue and are re-raised by ``__next__``.

Epochs: a ``for`` loop consumes one epoch and ends; the next ``for`` loop over the
same iterator runs the next epoch (MindSpore's behaviour). ``num_epochs=-1``
allows any number of epochs.

Shutdown: ``stop()``, leaving a ``with`` block, the last epoch ending, an error,
Ctrl-C during ``__next__`` and garbage collection of the iterator all stop the
prefetch thread and every worker pool (threads joined, processes ended, shared
memory unlinked).
"""

from __future__ import annotations

import itertools
import operator
import weakref
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from mrecord.background import END, Background, BackgroundStopped
from mrecord.block import Block, block_nbytes
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.engine.columns import row_values, to_numpy
from mrecord.pipeline.engine.context import (
    ExecContext,
    PipelineStopped,
    ResumePositions,
    close_iterator,
)
from mrecord.pipeline.engine.graph import build_graph
from mrecord.pipeline.engine.tensor import as_tensor
from mrecord.pool import ThreadPool, ordered_map

if TYPE_CHECKING:
    from mrecord.pipeline.dataset import Dataset

__all__ = ["BlockIterator", "DictIterator", "TupleIterator", "count_rows", "first_row"]

_STATE_VERSION = 1
_EPOCH_END = object()
_NO_ROW: Any = object()


class _Runtime:
    """The prefetch thread (a :class:`Background` sharing the context's stop event) and the
    context; holds no reference to the iterator."""

    def __init__(
        self,
        root: Dataset,
        num_epochs: int,
        start_epoch: int = 0,
        resume: ResumePositions | None = None,
    ) -> None:
        graph = build_graph(root)
        self.ctx = ExecContext(graph, resume)
        self.num_epochs = num_epochs
        self.start_epoch = start_epoch
        self._offload_pool: ThreadPool[Block, Block] | None = None
        self.worker: Background[Any] = Background(
            self._run,
            capacity=self.ctx.prefetch,
            name="mrecord-prefetch",
            stop=self.ctx.stop,
            weigh=_queued_bytes,
            max_weight=self.ctx.prefetch_bytes,
        )
        self.worker.start()

    def _outputs(self, blocks: Iterator[Block]) -> Iterator[Block]:
        """The output blocks: the offload plan applied, on its thread pool when it has ops."""
        plan = self.ctx.graph.offload
        if not plan:
            for block in blocks:
                yield plan.apply(block)  # drops the hidden columns
            return
        workers = plan.workers or self.ctx.default_workers
        if self._offload_pool is None:
            self._offload_pool = ThreadPool(plan.apply, workers, "mrecord-offload")
        window = workers + 1
        for _block, result in ordered_map(self._offload_pool, blocks, window, self.ctx.stop):
            yield result

    def _run(self, put: Callable[[Any], bool]) -> None:
        """Every epoch's output blocks, an end marker after each epoch (runs in the thread)."""
        ctx, root = self.ctx, self.ctx.graph.root
        epoch = self.start_epoch
        try:
            while self.num_epochs < 0 or epoch < self.num_epochs:
                ctx.epoch = epoch
                gen = root._execute(ctx, epoch)
                try:
                    for block in self._outputs(gen):
                        if not put(block):
                            return
                finally:
                    close_iterator(gen)
                if not put(_EPOCH_END):
                    return
                epoch += 1
        except PipelineStopped:
            return
        finally:
            if self._offload_pool is not None:
                self._offload_pool.shutdown()

    def close(self) -> None:
        """Stop the thread and every pool; idempotent."""
        self.worker.stop()
        self.ctx.close()


class BlockIterator:
    """Output blocks of a pipeline, epoch by epoch (the iterator the row iterators wrap).

    ``start_epoch`` and ``resume`` (``{id(node): (epoch, rows)}``, from
    :meth:`Dataset.resume_positions <mrecord.pipeline.dataset.Dataset.resume_positions>`)
    say where this run starts; they belong to this run alone.
    """

    def __init__(
        self,
        dataset: Dataset,
        num_epochs: int = -1,
        start_epoch: int = 0,
        resume: ResumePositions | None = None,
    ) -> None:
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int):
            raise WrongTypeError(f"num_epochs must be an int, got {num_epochs!r}")
        if num_epochs == 0 or num_epochs < -1:
            raise ArgumentError(f"num_epochs must be -1 (any) or positive, got {num_epochs!r}")
        self.dataset = dataset
        self.num_epochs = num_epochs
        self._runtime = _Runtime(dataset, num_epochs, start_epoch, resume)
        self._finalizer = weakref.finalize(self, self._runtime.close)
        self._finished = False
        self._epochs_done = start_epoch  # a resumed iterator has read the epochs before it

    def __iter__(self) -> BlockIterator:
        return self

    def __next__(self) -> Block:
        if self._epochs_done == self.num_epochs:
            # MindSpore raises here too: an epoch past num_epochs is a bug in the
            # training loop, not an empty epoch.
            raise PipelineError(
                f"this iterator was created with num_epochs={self.num_epochs} and all of them "
                "have been read; create it with a larger num_epochs (or -1 for any number)"
            )
        if self._finished:
            raise StopIteration
        try:
            item = self._get()
        except BaseException:
            self.stop()
            raise
        if item is _EPOCH_END:
            self._epochs_done += 1
            if self._epochs_done == self.num_epochs:
                self.stop()  # the last epoch: free the threads and pools now
            raise StopIteration
        if item is END:
            self._finished = True
            self.stop()
            raise StopIteration
        return item  # type: ignore[no-any-return]

    def _get(self) -> Any:
        try:
            return self._runtime.worker.get()
        except BackgroundStopped:
            raise PipelineError(
                "the iterator was stopped; create a new one to read again"
            ) from None

    def stop(self) -> None:
        """Stop the pipeline now: threads joined, worker processes ended, memory freed."""
        self._finished = True
        self._finalizer()

    def __enter__(self) -> BlockIterator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_Row = TypeVar("_Row")


class _RowIterator(Generic[_Row]):
    """Rows of a pipeline: a ``for`` loop per epoch; ``stop()`` / ``with`` end it.

    A ``for`` loop runs over ``__iter__``'s chain of each block's rows (``itertools``:
    a row costs no Python frame; Python runs once a block, to take the next one), and
    ``next()`` takes from the same rows. The rows handed out are counted from how many
    of the block's rows are left (the length hint of its first column's iterator), not
    row by row: ``__next__`` as a Python method a row cost 0.15-0.2 us of a per-row
    consumer's few."""

    def __init__(self, dataset: Dataset, num_epochs: int, output_numpy: bool) -> None:
        self._names = dataset.get_col_names()
        self._dataset = dataset
        # Where Dataset.set_state said the next iterator starts: this run's from now on
        # (cleared once the run exists, so a refused iterator leaves the state in place).
        resume = dataset._pending_positions()
        self._blocks = BlockIterator(dataset, num_epochs, resume=resume)
        dataset._pending_positions(clear=True)
        self.output_numpy = output_numpy
        self._epoch = 0
        self._at_block(iter(()), iter(()), 0)

    def _at_block(self, rows: Iterator[_Row], left: Iterator[Any], count: int) -> None:
        """The rows of the block now handed out: ``rows``, ``count`` of them, and an
        iterator whose length hint is how many are left (``_make_rows``)."""
        self._rows: Iterator[_Row] = rows
        self._left: Iterator[Any] = left
        self._block_rows = count
        self._before = 0  # rows of this epoch handed out before this block

    def __iter__(self) -> Iterator[_Row]:
        return itertools.chain(self._rows, itertools.chain.from_iterable(self._next_blocks()))

    def _next_blocks(self) -> Iterator[Iterator[_Row]]:
        """The rows of each next block of this epoch (the block before handed out whole);
        at the epoch's end, the next epoch's count starts."""
        while True:
            try:
                block = next(self._blocks)
            except StopIteration:
                self._epoch += 1
                self._at_block(iter(()), iter(()), 0)
                return
            except KeyboardInterrupt:
                self.stop()
                raise
            before = self._before + self._block_rows
            rows, left = self._make_rows(block)
            self._at_block(rows, left, len(block))
            self._before = before
            yield rows

    def _make_rows(self, block: Block) -> tuple[Iterator[_Row], Iterator[Any]]:
        """The block's rows, and an iterator they draw from whose length hint is how many
        rows are left (:meth:`_delivered`)."""
        raise NotImplementedError

    def __next__(self) -> _Row:
        row = next(self._rows, _NO_ROW)
        if row is _NO_ROW:
            return next(iter(self))  # the next block's first row, or the epoch's end
        return row  # type: ignore[return-value]

    @property
    def _delivered(self) -> int:
        """Rows of the current epoch handed out."""
        left = operator.length_hint(self._left)
        return self._before + self._block_rows - left

    def state_dict(self) -> dict[str, Any]:
        """Where this iterator is: epoch, rows (batches after ``batch``) delivered in it,
        and the state of every node (JSON-serialisable).

        Raises PipelineError mid-epoch when a node cannot resume (only MindDataset ->
        map / batch / repeat / project / rename chains can).
        """
        return {
            "version": _STATE_VERSION,
            "epoch": self._epoch,
            "rows": self._delivered,
            "nodes": self._dataset.get_state(self._epoch, self._delivered),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict` of the same pipeline): the
        rows the uninterrupted run would have given next, random ops included."""
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            raise PipelineError(
                f"not an iterator state (version {_STATE_VERSION}): {state!r}; pass what "
                "state_dict() returned"
            )
        epoch, rows = int(state["epoch"]), int(state["rows"])
        num_epochs = self._blocks.num_epochs
        if num_epochs != -1 and epoch >= num_epochs:
            raise ArgumentError(
                f"the state is at epoch {epoch}, but this iterator has num_epochs={num_epochs}"
            )
        positions = self._dataset.resume_positions(state["nodes"])  # this run's, not the nodes'
        self._blocks.stop()
        self._blocks = BlockIterator(self._dataset, num_epochs, epoch, positions)
        self._at_block(iter(()), iter(()), 0)
        self._epoch, self._before = epoch, rows

    def stop(self) -> None:
        """Stop the pipeline (threads joined, processes ended, shared memory freed)."""
        self._blocks.stop()

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _queued_bytes(item: Any) -> int:
    """What an item of the prefetch queue weighs: a block's bytes, a marker nothing."""
    return block_nbytes(item) if isinstance(item, Block) else 0


def _output_wrapper(output_numpy: bool) -> Any:
    """Plain arrays for ``output_numpy=True``, else :class:`~mrecord.pipeline.Tensor`."""
    return _plain if output_numpy else as_tensor


def _plain(value: Any) -> Any:
    """A plain ``numpy.ndarray`` (bytes values are an internal ndarray subclass)."""
    if type(value) is not np.ndarray and isinstance(value, np.ndarray):
        return value.view(np.ndarray)
    return value


def _column_rows(values: Any, wrap: Callable[[Any], Any]) -> list[Any]:
    """A block column's row values as the iterator yields them (see ``row_values``)."""
    if wrap is _plain:
        if type(values) is np.ndarray:
            return row_values(values)  # views and conversions of a plain array are plain
        if type(values) is list:  # one pass; most values are plain arrays already
            plain = np.ndarray
            return [v if type(v) is plain else _plain(to_numpy(v)) for v in values]
    return list(map(wrap, row_values(values)))


class DictIterator(_RowIterator[dict[str, Any]]):
    """Rows as ``{column: value}`` (``create_dict_iterator``).

    Values are :class:`~mrecord.pipeline.engine.tensor.Tensor` (a numpy array with ``asnumpy()``)
    by default, as MindSpore yields tensors; ``output_numpy=True`` gives plain numpy arrays.
    """

    def _make_rows(self, block: Block) -> tuple[Iterator[dict[str, Any]], Iterator[Any]]:
        names = self._names
        wrap = _output_wrapper(self.output_numpy)
        columns = [iter(_column_rows(block.columns[name], wrap)) for name in names]
        if not columns:
            left = itertools.repeat((), len(block))
            return map(dict, left), left
        rows = zip(*columns, strict=True)
        return map(dict, map(zip, itertools.repeat(names), rows)), columns[0]


class TupleIterator(_RowIterator[list[Any]]):
    """Rows as lists of values in column order (``create_tuple_iterator``); values as in
    :class:`DictIterator`."""

    def __init__(
        self,
        dataset: Dataset,
        columns: Sequence[str] | None = None,
        num_epochs: int = -1,
        output_numpy: bool = False,
    ) -> None:
        super().__init__(dataset, num_epochs, output_numpy)
        if columns is not None:
            names = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in names if c not in self._names]
            if unknown:
                self.stop()
                raise ArgumentError(
                    f"columns {unknown!r} are not in the dataset; its columns are {self._names!r}"
                )
            self._names = names

    def _make_rows(self, block: Block) -> tuple[Iterator[list[Any]], Iterator[Any]]:
        wrap = _output_wrapper(self.output_numpy)
        columns = [iter(_column_rows(block.columns[name], wrap)) for name in self._names]
        if not columns:
            left = itertools.repeat((), len(block))
            return map(list, left), left
        return map(list, zip(*columns, strict=True)), columns[0]


def first_row(root: Dataset) -> list[Any]:
    """The first row of one epoch, values as ``create_tuple_iterator`` gives them (for
    ``output_shapes`` / ``output_types``; a look at the data, so ``set_state`` is left for
    the iterator it is meant for)."""
    names = root.get_col_names()
    with BlockIterator(root, num_epochs=1) as blocks:
        for block in blocks:
            if len(block):
                return [_column_rows(block.columns[name], as_tensor)[0] for name in names]
    return []


def count_rows(root: Dataset) -> int:
    """Rows of one epoch, by running the pipeline (used when sizes are not known)."""
    total = 0
    with BlockIterator(root, num_epochs=1) as blocks:
        for block in blocks:
            total += len(block)
    return total
