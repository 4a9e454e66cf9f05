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
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord import config
from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, RowValidationError
from mrecord.format.columnize import columns_from_rows
from mrecord.format.schema import FieldKind
from mrecord.pipeline.source import SourceDataset
from mrecord.pipeline.workers import ThreadPool, ordered_map
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.sampling import Order, PKSampler, Sampler, Shuffle, sampler_from_args

if TYPE_CHECKING:
    from mrecord.pipeline.context import ExecContext

__all__ = ["MindDataset"]

_TARGET_BLOCK_BYTES = 4 << 20
_MIN_BLOCK_ROWS = 16
_MAX_BLOCK_ROWS = 8192


class MindDataset(SourceDataset):
    """Read an mrecord dataset (MindSpore's ``MindDataset`` arguments and rules).

    Args:
        dataset_files: one shard file (all its siblings are read) or a list of files
            (only those are read).
        columns_list: columns to read (default all).
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
        storage_options: passed to fsspec when ``dataset_files`` are URLs
            (``s3://...``; docs/REMOTE.md).
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
    ) -> None:
        super().__init__()
        self._workers = _check_workers(num_parallel_workers)
        _check_padding_args(padded_sample, num_padded, columns_list)
        self._sampler = sampler_from_args(
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            sampler=sampler,
            num_padded=num_padded or 0,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        self._reader = DatasetReader.open(
            dataset_files, columns=columns_list, verify=verify, storage_options=storage_options
        )
        self._padded = self._padded_block(padded_sample) if padded_sample is not None else None
        self._num_padded = num_padded or 0
        self._labels_cache: dict[str, np.ndarray] = {}
        # Validates padding divisibility and sampler bounds now, not at first iteration.
        self._rows_per_epoch = self._sampler.num_rows_for(
            self._reader.num_rows, labels=self._class_labels
        )
        self._block_rows = _block_rows(self._reader)

    # -- source contract ----------------------------------------------------------------------

    def _source_num_rows(self) -> int:
        return self._rows_per_epoch

    def _source_column_names(self) -> list[str]:
        return self._reader.column_names

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        order = self._order(ctx.seed, epoch)
        chunks = order.iter_chunks(self._block_rows)
        if self._workers <= 1:
            for ids in chunks:
                yield self._read(ids)
            return
        # Read up to `workers` blocks ahead on the pipeline's pool for this node (made once,
        # shut down with the iterator); ordered_map yields them in order and honours stop.
        workers = self._workers
        pool = ctx.pool(self, lambda: ThreadPool(self._read, workers, "mrecord-read"))
        for _ids, block in ordered_map(pool, chunks, workers + 1, ctx.stop):
            yield block

    def _order(self, seed: int, epoch: int) -> Order:
        """This epoch's row order (a pure function of file sizes, seed and epoch)."""
        return self._sampler.build_order(
            self._reader.file_row_counts,
            seed=seed,
            epoch=epoch,
            labels=self._class_labels,
        )

    def _iter_blocks_range(
        self, ctx: ExecContext, epoch: int, start: int, stop: int
    ) -> Iterator[Block]:
        """Positions ``start:stop`` of this epoch's order (ConcatDataset.use_sampler)."""
        order = self._order(ctx.seed, epoch)
        for first in range(start, stop, self._block_rows):
            positions = np.arange(first, min(first + self._block_rows, stop), dtype=np.int64)
            yield self._read(order.take(positions))

    def _describe(self) -> str:
        files = [f.name for f in self._reader.files]
        shown = files if len(files) <= 3 else [*files[:2], "...", files[-1]]
        return f"MindDataset({shown}, sampler={self._sampler!r})"

    # -- public extras --------------------------------------------------------------------------

    @property
    def reader(self) -> DatasetReader:
        """The underlying :class:`DatasetReader` (random access by global row id)."""
        return self._reader

    @property
    def sampler(self) -> Sampler:
        """The sampler that orders every epoch."""
        return self._sampler

    # -- internals --------------------------------------------------------------------------------

    def _read(self, ids: np.ndarray) -> Block:
        n = self._reader.num_rows
        padded = ids >= n
        if not padded.any():
            return self._reader.read_rows(ids, bytes_as_arrays=True)
        assert self._padded is not None  # padded ids exist only when num_padded > 0
        real_pos = np.flatnonzero(~padded)
        pad_pos = np.flatnonzero(padded)
        parts = (
            [self._reader.read_rows(ids[real_pos], bytes_as_arrays=True)] if len(real_pos) else []
        )
        parts.append(self._padded.take(np.zeros(len(pad_pos), dtype=np.int64)))
        merged = Block.concat(parts)
        # Put every row back where the order wants it.
        inverse = np.empty(len(ids), dtype=np.int64)
        inverse[np.concatenate([real_pos, pad_pos])] = np.arange(len(ids))
        block = merged.take(inverse)
        block.row_ids = np.where(padded, -1, ids)
        return block

    def _padded_block(self, sample: Mapping[str, Any]) -> Block:
        columns = self._reader.column_names
        if not isinstance(sample, Mapping) or set(sample) != set(columns):
            got = sorted(sample) if isinstance(sample, Mapping) else sample
            raise ArgumentError(
                f"padded_sample must have exactly the columns of columns_list {columns!r}, "
                f"got {got!r}"
            )
        schema = self._reader.schema
        sub = type(schema)(tuple(schema[name] for name in columns))
        try:
            values = columns_from_rows(sub, [dict(sample)])
        except RowValidationError as exc:
            raise ArgumentError(f"padded_sample does not fit the schema: {exc}") from exc
        cols: dict[str, ColumnValues] = {name: values[name] for name in columns}
        return Block(cols, np.full(1, -1, dtype=np.int64))

    def _class_labels(self) -> np.ndarray:
        """Values of the PKSampler's class column for every row (read once, on demand)."""
        column = _class_column(self._sampler)
        if column not in self._labels_cache:
            ids = np.arange(self._reader.num_rows, dtype=np.int64)
            values = self._reader.read_rows(ids, columns=[column]).columns[column]
            self._labels_cache[column] = np.asarray(values)
        return self._labels_cache[column]


def _class_column(sampler: Sampler | None) -> str:
    while sampler is not None:
        if isinstance(sampler, PKSampler):
            return sampler.class_column
        sampler = sampler.get_child()
    return "label"


def _block_rows(reader: DatasetReader) -> int:
    raw = 0
    for shard in reader.shards:
        chunks = shard.meta.chunks
        if chunks.size:
            for col, fld in enumerate(shard.meta.schema.fields):
                if fld.name in reader.column_names:
                    raw += int(chunks[:, col]["raw_length"].sum())
                    if fld.kind is not FieldKind.FIXED:
                        raw -= 8 * shard.meta.num_rows
    per_row = max(1, raw // max(1, reader.num_rows))
    return int(np.clip(_TARGET_BLOCK_BYTES // per_row, _MIN_BLOCK_ROWS, _MAX_BLOCK_ROWS))


def _check_workers(num: int | None) -> int:
    if num is None:
        return config.get_num_parallel_workers()
    if isinstance(num, bool) or not isinstance(num, int):
        raise TypeError(f"num_parallel_workers must be an int, got {num!r}")
    if not 1 <= num <= (os.cpu_count() or 1) * 4:
        raise ArgumentError(
            f"Input num_parallel_workers is not within the required interval of "
            f"[1, {(os.cpu_count() or 1) * 4}], got {num!r}."
        )
    return num


def _check_padding_args(
    padded_sample: Mapping[str, Any] | None,
    num_padded: int | None,
    columns_list: Sequence[str] | None,
) -> None:
    if padded_sample is not None:
        if num_padded is None:
            raise RuntimeError("padded_sample is specified and requires num_padded as well.")
        if columns_list is None:
            raise RuntimeError("padded_sample is specified and requires columns_list as well.")
    elif num_padded:
        raise RuntimeError("num_padded is specified but padded_sample is not.")
    if num_padded is not None and (
        isinstance(num_padded, bool) or not isinstance(num_padded, int) or num_padded < 0
    ):
        raise ArgumentError(f"num_padded must be an int >= 0, got {num_padded!r}")
