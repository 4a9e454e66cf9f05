"""``MindDataset``: an mrecord dataset as a pipeline source, with MindSpore's arguments.

::

    ds = MindDataset("data.mrecord", columns_list=["image", "label"],
                     shuffle=Shuffle.GLOBAL, num_shards=8, shard_id=rank)
    for row in ds.create_dict_iterator(num_epochs=1):
        ...

The row order of every epoch is a pure function of (file row counts, seed,
epoch) computed lazily by the sampler (``mrecord.sampling.samplers``); rows are
read a block at a time with one vectorized gather per page and column. Blocks
are read ahead by ``num_parallel_workers`` threads (the gathers release the GIL
in numpy and in memory copies), and delivered in order.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, RuntimeArgumentError
from mrecord.format.schema import FieldKind
from mrecord.pipeline.sources.block_layout import check_block_sizes, plan_layout
from mrecord.pipeline.sources.lookahead import HintThread, hinting
from mrecord.pipeline.sources.random_access import (
    BUDGET_PER_COPIED_BLOCK,
    RandomAccessSource,
    block_rows_for,
    padded_block,
)
from mrecord.pipeline.sources.skipping import SkipDamaged, check_on_error
from mrecord.pool import PoolStopped
from mrecord.reader.dataset_reader import DatasetReader, memory_budget
from mrecord.sampling import Sampler, Shuffle
from mrecord.sampling.shuffle import BlockLayout

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["MindDataset"]

_TARGET_VIEWED_BYTES = 64 << 20
_MIN_VIEWED_BLOCK_ROWS = 16
_VIEW_BYTES = 96  # a uint8 array viewing one bytes value of the map
_MAX_IN_FLIGHT = 8
_BUDGET_BLOCK_ROWS = 8192
"""A block's copied values are at most a ``BUDGET_PER_COPIED_BLOCK``-th of the memory
budget (``random_access``; see ``_block_rows``), unless that leaves fewer rows than this,
the bound before blocks of small rows grew to 4 MiB (2026-11-28): under a budget, blocks
are never smaller than they were."""
ROWS_IN_FLIGHT = 64
"""Rows whose blocks a ``MindDataset`` keeps reading at once when its blocks are small
(big values, little memory): twice the queue depth the device's random-read limit is
measured at (``benchmarks/bench_beyond_ram.py``), as a block's reads are in flight only
part of its time."""


class MindDataset(RandomAccessSource):
    """Read an mrecord dataset (MindSpore's ``MindDataset`` arguments and rules).

    Args:
        dataset_files: one shard file (all its siblings are read) or a list of files
            (only those are read).
        columns_list: columns to read, in this order (default: all, sorted by name as
            MindSpore orders them; the schema's order is ``reader.column_names``).
        num_parallel_workers: reader threads (default ``config.get_num_parallel_workers()``).
        shuffle: ``True`` = ``Shuffle.GLOBAL``, ``False`` = file order, ``None`` =
            ``Shuffle.ADAPTIVE``, or a :class:`Shuffle` mode.
        num_shards, shard_id: read one of ``num_shards`` strided shards.
        sampler: a sampler instead of shuffle/sharding/num_samples.
        padded_sample, num_padded: append ``num_padded`` copies of ``padded_sample``
            (needs ``columns_list``) so the total divides by ``num_shards``.
        num_samples: rows per epoch (per shard); with shuffle, drawn WITHOUT replacement
            (MindSpore draws with replacement).
        verify: checksum policy, ``"once"`` (default), ``"always"`` or ``"never"``.
        partial_window, adaptive_threshold: Shuffle.PARTIAL's window and
            Shuffle.ADAPTIVE's threshold, in rows.
        block_rows, window_blocks: Shuffle.BLOCK's rows per block (cut on page
            boundaries) and blocks mixed per window; None: chosen from the measured
            storage and memory (docs/SHUFFLE_AND_SAMPLERS.md, "BLOCK").
        storage_options: passed to fsspec when ``dataset_files`` are URLs
            (``s3://...``; docs/REMOTE.md).
        on_error: a read that meets a damaged chunk (``ChecksumError``,
            ``CorruptFileError``): ``"raise"`` (default) ends the epoch with the error;
            ``"skip"`` drops that chunk's rows and goes on, ``"warn"`` also warns
            (``RuntimeWarning``). Skipped rows: :attr:`skipped_rows`, :meth:`skip_report`.
    """

    def __init__(
        self,
        dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        columns_list: Sequence[str] | None = None,
        num_parallel_workers: int | None = None,
        shuffle: bool | Shuffle | None = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
        sampler: Sampler | None = None,
        padded_sample: Mapping[str, Any] | None = None,
        num_padded: int | None = None,
        num_samples: int | None = None,
        *,
        verify: str = "once",
        partial_window: int = 1_000_000,
        adaptive_threshold: int = 100_000_000,
        storage_options: Mapping[str, Any] | None = None,
        block_rows: int | None = None,
        window_blocks: int | None = None,
        on_error: str = "raise",
    ) -> None:
        _check_padding_args(padded_sample, num_padded, columns_list)
        check_block_sizes(block_rows, window_blocks)
        self._block_sizes = (block_rows, window_blocks)
        self._layout: tuple[Sampler, BlockLayout | None] | None = None
        super().__init__(
            num_parallel_workers=num_parallel_workers,
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            sampler=sampler,
            num_samples=num_samples,
            num_padded=num_padded or 0,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        self._reader = DatasetReader.open(
            dataset_files, columns=columns_list, verify=verify, storage_options=storage_options
        )
        # MindSpore's default column order is by name; columns_list keeps its own order.
        self._columns = (
            list(self._reader.column_names)
            if columns_list is not None
            else sorted(self._reader.column_names)
        )
        self._padded = self._padded_block(padded_sample) if padded_sample is not None else None
        self._count_rows()
        self._block_rows, self._in_flight = _block_rows(self._reader, self._workers)
        self._on_error = check_on_error(on_error)
        self._skipping = SkipDamaged(self._read_block, warn=on_error == "warn")
        self._head_hints = HintThread("mrecord-heads")
        self._window_hints = HintThread("mrecord-windows")
        self._announcing = True  # this epoch's blocks still announced (_announce)

    # -- random-access source contract --------------------------------------------------------

    def _source_column_names(self) -> list[str]:
        return list(self._columns)

    def _file_row_counts(self) -> list[int]:
        return self._reader.file_row_counts

    def _run_ended(self) -> None:
        # The next reader of the process (another run, an evaluation) gets back the
        # memory this run's reads kept, where the budget is small (DatasetReader's
        # return_idle_memory; docs/READING.md, "Memory given back when a run ends").
        self._reader.return_idle_memory()

    def _read_rows(self, ids: np.ndarray) -> Block:
        if self._on_error == "raise":
            return self._read_block(ids)
        return self._skipping.read(ids)

    def _read_block(self, ids: np.ndarray) -> Block:
        return self._reader.read_rows(
            ids, self._columns, bytes_as_arrays=True, window=self._reads_windows()
        )

    def _sweep_rows(self, rows: int) -> int:
        # Not a block shuffle's windows: those are read whole already, a window of pages
        # at a time (_reads_windows).
        if self._reads_windows():
            return 0
        return self._reader.sweep_rows(self._columns, rows)

    def _read_swept(self, ids: np.ndarray, stop: threading.Event) -> Block:
        def between_waves() -> None:
            if stop.is_set():
                raise PoolStopped("the run stopped during a sweep")

        return self._reader.read_rows(
            ids, self._columns, bytes_as_arrays=True, sweep=True, between_waves=between_waves
        )

    def _reads_windows(self) -> bool:
        """Whether the blocks are a block shuffle's windows (its layout planned for the
        sampler reading now)."""
        layout = self._layout
        return layout is not None and layout[0] is self._sampler and layout[1] is not None

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        # Shards read from a store by range requests evict by next use: tell them the future.
        self._reader.plan_reads(lambda e: self._order(ctx.seed, e).to_array(), epoch)
        return super()._iter_blocks(ctx, epoch)

    def _block_layout(self) -> BlockLayout | None:
        # Chosen once per sampler: every epoch (and a resume) reads with the same blocks.
        if self._layout is None or self._layout[0] is not self._sampler:
            layout = plan_layout(self._reader, self._sampler, *self._block_sizes)
            self._layout = (self._sampler, layout)
        return self._layout[1]

    @property
    def block_layout(self) -> BlockLayout | None:
        """The block layout ``Shuffle.BLOCK`` (or ADAPTIVE, when it picks BLOCK) reads with."""
        return self._block_layout()

    @property
    def skipped_rows(self) -> list[int]:
        """Row ids dropped so far by ``on_error="skip"`` / ``"warn"`` (damaged chunks)."""
        return self._skipping.skipped_rows

    def skip_report(self) -> str:
        """How many rows ``on_error`` skipped, naming the first damaged files and pages."""
        return self._skipping.report()

    def _column_values(self, column: str) -> np.ndarray:
        ids = np.arange(self._reader.num_rows, dtype=np.int64)
        return np.asarray(self._reader.read_rows(ids, columns=[column]).columns[column])

    def _reads_in_flight(self) -> int:
        return self._in_flight

    def _lookahead(self, chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        # Beyond memory a cold block's reading thread first waits on its rows' chunk heads
        # and label chunks (small reads), then reads the values: have those small reads
        # made a few blocks early, on a thread of their own (docs/READING.md). Not where
        # every request counts (an hdd-like volume): there they only queue in front of the
        # first blocks' own (2.4 GB of images, GLOBAL, 200 requests a second: the first
        # row after 6.0 s against 1.0 s, the first 20 s at 82 rows/s against 92).
        # Nor where every head and checked chunk comes from the head index (format 1.4):
        # the announcements would read nothing, only parse heads ahead on a thread of
        # their own, whose Python the first blocks' reading threads then wait behind for
        # the GIL (a 1 ms parse measured at 16 ms of CPU and 23 ms of wall beside them);
        # the reading threads parse their own, ~1 ms a block. Images GLOBAL in a 763 MB
        # group, the first 4,000 rows of a cold epoch: 32 alternating pairs, medians
        # 0.340 / 0.354 s and 0.326 / 0.346 s without and with.
        layout = self._block_layout() if self._reads_windows() else None
        if layout is not None and self._reader.beyond_memory:
            # A block shuffle's windows: each read about a window ahead has the reader
            # take the whole chunks of its pages into its buffers (will_read_window), so
            # that the next window is coming in while this one is handed out. Not quite a
            # window: the buffers hold two, and the reads still in flight (`in_flight`
            # past the one handed out) of the window before must be done before its
            # chunks give way. A whole window ahead, a fifth of BLOCK's first epoch of 2M
            # variable-shape rows on the cloud throttle was read twice (1,015-1,028 MB of
            # the disk for an 884 MB epoch, 245-262K rows/s; this way 884 MB and 290-330K,
            # two alternating pairs; the hdd-like volume 305K either way).
            window_reads = -(-layout.block_rows * layout.window_blocks // max(1, self._block_rows))
            ahead = max(1, window_reads - self._in_flight)
            return hinting(chunks, ahead, self._hint_window)
        if (
            not self._reader.beyond_memory
            or self._reader.needs_large_requests
            or self._reader.heads_all_indexed(self._columns)
        ):
            return chunks
        self._announcing = True
        return hinting(chunks, self._in_flight + 2, self._hint_heads)

    def _hint_window(self, ids: np.ndarray) -> None:
        self._window_hints.submit(self._reader.will_read_window, ids, self._columns)

    def _hint_heads(self, ids: np.ndarray) -> None:
        if self._announcing:
            self._head_hints.submit(self._announce, ids)

    def _announce(self, ids: np.ndarray) -> None:
        """Announce a coming block (on the hints' thread); stop for the epoch once a
        block's reads need no hint (a block shuffle's windows taken whole into the
        reader's buffers, a file-order epoch that streams: the epoch's other blocks are
        alike). Working that out again for every block only took the GIL from the
        reading threads: ``Shuffle.BLOCK`` over 4M tabular rows in a 300 MB group, 3
        alternating pairs, 0.98-1.06M rows/s announcing every window, 1.17-1.34M not."""
        if not self._reader.will_need_heads(ids, self._columns, window=self._reads_windows()):
            self._announcing = False

    def _describe(self) -> str:
        files = [f.name for f in self._reader.files]
        shown = files if len(files) <= 3 else [*files[:2], "...", files[-1]]
        return f"MindDataset({shown}, sampler={self._sampler!r})"

    # -- public extras --------------------------------------------------------------------------

    @property
    def reader(self) -> DatasetReader:
        """The underlying :class:`DatasetReader` (random access by global row id)."""
        return self._reader

    # -- internals --------------------------------------------------------------------------------

    def _padded_block(self, sample: Mapping[str, Any]) -> Block:
        return padded_block(self._reader.schema, self._reader.column_names, sample)


def _block_rows(reader: DatasetReader, workers: int) -> tuple[int, int]:
    """(rows per block, blocks read at once): about 4 MiB of values copied per block
    (``block_rows_for``), and enough blocks at once to keep ``ROWS_IN_FLIGHT`` rows'
    reads in flight when the data is cold.

    Bytes values are handed out as zero-copy views of the map (``bytes_as_arrays``):
    they cost a view object each, not their length; their data only bounds a block at
    ``_TARGET_VIEWED_BYTES`` (what a block keeps the consumer pointed at). Big blocks
    mean fewer hand-offs between the read-ahead threads and the consumer. The blocks
    read ahead (those in flight and two more: the one being consumed, the one done
    and waiting) are also the read-ahead window of the storage layer, whose bytes must
    still be in memory when the consumer reads them: all of them together stay within
    an eighth of the memory this process may still use (``memory_budget``, its memory
    cgroup's limit when it has one). When that makes blocks of big values small, more
    of them are read at once (up to ``_MAX_IN_FLIGHT``; their threads wait on the disk,
    not on a core): a cold block waits for a few round trips to the disk (chunk heads,
    fixed columns, values), so ``num_parallel_workers`` blocks of a few dozen rows keep
    the device's queue mostly empty.

    A block's copied values are at most ``1 / BUDGET_PER_COPIED_BLOCK`` of the budget.
    Measured in a 100 MB memory group (a file-order epoch of 72-byte rows, then a read of
    variable-shape rows through the map in the same process, the test in
    tests/storage/test_beyond_ram.py): blocks of 4 MiB (58K rows) raised the epoch's peak
    from 57 to 92 MB and got the reader OOM-killed. Blocks of a 32nd of the budget (2.5
    MB, 35K rows there) peak at 77-85 MB; they left 46 MB of anonymous memory behind
    (against 33 MB with a 128th), and the variable-shape read after, which needs ~50 MB
    of its own, crawled, until a run's end gave back what its reads kept
    (``_run_ended``): 30 MB left, the read in 6-7 s. In a 200 MB group a 32nd holds a
    whole 4 MiB block. Never fewer than ``_BUDGET_BLOCK_ROWS`` rows for it.
    """
    copied = viewed = 0
    for shard in reader.shards:
        if shard.meta.chunks.size:
            for col, fld in enumerate(shard.meta.schema.fields):
                if fld.name in reader.column_names:
                    raw = shard.meta.raw_bytes(col, values_only=True)  # not the offsets
                    if fld.kind is FieldKind.BYTES:
                        viewed += raw
                        copied += _VIEW_BYTES * shard.meta.num_rows
                    else:
                        copied += raw
    rows = max(1, reader.num_rows)
    budget = memory_budget()  # None: not known (not Linux)
    copied_per_row = max(1, copied // rows)
    viewed_per_row = max(1, viewed // rows)

    def block(in_flight: int) -> int:
        target = _TARGET_VIEWED_BYTES
        by_copies = block_rows_for(copied_per_row)
        if budget is not None:
            target = min(target, budget // (8 * (in_flight + 2)))
            within = budget // BUDGET_PER_COPIED_BLOCK // copied_per_row
            by_copies = min(by_copies, max(_BUDGET_BLOCK_ROWS, within))
        return min(by_copies, max(_MIN_VIEWED_BLOCK_ROWS, target // viewed_per_row))

    in_flight = workers
    while in_flight < _MAX_IN_FLIGHT and in_flight * block(in_flight) < ROWS_IN_FLIGHT:
        in_flight += 1
    return block(in_flight), in_flight


def _check_padding_args(
    padded_sample: Mapping[str, Any] | None,
    num_padded: int | None,
    columns_list: Sequence[str] | None,
) -> None:
    if padded_sample is not None:
        if num_padded is None:
            raise RuntimeArgumentError(
                "padded_sample is specified and requires num_padded as well."
            )
        if columns_list is None:
            raise RuntimeArgumentError(
                "padded_sample is specified and requires columns_list as well."
            )
    elif num_padded:
        raise RuntimeArgumentError("num_padded is specified but padded_sample is not.")
    if num_padded is not None and (
        isinstance(num_padded, bool) or not isinstance(num_padded, int) or num_padded < 0
    ):
        raise ArgumentError(f"num_padded must be an int >= 0, got {num_padded!r}")
