"""``read_mrecord``: an mrecord dataset as a Ray Dataset.

Planning happens on the driver from the shards' metadata alone (row counts, page rows,
the raw byte size of every chunk); no page is read. The rows, in the read order, are cut
into about ``override_num_blocks`` contiguous position ranges (at page boundaries when
rows are read in file order, so no two tasks decode the same page); each range is a
:class:`ray.data.ReadTask` whose function closes over file paths and integers only:

1. recompute the read order (a pure function of row counts, shuffle mode, seed, epoch),
2. open just the shards its row ids fall in (``DatasetReader``, mmap),
3. read ``rows_per_block`` ids at a time with the vectorized gather, convert them to an
   Arrow table (``mrecord.ray._arrow``) and yield it, halved until it fits the target
   block size (``DataContext.target_max_block_size``, at most 128 MiB). A random order
   over small rows beyond memory is read a window at a time instead, each window in one
   pass over the files (``DatasetReader.sweep_rows``, as ``MindDataset`` does; over a
   served dataset the window's rows asked for in ascending order,
   ``RemoteDataset.sweep_rows``), and yielded ``rows_per_block`` rows at a time.

Only the requested columns are ever gathered (``columns=``, or Ray's projection pushdown
from ``ds.select_columns``).

A dataset of ``mrecord serve`` (a ``RemoteDataset``, or its
``http(s)://HOST:PORT/api/datasets/NAME`` URL: :mod:`mrecord.serve.client.served`) is
planned the same way from the server's description (row counts, bytes per row; no page
boundaries, so ranges are not snapped to pages) and each read task asks the server for
its row ids: the same rows, in the same order, as from the files.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from mrecord import DatasetReader, Shuffle, config
from mrecord.block import Block
from mrecord.errors import ArgumentError
from mrecord.format.schema import StoredSchema
from mrecord.ray._arrow import block_to_table
from mrecord.sampling import SCATTER_SAMPLE, scattered_ids, shuffle_order
from mrecord.serve.client.served import ServedSpec, served_spec
from mrecord.serve.client.served import read_rows as read_served_rows

__all__ = ["DEFAULT_BLOCK_BYTES", "MRecordDatasource", "read_mrecord"]

DEFAULT_BLOCK_BYTES = 128 << 20
"""Upper bound on the size of a block a read task yields (Ray's default target)."""
_MIN_BLOCK_BYTES = 1 << 10


class MRecordDatasource(Datasource):  # type: ignore[misc]
    """A Ray ``Datasource`` over the shards of one mrecord dataset (see the module docstring).

    ``paths`` is one shard file (its siblings come from its metadata) or a list of shard
    files, or a served dataset (module docstring; ``storage_options``: its connection
    arguments, ``token=`` ...); ``shuffle`` a :class:`mrecord.Shuffle` mode (or ``None``
    for file order) computed with ``seed`` (default ``mrecord.config.get_seed()``) and ``epoch``.
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        columns: Sequence[str] | None = None,
        verify: str = "once",
        shuffle: Shuffle | str | None = None,
        seed: int | None = None,
        epoch: int = 0,
        storage_options: dict[str, Any] | None = None,
    ):
        super().__init__()  # type: ignore[no-untyped-call]
        self._projection_map: dict[str, str] | None = None
        self._mode = None if shuffle is None else _parse_mode(shuffle)
        self._seed = config.get_seed() if seed is None else seed
        self._epoch = epoch
        self._verify = verify
        self._served = served_spec(paths, storage_options)
        if self._served is not None:
            self._plan_served(self._served, columns)
        else:
            self._plan_files(paths, columns, verify)
        # Fail here, on the driver, not in every task.
        shuffle_order(self._mode, self._counts, self._seed, self._epoch)

    def _plan_files(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        columns: Sequence[str] | None,
        verify: str,
    ) -> None:
        with DatasetReader.open(paths, columns=columns, verify=verify) as reader:
            self._schema: StoredSchema = reader.schema
            self._columns = list(reader.column_names)
            self._files = [str(p.resolve()) for p in reader.files]
            self._counts = [int(c) for c in reader.file_row_counts]
            self._num_rows = reader.num_rows
            self._page_bounds = _page_bounds(reader)
            self._column_bytes = _column_bytes(reader, self._columns)

    def _plan_served(self, spec: ServedSpec, columns: Sequence[str] | None) -> None:
        ds = spec.open(columns)
        try:
            self._schema = ds.schema
            names = [f.name for f in self._schema.fields]
            self._columns = names if columns is None else list(columns)
            self._files = [f"{spec.where}#{name}" for name in ds.file_names]
            self._counts = list(ds.file_row_counts)
            self._num_rows = sum(self._counts)
            self._page_bounds = np.array([0, self._num_rows], dtype=np.int64)
            per_row = ds.row_bytes
            self._column_bytes = {c: int(per_row[c] * self._num_rows) for c in self._columns}
        finally:
            ds.close()

    # -- Ray's Datasource API ---------------------------------------------------------------

    def get_name(self) -> str:
        """The name Ray shows for the read tasks (it prefixes ``Read``: ``ReadMRecord``)."""
        return "MRecord"

    def supports_projection_pushdown(self) -> bool:
        """``ds.select_columns(...)`` is pushed down into the read tasks."""
        return True

    def estimate_inmemory_data_size(self) -> int | None:
        """Raw bytes of the selected columns over all rows (from the chunk directory)."""
        return int(self._row_bytes(self._selected()) * self._num_rows)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
    ) -> list[ReadTask]:
        """About ``parallelism`` read tasks, each a contiguous range of the read order."""
        columns = self._selected()
        row_bytes = self._row_bytes(columns)
        target = DEFAULT_BLOCK_BYTES
        context_target = getattr(data_context, "target_max_block_size", None)
        if context_target:
            target = max(_MIN_BLOCK_BYTES, min(target, int(context_target)))
        rows_per_block = max(1, int(target // max(row_bytes, 1.0)))
        tasks = []
        for start, stop in self._ranges(parallelism):
            read_fn: Any
            if self._served is not None:
                read_fn = functools.partial(
                    _read_served_range,
                    self._served,
                    self._schema,
                    tuple(self._counts),
                    tuple(columns),
                    None if self._mode is None else self._mode.value,
                    int(self._seed),
                    int(self._epoch),
                    start,
                    stop,
                    rows_per_block,
                    target,
                )
            else:
                read_fn = functools.partial(
                    _read_range,
                    tuple(self._files),
                    tuple(self._counts),
                    tuple(columns),
                    self._verify,
                    None if self._mode is None else self._mode.value,
                    int(self._seed),
                    int(self._epoch),
                    start,
                    stop,
                    rows_per_block,
                    target,
                )
            meta = BlockMetadata(
                num_rows=stop - start,
                size_bytes=int(row_bytes * (stop - start)),
                input_files=tuple(self._input_files(start, stop)),
                exec_stats=None,
            )
            tasks.append(ReadTask(read_fn, meta, per_task_row_limit=per_task_row_limit))
        return tasks

    # -- planning -----------------------------------------------------------------------------

    def _selected(self) -> list[str]:
        projection = self._projection_map
        if projection is None:
            return list(self._columns)
        chosen = [c for c in self._columns if c in projection]
        if chosen:
            return chosen
        # No column wanted (e.g. a count): read the cheapest one, rows must still exist.
        return [min(self._columns, key=lambda c: self._column_bytes[c])]

    def _row_bytes(self, columns: Sequence[str]) -> float:
        if not self._num_rows:
            return 0.0
        return sum(self._column_bytes[c] for c in columns) / self._num_rows

    def _ranges(self, parallelism: int) -> list[tuple[int, int]]:
        n = self._num_rows
        k = max(1, min(int(parallelism), n))
        cuts = np.linspace(0, n, k + 1).round().astype(np.int64)
        if self._mode is None and len(self._page_bounds) > 2:
            # Snap inner cuts to the nearest page start: no page is decoded by two tasks.
            bounds = self._page_bounds
            inner = cuts[1:-1]
            right = np.clip(np.searchsorted(bounds, inner), 0, len(bounds) - 1)
            left = np.clip(right - 1, 0, len(bounds) - 1)
            nearer = np.where(inner - bounds[left] <= bounds[right] - inner, left, right)
            cuts[1:-1] = bounds[nearer]
        edges = np.unique(cuts).tolist()
        return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]

    def _input_files(self, start: int, stop: int) -> list[str]:
        if self._mode is not None:
            return list(self._files)
        starts = np.concatenate([[0], np.cumsum(self._counts)])
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop - 1, side="right")) - 1
        return self._files[first : last + 1]


def _parse_mode(shuffle: Shuffle | str) -> Shuffle:
    try:
        return Shuffle(shuffle)
    except ValueError:
        raise ArgumentError(
            f"shuffle must be None or a Shuffle mode ({[m.value for m in Shuffle]}), "
            f"got {shuffle!r}"
        ) from None


def _page_bounds(reader: DatasetReader) -> np.ndarray:
    """Global row ids at which pages start, plus the row count at the end."""
    parts = [
        start + shard.page_starts[:-1]
        for start, shard in zip(reader.file_starts[:-1].tolist(), reader.shards, strict=True)
    ]
    return np.unique(np.concatenate([*parts, [reader.num_rows]]).astype(np.int64))


def _column_bytes(reader: DatasetReader, columns: Sequence[str]) -> dict[str, int]:
    """Raw (decompressed) bytes of each column over all shards, from the chunk directory."""
    totals = dict.fromkeys(columns, 0)
    for shard in reader.shards:
        for name in columns:
            totals[name] += shard.meta.raw_bytes(shard.field_index(name))
    return totals


def _read_range(
    files: tuple[str, ...],
    counts: tuple[int, ...],
    columns: tuple[str, ...],
    verify: str,
    mode: str | None,
    seed: int,
    epoch: int,
    start: int,
    stop: int,
    rows_per_block: int,
    max_block_bytes: int,
) -> Iterator[pa.Table]:
    """The body of a read task: positions ``start:stop`` of the read order, as Arrow tables."""
    order = shuffle_order(None if mode is None else Shuffle(mode), counts, seed, epoch)
    ids = order.take(np.arange(start, stop, dtype=np.int64))
    file_starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=file_starts[1:])
    shard_of = np.searchsorted(file_starts, ids, side="right") - 1
    touched = np.unique(shard_of)
    reader = DatasetReader.open(
        [files[s] for s in touched.tolist()],
        columns=list(columns),
        verify=verify,
        check_index=False,
    )
    with reader:
        # Global ids → ids of the reader over the touched shards only.
        shift = np.zeros(len(counts), dtype=np.int64)
        shift[touched] = reader.file_starts[:-1] - file_starts[touched]
        local = ids + shift[shard_of]

        def read(part: np.ndarray, sweep: bool) -> Block:
            return reader.read_rows(part, sweep=sweep)

        for block in _task_blocks(read, reader.sweep_rows, columns, local, rows_per_block):
            yield from _bounded(block_to_table(block, reader.schema, columns), max_block_bytes)


def _read_served_range(
    spec: ServedSpec,
    schema: StoredSchema,
    counts: tuple[int, ...],
    columns: tuple[str, ...],
    mode: str | None,
    seed: int,
    epoch: int,
    start: int,
    stop: int,
    rows_per_block: int,
    max_block_bytes: int,
) -> Iterator[pa.Table]:
    """A read task of a served dataset: positions ``start:stop`` of the read order, asked
    of the server (its own connections, opened in the task's process)."""
    order = shuffle_order(None if mode is None else Shuffle(mode), counts, seed, epoch)
    ids = order.take(np.arange(start, stop, dtype=np.int64))
    ds = spec.open(columns)
    try:

        def read(part: np.ndarray, sweep: bool) -> Block:
            return read_served_rows(ds, part, columns, sweep=sweep)

        for block in _task_blocks(read, ds.sweep_rows, columns, ids, rows_per_block):
            yield from _bounded(block_to_table(block, schema, columns), max_block_bytes)
    finally:
        ds.close()


def _task_blocks(
    read: Callable[[np.ndarray, bool], Block],
    sweep_rows: Callable[[list[str], int], int],
    columns: Sequence[str],
    ids: np.ndarray,
    rows_per_block: int,
) -> Iterator[Block]:
    """A read task's rows ``ids`` in blocks of ``rows_per_block``, read by ``read(ids,
    sweep)``: a sweep's window at a time where the ids are a random order and the reader
    says a window is read fastest in one pass (``sweep_rows``: small rows beyond memory),
    else a block at a time. File order never asks (asking measures the device)."""
    window = 0
    if scattered_ids(ids[:SCATTER_SAMPLE]):
        window = sweep_rows(list(columns), len(ids))
        window = window if window > rows_per_block else 0
    step = window or rows_per_block
    for a in range(0, len(ids), step):
        whole = read(ids[a : a + step], bool(window))
        for b in range(0, len(whole), rows_per_block):
            yield whole.slice(b, b + rows_per_block)


def _bounded(table: pa.Table, max_bytes: int) -> Iterator[pa.Table]:
    """``table`` cut in halves until each piece is at most ``max_bytes`` (or one row)."""
    if table.num_rows <= 1 or table.nbytes <= max_bytes:
        yield table
        return
    half = table.num_rows // 2
    yield from _bounded(table.slice(0, half), max_bytes)
    yield from _bounded(table.slice(half), max_bytes)


def read_mrecord(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    columns: Sequence[str] | None = None,
    override_num_blocks: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    verify: str = "once",
    shuffle: Shuffle | str | None = None,
    seed: int | None = None,
    epoch: int = 0,
    storage_options: dict[str, Any] | None = None,
) -> ray.data.Dataset:
    """An mrecord dataset as a ``ray.data.Dataset`` (one row per record).

    ``paths``: one shard file (its siblings are found from its metadata) or a list of shard
    files. ``columns``: read only these fields (pruned inside the read tasks).
    ``override_num_blocks``: the number of read tasks (Ray chooses when None).
    ``verify``: the checksum policy of the read tasks ("once", "always", "never").
    ``shuffle=Shuffle.GLOBAL`` (or any :class:`mrecord.Shuffle` mode) reads in mrecord's
    own order for ``seed``/``epoch``: only row ids are permuted, on the driver's plan; set
    ``DataContext.get_current().execution_options.preserve_order = True`` to receive the
    blocks in exactly that order (otherwise each block keeps it, blocks arrive as done).
    ``paths`` may name a dataset of ``mrecord serve`` instead (a ``RemoteDataset`` or
    ``http(s)://HOST:PORT/api/datasets/NAME``; ``storage_options``: ``token``, ``cafile``,
    ``timeout``, ``retries``, ``transport``): the read tasks ask the server for the same rows.
    """
    source = MRecordDatasource(
        paths,
        columns=columns,
        verify=verify,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        storage_options=storage_options,
    )
    dataset: ray.data.Dataset = ray.data.read_datasource(
        source, override_num_blocks=override_num_blocks, ray_remote_args=ray_remote_args
    )
    return dataset
