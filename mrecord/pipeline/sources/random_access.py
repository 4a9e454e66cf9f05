"""The base of every source read by row id: ``MindDataset``, ``Cifar10Dataset``, ...

A random-access source only says how many rows each of its files holds and how
to read a batch of rows by global id (file 0's rows first, then file 1's...).
Everything else is here, once, so every such source behaves the same:

- ``shuffle``/``num_shards``/``shard_id``/``num_samples``/``sampler`` go through
  :func:`~mrecord.sampling.sampler_from_args` (MindSpore's argument rules
  and messages); each epoch's order is a pure function of (file row counts, seed,
  epoch) built by the sampler;
- padded ids (``>= N``, MindDataset's ``padded_sample``) are filled in from the
  source's padding block;
- blocks are read ahead by ``num_parallel_workers`` threads of the pipeline's pool
  (``ctx.pool``) and delivered in order; the order is built from ``ctx.seed``;
- where the source says a random order is read fastest in large windows, each swept
  in one pass over the files (``_sweep_rows``: small rows beyond memory), the epoch is
  read a window at a time, the next window read while this one is handed out block by
  block;
- ``use_sampler`` replaces the sampler; ``ConcatDataset.use_sampler`` reads a range
  of the order directly (``_iter_blocks_range``).

Subclasses implement ``_file_row_counts``, ``_read_rows`` (real ids only),
``_source_column_names`` and, for PKSampler, ``_column_values``; a source whose reads
go best fewer at a time than ``num_parallel_workers`` overrides ``_reads_in_flight``
(``RemoteDataset`` through the same-host socket).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord import config
from mrecord.arguments import check_workers
from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, CorruptFileError, RowValidationError, WrongTypeError
from mrecord.format.columnize import columns_from_rows
from mrecord.format.schema import StoredSchema
from mrecord.pipeline.sources.base import SourceDataset
from mrecord.pool import ThreadPool, ordered_map
from mrecord.sampling import (
    SCATTER_SAMPLE,
    Order,
    PKSampler,
    Sampler,
    Shuffle,
    chain_sampler,
    sampler_from_args,
    scattered_ids,
)
from mrecord.sampling.shuffle import BlockLayout

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = [
    "BUDGET_PER_COPIED_BLOCK",
    "RandomAccessSource",
    "block_rows_for",
    "check_bool_shuffle",
    "check_source_workers",
    "padded_block",
    "replace_sampler",
]

_TARGET_BLOCK_BYTES = 4 << 20
_MIN_BLOCK_ROWS = 16
_MAX_BLOCK_ROWS = 65536
"""Rows of 64 bytes or more fill their 4 MiB (a ``MindDataset`` under a small memory
budget takes fewer: ``mind_dataset._block_rows``). Each block costs a read's fixed work
(grouping its rows by page, a gather per page and column, hand-offs between threads):
under the 8,192-row bound of before 2026-11-28 an epoch of 8M tabular rows (76 bytes)
beyond memory (a 200 MB group) read 1.15-1.60M rows/s under ``Shuffle.BLOCK`` and
3.2-3.6M in file order; in blocks of 19K rows (that group's budget) 1.81-1.88M and
3.4-4.1M; of 55K (4 MiB) 2.2-3.0M and 3.8-5.4M (alternating runs)."""


BUDGET_PER_COPIED_BLOCK = 32
"""A block's copied values are at most this fraction of the memory budget: a
``MindDataset``'s (``mind_dataset._block_rows`` says why) and a ``RemoteDataset``'s,
whose values arrive in buffers of its own. Up to ``config.get_prefetch_size()`` blocks
(16) wait in the pipeline's queue while a slow consumer takes one, beside those in
flight: about 20 such blocks are five eighths of the budget."""


def block_rows_for(bytes_per_row: int) -> int:
    """Rows per block so that a block holds about 4 MiB (16 to 65,536 rows)."""
    per_row = max(1, int(bytes_per_row))
    return int(np.clip(_TARGET_BLOCK_BYTES // per_row, _MIN_BLOCK_ROWS, _MAX_BLOCK_ROWS))


def check_source_workers(num: int | None) -> int:
    """A source's ``num_parallel_workers``: the worker rule of :mod:`mrecord.arguments`;
    None is ``config.get_num_parallel_workers()`` read now, at construction, as ops do."""
    return config.workers_or_default(check_workers(num))


def replace_sampler(old: Sampler | None, new: Sampler) -> Sampler:
    """``new``, given ``old``'s child if it has none (MindSpore's ``use_sampler`` rule)."""
    child = old.get_child() if old is not None else None
    if child is not None and new.get_child() is None:
        new.add_child(child)
    return new


def padded_block(schema: StoredSchema, columns: Sequence[str], sample: Mapping[str, Any]) -> Block:
    """``padded_sample`` (MindDataset's) as a one-row block of ``columns`` of ``schema``;
    ArgumentError when its columns or values do not fit."""
    if not isinstance(sample, Mapping) or set(sample) != set(columns):
        got = sorted(sample) if isinstance(sample, Mapping) else sample
        raise ArgumentError(
            f"padded_sample must have exactly the columns of columns_list {list(columns)!r}, "
            f"got {got!r}"
        )
    sub = StoredSchema(tuple(schema[name] for name in columns))
    try:
        values = columns_from_rows(sub, [dict(sample)])
    except RowValidationError as exc:
        raise ArgumentError(f"padded_sample does not fit the schema: {exc}") from exc
    cols: dict[str, ColumnValues] = {name: values[name] for name in columns}
    return Block(cols, np.full(1, -1, dtype=np.int64))


def check_bool_shuffle(shuffle: object, sampler: object) -> bool | None:
    """``shuffle`` of a source that knows only True/False (MindSpore's non-MindRecord sources).

    None means True (a global shuffle) unless a ``sampler`` is given, as in MindSpore.
    """
    if shuffle is not None and not isinstance(shuffle, bool):
        raise WrongTypeError(
            f"Argument shuffle with value {shuffle} is not of type [<class 'bool'>], "
            f"but got {type(shuffle)}."
        )
    if shuffle is None and sampler is None:
        return True
    return shuffle


class RandomAccessSource(SourceDataset):
    """Base of the sources read by row id in a sampler's order (see the module docstring).

    A subclass calls ``super().__init__(...)`` with the dataset's arguments first
    (so argument conflicts are reported before any file is opened), opens its
    data, then calls :meth:`_count_rows`.
    """

    def __init__(
        self,
        *,
        num_parallel_workers: int | None,
        shuffle: bool | Shuffle | None,
        num_shards: int | None,
        shard_id: int | None,
        sampler: Sampler | None,
        num_samples: int | None,
        num_padded: int = 0,
        partial_window: int = 1_000_000,
        adaptive_threshold: int = 100_000_000,
    ) -> None:
        super().__init__()
        self._workers = check_source_workers(num_parallel_workers)
        self._sampler = sampler_from_args(
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            sampler=sampler,
            num_padded=num_padded,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        self._num_padded = num_padded
        self._padded: Block | None = None
        self._labels_cache: dict[str, np.ndarray] = {}
        self._rows_per_epoch = -1
        self._block_rows = 256
        self._sweep_pool_key = object()  # names the pool windows are swept on (ctx.pool)

    # -- what a subclass provides -------------------------------------------------------------

    def _file_row_counts(self) -> Sequence[int]:
        """Rows per file, in file order (global ids number them in that order)."""
        raise NotImplementedError

    def _read_rows(self, ids: np.ndarray) -> Block:
        """The rows ``ids`` (all ``< N``, any order, repeats allowed) as a block."""
        raise NotImplementedError

    def _block_layout(self) -> BlockLayout | None:
        """Page boundaries and block sizes for ``Shuffle.BLOCK``/``ADAPTIVE`` (default none:
        blocks cut at any row, default sizes)."""
        return None

    def _reads_in_flight(self) -> int:
        """Blocks read at once ahead of the consumer (default ``num_parallel_workers``); a
        source whose reads are quicker with fewer threads at once says so here."""
        return self._workers

    def _sweep_rows(self, rows: int) -> int:
        """Rows per window in which an order of ``rows`` rows is read, each window in one
        pass (:meth:`_read_swept`), or 0: block by block (the default)."""
        return 0

    def _read_swept(self, ids: np.ndarray, stop: threading.Event) -> Block:
        """The rows ``ids`` (real ids, a window of ``_sweep_rows``) read in one pass,
        ended early (``PoolStopped``) once ``stop`` is set."""
        return self._read_rows(ids)

    def _run_ended(self) -> None:
        """Called once when a run that read from this source ends (its iterator done or
        stopped): a source may give back memory its reads kept. Default: nothing."""

    def _lookahead(self, chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """The row ids of the blocks to read, in order; a source may look ahead in them
        (``RemoteDataset`` tells its server the coming rows). Default: as they are."""
        return chunks

    def _column_values(self, column: str) -> np.ndarray:
        """Every row's value of a scalar ``column`` (PKSampler's class column)."""
        ids = np.arange(self._total_rows(), dtype=np.int64)
        return np.asarray(self._read_rows(ids).columns[column])

    # -- shared machinery ---------------------------------------------------------------------

    def _total_rows(self) -> int:
        return int(sum(self._file_row_counts()))

    def _count_rows(self) -> None:
        """Rows per epoch from the sampler; validates padding and sampler bounds now."""
        self._rows_per_epoch = self._sampler.num_rows_for(
            self._total_rows(), labels=self._class_labels
        )

    @property
    def sampler(self) -> Sampler:
        """The sampler that orders every epoch."""
        return self._sampler

    def _use_sampler(self, sampler: Sampler) -> None:
        if self._num_padded:
            raise ArgumentError(
                f"{self!r}: use_sampler cannot replace the sampler of a padded dataset "
                "(padded_sample/num_padded need num_shards and shard_id)"
            )
        self._sampler = replace_sampler(self._sampler, sampler)
        self._count_rows()

    def _add_sampler(self, new_sampler: Sampler) -> None:
        """``Dataset.add_sampler``: ``new_sampler`` samples the ids this sampler gives."""
        self._sampler = chain_sampler(new_sampler, self._sampler)
        self._count_rows()

    def _source_num_rows(self) -> int:
        return self._rows_per_epoch

    def _order(self, seed: int, epoch: int) -> Order:
        """This epoch's row order (a pure function of file sizes, seed and epoch)."""
        return self._sampler.build_order(
            list(self._file_row_counts()),
            seed=seed,
            epoch=epoch,
            labels=self._class_labels,
            layout=self._block_layout(),
        )

    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        return []  # a leaf: set_state's rows are positions of this epoch's order to skip

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        ctx.at_close(self, self._run_ended)
        order = self._order(ctx.seed, epoch)
        skip = ctx.take_resume(self, epoch)  # mid-epoch resume: start at this position
        size = self._block_rows
        # Rows mostly in file order (shuffle=False, Shuffle.FILES) are told from the first
        # ones before the reader is asked for a window: its answer measures the device
        # (half a second of reads, 8% of a file-order epoch of 8M tabular rows on a
        # throttled volume, and a share of the throttle) for a sweep they never take.
        sample = order.take(np.arange(skip, min(skip + SCATTER_SAMPLE, len(order)), dtype=np.int64))
        window = self._sweep_rows(len(order) - skip) if scattered_ids(sample) else 0
        if window > 1 and len(order) - skip > 1:
            opening = order.take(np.arange(skip, min(skip + window, len(order)), dtype=np.int64))
            # Rows mostly in file order (shuffle=False, Shuffle.FILES) stream as they are.
            if scattered_ids(opening):
                yield from self._iter_swept(ctx, order, skip, window, opening)
                return
        # Small first blocks, doubling: the first rows come out after a short read, and
        # the read-ahead threads are busy before the consumer waits on a full block.
        first = max(_MIN_BLOCK_ROWS, size // 8)
        chunks = self._lookahead(order.iter_chunks(size, start=skip, first_size=first))
        workers = self._reads_in_flight()
        if workers <= 1:
            for ids in chunks:
                yield self._read(ids)
            return
        # Read up to `workers` blocks ahead on the pipeline's pool for this node (made once,
        # shut down with the iterator); ordered_map yields them in order and honours stop.
        pool = ctx.pool(self, lambda: ThreadPool(self._read, workers, "mrecord-read"))
        for _ids, block in ordered_map(pool, chunks, workers + 1, ctx.stop):
            yield block

    def _iter_swept(
        self, ctx: ExecContext, order: Order, skip: int, window: int, first: np.ndarray
    ) -> Iterator[Block]:
        """This epoch's blocks from positions ``skip`` on, read ``window`` rows at a time
        (``first``: the first window's ids), each window swept in one pass on a thread of
        its own while the one before is handed out: two windows in memory at most.

        A window that meets a damaged chunk is read again block by block, as an epoch
        that does not sweep reads it: the rows before the damage come out, then the
        error is raised (or, with ``on_error``, the damaged rows skipped) where a block
        read would."""
        size = self._block_rows

        def windows() -> Iterator[np.ndarray]:
            yield first
            for lo in range(skip + window, len(order), window):
                hi = min(lo + window, len(order))
                yield order.take(np.arange(lo, hi, dtype=np.int64))

        # A pool of the run: ends a pass in flight when the run stops (closed in the
        # middle of an epoch), instead of its close waiting for the pass (seconds).
        def read(ids: np.ndarray) -> Block | None:
            return self._read_window(ids, ctx.stop)

        pool = ctx.pool(self._sweep_pool_key, lambda: ThreadPool(read, 1, "mrecord-sweep"))
        for ids, swept in ordered_map(pool, windows(), 2, ctx.stop):
            for lo in range(0, len(ids), size):
                yield (
                    self._read(ids[lo : lo + size]) if swept is None else swept.slice(lo, lo + size)
                )
            swept = None  # let this window go before the next one is waited for

    def _read_window(self, ids: np.ndarray, stop: threading.Event) -> Block | None:
        """A window of this epoch's order swept in one pass, or None where it met a
        damaged chunk (read again block by block, see :meth:`_iter_swept`)."""
        try:
            return self._read(ids, lambda real: self._read_swept(real, stop))
        except CorruptFileError:
            return None

    def _iter_blocks_range(
        self, ctx: ExecContext, epoch: int, start: int, stop: int
    ) -> Iterator[Block]:
        """Positions ``start:stop`` of this epoch's order (ConcatDataset.use_sampler)."""
        ctx.at_close(self, self._run_ended)
        order = self._order(ctx.seed, epoch)
        for first in range(start, stop, self._block_rows):
            positions = np.arange(first, min(first + self._block_rows, stop), dtype=np.int64)
            yield self._read(order.take(positions))

    def _read(
        self, ids: np.ndarray, read_rows: Callable[[np.ndarray], Block] | None = None
    ) -> Block:
        """Rows ``ids`` where ids ``>= N`` are padded samples; the others read by
        ``read_rows`` (default ``_read_rows``)."""
        read_rows = self._read_rows if read_rows is None else read_rows
        n = self._total_rows()
        padded = ids >= n
        if not padded.any():
            return read_rows(ids)
        if self._padded is None:
            raise ArgumentError(f"{self!r}: the order holds padded ids but no padded sample")
        real_pos = np.flatnonzero(~padded)
        pad_pos = np.flatnonzero(padded)
        parts = [read_rows(ids[real_pos])] if len(real_pos) else []
        parts.append(self._padded.take(np.zeros(len(pad_pos), dtype=np.int64)))
        merged = Block.concat(parts)
        # Put every row back where the order wants it.
        inverse = np.empty(len(ids), dtype=np.int64)
        inverse[np.concatenate([real_pos, pad_pos])] = np.arange(len(ids))
        block = merged.take(inverse)
        block.row_ids = np.where(padded, -1, ids)
        return block

    def _class_labels(self) -> np.ndarray:
        """Values of the PKSampler's class column for every row (read once, on demand)."""
        column = _class_column(self._sampler)
        if column not in self._labels_cache:
            self._labels_cache[column] = self._column_values(column)
        return self._labels_cache[column]


def _class_column(sampler: Sampler | None) -> str:
    while sampler is not None:
        if isinstance(sampler, PKSampler):
            return sampler.class_column
        sampler = sampler.get_child()
    return "label"
