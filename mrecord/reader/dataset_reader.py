"""``DatasetReader``: open a dataset's shards and read rows by global id, vectorized.

Global row ids number the rows of file 0 first, then file 1, and so on.
:meth:`DatasetReader.read_rows` groups the requested ids by shard and page and
does one numpy gather per page and column (for uncompressed fixed-width columns,
one gather per shard and column over the whole memory map), then returns a
:class:`~mrecord.block.Block` in the order asked.
"""

from __future__ import annotations

import bisect
import collections
import math
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.block import Block, BytesArray, ColumnValues
from mrecord.errors import (
    ArgumentError,
    ChunkFormatError,
    CorruptFileError,
    ForeignShardError,
    RowIndexError,
    SchemaError,
    WrongTypeError,
)
from mrecord.format.chunks import DecodedVarChunk, decode_var
from mrecord.format.compression import CODEC_IDS
from mrecord.format.head_index import head_length
from mrecord.format.ids import sorted_unique
from mrecord.format.ragged_column import RaggedColumn, ragged_from_arrays
from mrecord.format.schema import Field, FieldKind, StoredSchema
from mrecord.format.shape_groups import values_by_shape
from mrecord.reader.ragged import GROUPED_MIN_ROWS, PageRows, gather_by_shape, spanning_view
from mrecord.reader.ragged_read import read_ragged_column
from mrecord.remote.ranged import plan_reads, reading_rows
from mrecord.remote.urls import is_remote
from mrecord.storage.allocator import keep_freed_memory, return_idle_memory
from mrecord.storage.chunk_buffers import ChunkBuffers, buffer_capacity
from mrecord.storage.committed import open_committed
from mrecord.storage.naming import PathArg, resolve_files
from mrecord.storage.probe import (
    StorageProfile,
    budget_sharers,
    memory_budget,
    needs_large_requests,
    probe_storage,
)
from mrecord.storage.readahead import (
    ARRIVAL_MAX_BYTES,
    DIRECT_MIN_BYTES,
    IO_THREADS,
    STREAM_AHEAD_MAX,
    aligned_buffer,
    chunk_region,
    direct_layout,
    direct_spans,
    hint_heads,
    hint_rows,
    looks_resident,
    read_checked,
    read_checked_in_place,
    read_direct,
    read_into,
    stream_ahead,
)
from mrecord.storage.shard import ShardFile, locate_rows, rows_by_page
from mrecord.storage.value_index import ValueIndex
from mrecord.storage.verified import head_cache_bytes, kept_head_bytes

__all__ = ["DatasetReader", "memory_budget"]  # memory_budget: for the read-ahead windows above


class DatasetReader:
    """Random and sequential access to the rows of one or more shards.

    A reader pickles by path (and URL): the copy in another process reopens the same
    files lazily, on its first read, and checks they are still the same commit.
    ``reader[i]`` is one row (negative ``i`` counts from the end); ``reader.__getitems__
    (ids)`` reads a list of rows with one vectorized gather (grain, torch map-style loaders).
    """

    _identity: list[tuple[str, int, int]]  # set when pickled: the commit the copy must find

    def __init__(self, shards: list[ShardFile], columns: Sequence[str] | None = None):
        keep_freed_memory()  # bytes values reuse freed memory (mrecord.storage.allocator)
        self._shards: list[ShardFile] | None = shards
        self._open_lock = threading.Lock()
        self._open_args: dict[str, Any] | None = None
        self.schema: StoredSchema = shards[0].meta.schema
        if columns is None:
            self.columns = self.schema.names
        else:
            self.columns = _check_columns(self.schema, columns)
        self.file_row_counts = [s.meta.num_rows for s in shards]
        self.file_starts = np.zeros(len(shards) + 1, dtype=np.int64)
        np.cumsum(self.file_row_counts, out=self.file_starts[1:])
        self.num_rows = int(self.file_starts[-1])
        self._file_starts_list: list[int] = self.file_starts.tolist()
        self._fixed_plans: dict[tuple[int, str], _FixedPlan | None] = {}
        self._budget: tuple[int | None] | None = None  # (memory_budget(),), asked once
        self._sharers: int | None = None  # budget_sharers(), asked once (beyond_memory)
        self._chunk_buffers: ChunkBuffers | None = None  # made on first use
        # (shard, page) of the last windows hinted (will_read_window)
        self._window_hinted: collections.deque[set[tuple[int, int]]] = collections.deque(maxlen=2)
        self._request_bound: bool | None = None  # needs_large_requests, asked once
        self._row_reader_cache: list[list[tuple[str, Callable[[int, int], Any]]] | None] = [
            None
        ] * len(shards)

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dataset_files: PathArg,
        columns: Sequence[str] | None = None,
        verify: str = "once",
        check_index: bool = True,
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> DatasetReader:
        """Open one shard (its siblings are found from its metadata) or a list of shards.

        Paths may be URLs (``s3://``, ``gs://``, ``https://``, anything fsspec knows; needs
        ``mrecord[remote]``): the files are fetched into a local cache first
        (docs/REMOTE.md); ``storage_options`` go to fsspec.
        """
        if is_remote(dataset_files):
            from mrecord.remote.open import open_remote_shards

            shards = open_remote_shards(
                dataset_files,
                verify=verify,
                check_index=check_index,
                storage_options=storage_options,
            )
        else:
            shards = open_committed(dataset_files, verify=verify, check_index=check_index)
        try:
            reader = cls(shards, columns)
        except BaseException:
            for shard in shards:
                shard.close()
            raise
        reader._open_args = {
            "dataset_files": _reopenable(dataset_files),
            "columns": columns,
            "verify": verify,
            "check_index": check_index,
            "storage_options": dict(storage_options or {}),
        }
        return reader

    @property
    def shards(self) -> list[ShardFile]:
        """The open shard files, in global row order (reopened here after unpickling)."""
        shards = self._shards
        if shards is None:
            shards = self._reopen()
        return shards

    def _reopen(self) -> list[ShardFile]:
        with self._open_lock:
            if self._shards is not None:
                return self._shards
            if self._open_args is None:
                raise ArgumentError(
                    "this DatasetReader was built from ShardFile objects, not opened by path; "
                    "use DatasetReader.open(...) to get one that can be pickled"
                )
            fresh = DatasetReader.open(**self._open_args)
            if _identity(fresh._shards or []) != self._identity:
                fresh.close()
                raise ForeignShardError(
                    f"the dataset at {self._open_args['dataset_files']!r} changed (another commit) "
                    "after this reader was pickled; open it again in the parent"
                )
            self._shards, fresh._shards = fresh._shards, []
            return self.shards

    def __getstate__(self) -> dict[str, Any]:
        if self._open_args is None:
            raise WrongTypeError(
                "a DatasetReader built from ShardFile objects cannot be pickled; "
                "open it with DatasetReader.open(path) instead"
            )
        state = self.__dict__.copy()
        if self._shards is not None:
            state["_identity"] = _identity(self._shards)
        for name in ("_shards", "_fixed_plans", "_row_reader_cache", "_open_lock"):
            del state[name]
        state["_chunk_buffers"] = None  # the copy reads its own
        state["_window_hinted"] = collections.deque(maxlen=2)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        keep_freed_memory()  # a spawned worker process starts with glibc's defaults
        self.__dict__.update(state)
        self._shards = None
        self._fixed_plans = {}
        self._row_reader_cache = [None] * len(self.file_row_counts)
        self._open_lock = threading.Lock()
        self._budget = None  # this process's memory budget, asked again here
        self._sharers = None
        self._request_bound = None  # and its storage

    @property
    def files(self) -> list[Path]:
        """The shard files, in global row order."""
        return [s.path for s in self.shards]

    @property
    def column_names(self) -> list[str]:
        """The columns this reader returns."""
        return list(self.columns)

    @property
    def mean_row_bytes(self) -> int:
        """A row's raw (decompressed) bytes over this reader's columns, on average, from
        the shards' chunk directories (nothing read); 0 for an empty dataset. What a
        reader of the whole dataset sizes its calls by: 4,096 rows a ``read_rows`` are
        410 MB of 100 KB images."""
        if not self.num_rows:
            return 0
        total = sum(
            shard.meta.raw_bytes(shard.field_index(name))
            for shard in self.shards
            for name in self.columns
        )
        return max(1, total // self.num_rows)

    def return_idle_memory(self) -> None:
        """Where the process's memory budget is small, give back what reads keep for the
        next ones: free read buffers and freed heap memory
        (:func:`mrecord.storage.allocator.return_idle_memory`; a pipeline calls it when
        its run ends). Nothing under a larger budget; the reader stays usable."""
        return_idle_memory()

    def close(self) -> None:
        """Release the memory maps."""
        self._fixed_plans.clear()
        self._row_reader_cache = [None] * len(self.file_row_counts)
        for shard in self._shards or []:
            shard.close()

    def __enter__(self) -> DatasetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_rows

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Row ``index`` as a dict (negative counts from the end); IndexError outside."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise WrongTypeError(f"DatasetReader indices must be ints, got {index!r}")
        return self.read_row(int(index) + self.num_rows if index < 0 else int(index))

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Rows at ``indices`` (negative count from the end) with one vectorized read."""
        ids = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(ids) and ids.min() < -self.num_rows:
            raise RowIndexError(
                f"row index {int(ids.min())} is out of range: the dataset has {self.num_rows} rows"
            )
        ids = np.where(ids < 0, ids + self.num_rows, ids)
        return list(self.read_rows(ids).iter_rows())

    # -- reading -------------------------------------------------------------------------------

    def read_row(self, row_id: int) -> dict[str, Any]:
        """One row as a dict: numpy scalars/arrays, ``bytes`` and ``str``.

        Per-call work is bounds, two bisections and one small reader per column, built
        once per shard (:meth:`_row_readers`); chunks are still checked by the
        shard's checksum policy.
        """
        if type(row_id) is not int:
            if isinstance(row_id, bool) or not isinstance(row_id, (int, np.integer)):
                raise ArgumentError(f"row id must be an int, got {row_id!r}")
            row_id = int(row_id)
        if not 0 <= row_id < self.num_rows:
            raise RowIndexError(
                f"row id {row_id} is out of range: the dataset has {self.num_rows} rows"
            )
        starts = self._file_starts_list
        s = bisect.bisect_right(starts, row_id) - 1
        readers = self._row_reader_cache[s]
        if readers is None:
            readers = self._row_reader_cache[s] = self._row_readers(s)
        page_starts = self.shards[s].page_starts_list
        local = row_id - starts[s]
        page = bisect.bisect_right(page_starts, local) - 1
        slot = local - page_starts[page]
        return {name: read(page, slot) for name, read in readers}

    def _row_readers(self, s: int) -> list[tuple[str, Callable[[int, int], Any]]]:
        """(column, ``read(page, slot) -> value``) for shard ``s``, in column order."""
        out = []
        for name in self.columns:
            field = self.schema[name]
            plan = self._fixed_plan(s, field) if field.kind is FieldKind.FIXED else None
            out.append((name, _row_reader(self.shards[s], field, plan)))
        return out

    def iter_rows(self, chunk_size: int = 1024) -> Iterator[dict[str, Any]]:
        """Every row in order."""
        for block in self.iter_blocks(chunk_size):
            yield from block.iter_rows()

    def iter_blocks(self, chunk_size: int = 1024) -> Iterator[Block]:
        """Every row in order, ``chunk_size`` rows per block."""
        for start in range(0, self.num_rows, chunk_size):
            yield self.read_rows(np.arange(start, min(start + chunk_size, self.num_rows)))

    def read_rows(
        self,
        ids: np.ndarray | Sequence[int],
        columns: Sequence[str] | None = None,
        *,
        bytes_as_arrays: bool = False,
        window: bool = False,
        sweep: bool = False,
        between_waves: Callable[[], None] | None = None,
    ) -> Block:
        """Rows at global ``ids`` (any order, repeats allowed) as a Block.

        With ``bytes_as_arrays`` a bytes value comes as a read-only ``uint8`` array
        viewing the file's memory map (no copy; what MindSpore's iterators give for
        bytes), instead of a ``bytes`` object.

        ``window``: the rows are a block shuffle's window (``Shuffle.BLOCK``), whose next
        reads take the other rows of the same chunks; beyond memory their chunks are then
        read whole into the reader's buffers when they fit (see ``_buffered_columns``).
        ``sweep``: the rows are a window of a random order as :meth:`sweep_rows` cuts them;
        beyond memory their chunks are then read in one pass, whole, a wave at a time,
        however many there are. Neither changes what the read returns.

        ``between_waves`` is called before each wave of chunks a read takes whole after
        the first: a caller that wants a long read (a sweep's pass) to end early raises
        there, and the read ends with that exception.
        """
        ids = self._checked_ids(ids)
        names = self.columns if columns is None else _check_columns(self.schema, columns)
        groups = self._group(ids)
        streaming = self._stream(ids, groups, names)
        # Every range of this read in flight at once; bytes columns of cold shards are then
        # read straight into their values (_read_cold), the rest through the hinted map;
        # a block-local read beyond memory takes whole chunks into the reader's buffers.
        buffered = self._buffered_columns(ids, groups, names, window, sweep)
        direct = [n for n in names if self.schema[n].kind is FieldKind.BYTES and n not in buffered]
        if buffered and len(buffered) == len(names):
            # Every column from whole chunks in the reader's buffers: nothing to hint, and
            # no need to tell warm from cold (a chunk held, or in the page cache, is read
            # as fast either way; the warm test was a fifth of a BLOCK read's time).
            cold = {group[0] for group in groups}
        else:
            cold = self._hint(groups, names, direct + buffered)
        out: dict[str, ColumnValues] = {}
        with reading_rows(self.shards, groups, names):  # remote shards fetch just these rows
            if buffered and cold:
                out.update(
                    self._gather_buffered(
                        buffered, len(ids), groups, cold, bytes_as_arrays, between_waves
                    )
                )
                if bool(np.all(ids[1:] >= ids[:-1])):  # file order: only the last page's
                    buffers = self._buffers()  # chunks can serve the next read
                    for s, _, pages, _ in groups:
                        buffers.drop_before(s, int(pages[-1]))
            for name in names:
                field = self.schema[name]
                if name in out:
                    continue
                if field.kind is FieldKind.FIXED:
                    out[name] = self._gather_fixed(field, len(ids), groups)
                else:
                    out[name] = self._gather_var(
                        field, len(ids), groups, bytes_as_arrays, cold, not streaming
                    )
        return Block({name: out[name] for name in names}, ids)

    def read_ragged(self, ids: np.ndarray | Sequence[int], column: str) -> RaggedColumn:
        """The values of variable-shape ``column`` at global ``ids`` (any order, repeats
        allowed) as one :class:`~mrecord.format.ragged_column.RaggedColumn`: one buffer
        of every value's items, their offsets and shapes, instead of one array a value.

        Opt-in, for a consumer that reads the values in one pass (a scan, statistics, a
        collate step that packs them again): Arrow's form of a ragged column, as Lance
        and Hugging Face ``datasets`` hand one out. ``read_rows`` and the pipeline keep
        MindSpore's one writeable array a value. Each chunk is checked by the reader's
        ``verify`` policy first, as ``read_rows`` checks it.

        Example::

            ragged = reader.read_ragged(range(1000), "points")
            ragged.values.sum()         # every value's items in one pass
            ragged[3].shape             # value 3, a view: e.g. (17, 3)
        """
        ids = self._checked_ids(ids)
        if not isinstance(column, str):
            raise WrongTypeError(f"read_ragged takes one column name, got {column!r}")
        _check_columns(self.schema, [column])
        field = self.schema[column]
        if field.kind is not FieldKind.VARARRAY:
            raise ArgumentError(
                f"read_ragged: column {column!r} is not a variable-shape array (its type is "
                f"{field.type!r}, shape {field.shape}); read it with read_rows"
            )
        groups = self._group(ids)
        self._hint(groups, [column])
        with reading_rows(self.shards, groups, [column]):
            # the pages each shard's rows span: at least the pages they touch, no sort
            span = sum(int(pages.max()) - int(pages.min()) + 1 for _, _, pages, _ in groups)
            if len(ids) >= _RAGGED_PAGE_ROWS * span:
                return read_ragged_column(self.shards, field, groups, len(ids))
            # A few rows a page (a small random read): cut page by page, each page's
            # numpy steps cost more than its rows; the values as read_rows takes them,
            # then joined (reads of 256 random ids of 2M variable-shape rows on ~800
            # pages: 36-43K rows/s against 14-17K page by page; of 12,500 rows on 5
            # pages, 51 rows a page, the two alike, and page by page 3x at 4,096 ids).
            arrays = self._gather_var(field, len(ids), groups)
            return ragged_from_arrays(arrays, field.dtype, len(field.shape or ()))

    def _stream(self, ids: np.ndarray, groups: list[Any], names: Sequence[str]) -> bool:
        """A read of bytes values in file order beyond memory (``shuffle=False``,
        ``Shuffle.INFILE``'s runs) on storage that serves few requests for its bandwidth
        (:attr:`needs_large_requests`: a volume throttled to large requests): keep the
        bytes after it streaming in (``readahead.stream_ahead``), so that its chunks,
        heads and values come from the page cache as the kernel's large sequential reads
        bring them, not as one request each; its values are then read buffered, not
        direct. Whether every shard of the read streams.

        Not elsewhere, measured (images and tabular ``shuffle=False`` in a 200 MB group,
        alternating with direct reads): on the local disk (~16K IOPS, 69 KB a request for
        its bandwidth, measured) a streamed second epoch of images was 10-17% slower (the page cache
        reclaimed in the group), and tabular rows (no bytes values) read 1.5x the bytes in
        a first epoch; on the 200 IOPS / 150 MB/s throttle images went from 31% of its
        sequential limit to 69-90%."""
        if not self._streams(ids, groups, names):
            return False
        budget = self._memory_budget() or 0
        ahead = max(4 << 20, min(STREAM_AHEAD_MAX, budget // 6))
        streams = True
        for s, _, pages, _ in groups:
            shard = self.shards[s]
            first, last = int(pages[0]), int(pages[-1])
            chunks = shard.meta.chunks
            # From the end of the page before (a value table lies just before its chunk)
            # to the end of the last page's last chunk.
            start = 0 if first == 0 else _page_end(chunks, first - 1)
            streams &= stream_ahead(shard, start, _page_end(chunks, last), ahead)
        return streams

    def _streams(self, ids: np.ndarray, groups: list[Any], names: Sequence[str]) -> bool:
        """Whether a read of ``ids`` (its ``groups``, of columns ``names``) streams
        (:meth:`_stream`), asking nothing of storage.

        A read without a bytes column streams once its chunks are checked: before, the
        check reads each chunk whole in large requests of its own (and a stream beside it
        read 1.36x the bytes: tabular rows, file order, an hdd-like volume); after, its
        exact row ranges asked for one column at a time came to ~150 KB a request, and a
        second epoch of 4M tabular rows read at 21-34% of the sequential limit on that
        volume (streamed: 94%)."""
        if len(ids) < 2 or not self._beyond_memory() or not bool(np.all(ids[1:] >= ids[:-1])):
            return False
        if not self.needs_large_requests:
            return False
        # A sparse sorted subset does not: streaming would read what it skips.
        if len(ids) < _STREAMED_SHARE * (int(ids[-1]) - int(ids[0]) + 1):
            return False
        if any(self.schema[n].kind is FieldKind.BYTES for n in names):
            return True
        for s, _, pages, _ in groups:
            shard = self.shards[s]
            unique = sorted_unique(pages)
            for name in names:
                if not shard.verified_chunks(unique, shard.field_index(name)).all():
                    return False
        return True

    @property
    def needs_large_requests(self) -> bool:
        """Whether the storage under this reader's files serves few requests for its
        bandwidth (a read throttle allowing large requests, as the system's settings say:
        ``mrecord.storage.probe.needs_large_requests``; an hdd-like volume): every request
        counts there, whatever its size. Asked once, of the first shard's device."""
        if self._request_bound is None:
            self._request_bound = bool(self.shards) and needs_large_requests(self.shards[0].path)
        return self._request_bound

    def heads_all_indexed(self, columns: Sequence[str] | None = None) -> bool:
        """Whether everything a cold read of ``columns`` (default the reader's) waits on
        before its values comes from the shards' head indexes (format 1.4), so that
        :meth:`will_need_heads` would ask the disk for nothing
        (:meth:`~mrecord.storage.shard.ShardFile.head_index_serves`)."""
        names = self.columns if columns is None else _check_columns(self.schema, columns)
        return all(
            shard.head_index_serves(shard.field_index(name))
            for shard in self.shards
            for name in names
        )

    def plan_reads(self, order_of: Callable[[int], np.ndarray], epoch: int) -> None:
        """Tell shards read from a store by range requests the coming row orders
        (``order_of(e)``: epoch ``e``'s global ids) so their cache keeps the rows read
        soonest (docs/REMOTE.md "Larger than the cache"); local shards ignore it."""
        plan_reads(self.shards, order_of, epoch)

    def will_need(
        self, ids: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> None:
        """Hint: rows ``ids`` (of ``columns``, default the reader's) will be read soon.

        Storage starts reading exactly their bytes now (:mod:`mrecord.storage.readahead`);
        a later :meth:`read_rows` of them finds them in memory or on their way. Ids out of
        range are ignored; never changes what a read returns.
        """
        _, groups, names = self._hinted_rows(ids, columns)
        self._hint(groups, names)

    def will_read_window(
        self, ids: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> None:
        """Hint: a block shuffle's ``window`` read of rows ``ids`` (:meth:`read_rows`)
        comes a window from now; read the whole chunks it will take into the reader's
        buffers now (those not held already), on the calling thread.
        Never changes what a read returns; a damaged chunk raises here as the read would,
        and is read (and raises) again by the read.

        A window's first read takes every chunk of the window's pages at once, and
        nothing asked for them before: the disk was idle while the window before was
        handed out, and the first read waited for the whole window (measured on an
        hdd-like volume, 150 MB/s: the disk busy about half the time in bursts, BLOCK
        over 2M variable-shape rows at 47% of the sequential limit). The buffers hold
        this window and the next one (up to a third of the memory budget); the page
        cache would not (a memory group reclaims pages read ahead first, before they are
        used). Nothing here where the read would not take its columns from the buffers
        (data in memory, a remote shard, compressed chunks)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not len(ids) or not 0 <= int(ids[0]) < self.num_rows:
            return
        # Every read of a window takes rows of all its pages: once its first read is
        # hinted, the others would find every page asked for (and cost a grouping each).
        [(s, _, first_page, _)] = self._group(ids[:1])
        if any((s, int(first_page[0])) in pages for pages in self._window_hinted):
            return
        wanted, groups, names = self._hinted_rows(ids, columns)
        buffered = self._buffered_columns(wanted, groups, names, window=True)
        budget = self._memory_budget()
        if len(buffered) != len(names) or budget is None:
            return
        hinted: set[tuple[int, int]] = set()
        self._window_hinted.append(hinted)  # the last two windows' pages are kept
        wanted_chunks = []
        window_bytes = 0
        for s, _, pages, _slots in groups:
            shard = self.shards[s]
            cols = [shard.field_index(name) for name in buffered]
            unique = np.unique(pages).tolist()
            hinted.update((s, page) for page in unique)
            window_bytes += int(shard.meta.chunks["length"][unique][:, cols].sum())
            wanted_chunks.append((s, shard, cols, unique))
        buffers = self._buffers()
        if not buffers.make_room(2 * window_bytes + window_bytes // 8, budget // 3):
            return
        for s, shard, cols, unique in wanted_chunks:
            # those held already are only marked recent, those on their way waited for
            buffers.chunks(s, shard, cols, unique, keep=True)

    def will_need_heads(
        self,
        ids: np.ndarray | Sequence[int],
        columns: Sequence[str] | None = None,
        *,
        window: bool = False,
    ) -> bool:
        """Hint: rows ``ids`` will be read a little later; start reading what their cold
        read first waits on (chunk heads, unchecked fixed-width chunks:
        :func:`~mrecord.storage.readahead.hint_heads`), not their values. For a reader
        some blocks ahead of its reads, beyond memory. Never changes what a read returns.
        Returns False where their reads need no hint (below): a caller announcing reads
        that are all alike (a block shuffle's windows, a file-order epoch) may stop.

        Nothing for a read that will take every column from whole chunks in the reader's
        buffers (``Shuffle.BLOCK``'s window of pages, :meth:`_buffered_columns`): each
        chunk comes whole with its head, one request, and a head asked for alone would be
        one more (measured on an hdd-like volume, 200 requests a second: a first epoch of
        BLOCK reads at 844 rows/s, 1,420 requests, against 1,469 and 769 in the second,
        whose heads were parsed). Nor for one that streams (:meth:`_stream`): a head a few
        blocks ahead lies past the stream, a request of its own that also splits the
        stream's large ones where it lands (the same volume, file order: a third of the
        requests 4-8 KiB, the epoch at 47% of the sequential limit). ``window`` as for
        :meth:`read_rows`."""
        wanted, groups, names = self._hinted_rows(ids, columns)
        if self._streams(wanted, groups, names):
            return False
        if len(self._buffered_columns(wanted, groups, names, window)) == len(names):
            return False
        for s, _, pages, _slots in groups:
            hint_heads(self.shards[s], pages, names)
        return True

    def _checked_ids(self, ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """``ids`` as a flat int64 array; a :class:`RowIndexError` naming the first one
        out of range."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_rows):
            bad = ids[(ids < 0) | (ids >= self.num_rows)][0]
            raise RowIndexError(
                f"row id {int(bad)} is out of range: the dataset has {self.num_rows} rows"
            )
        return ids

    def _hinted_rows(
        self, ids: np.ndarray | Sequence[int], columns: Sequence[str] | None
    ) -> tuple[np.ndarray, list[Any], list[str]]:
        """The in-range ``ids`` of a hint, their groups (:meth:`_group`) and its columns
        (default the reader's); ids out of range are dropped, as a hint may be wrong."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ids = ids[(ids >= 0) & (ids < self.num_rows)]
        names = self.columns if columns is None else _check_columns(self.schema, columns)
        return ids, self._group(ids), list(names)

    def _hint(
        self, groups: list[Any], names: Sequence[str], direct: Sequence[str] = ()
    ) -> set[int]:
        """Hint the rows of ``groups`` to storage; the shards that were cold (hinted)."""
        shards = self.shards
        beyond = self._beyond_memory()
        return {
            s
            for s, _, pages, slots in groups
            if hint_rows(shards[s], pages, slots, names, direct, beyond)
        }

    def locate_bytes(
        self, ids: np.ndarray | Sequence[int], column: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the values of bytes ``column`` at ``ids`` lie in the shard files.

        Returns int64 arrays ``(shard, offset, length)``: value ``i`` is the bytes
        ``offset[i]:offset[i] + length[i]`` of file ``self.files[shard[i]]``, or, where
        ``shard[i]`` is -1, a value stored compressed (read it with :meth:`read_rows`).
        Each chunk is checksummed first under the reader's ``verify`` policy, as a read
        would: the places handed out hold checked bytes. For a reader in another process
        that maps the same files (``mrecord serve``'s same-host readers).
        """
        ids = self._checked_ids(ids)
        field = self.schema[_check_columns(self.schema, [column])[0]]
        if field.kind is not FieldKind.BYTES:
            raise SchemaError(f"column {column!r} is {field.kind.value}, not bytes")
        n = len(ids)
        shards, offsets, lengths = [-1] * n, [0] * n, [0] * n
        for s, positions, pages, slots in self._group(ids):
            shard = self.shards[s]
            col = shard.field_index(field.name)
            rows = shard.page_starts_list
            by_value: list[tuple[int, Any, int, int, int | None, int]] = []  # _read_cold's
            by_value_slots: list[int] = []
            for page, members in _by_page(pages):
                where = members if positions is None else positions[members]
                base = shard.uncompressed_offset(page, col)
                # A chunk with a CRC-32C per value (format 1.3) of which only some rows are
                # asked for: those values are read and checked alone (below). Checked whole,
                # a random order read a 1 MiB chunk for each 100 KB row it located.
                one_by_one = (
                    base is not None
                    and len(members) < rows[page + 1] - rows[page]
                    and shard.has_value_crcs(page, col)
                    and shard.needs_check(page, col)
                )
                plain = shard.plain_var_page(page, field) if one_by_one else None
                if plain is None:
                    one_by_one = False
                    head, raw = shard.var_page(page, field)  # checksummed by the policy
                else:
                    head, raw = plain
                starts = head.offsets
                start = head.data_start + (base or 0)
                for pos, slot in zip(where.tolist(), slots[members].tolist(), strict=True):
                    lengths[pos] = starts[slot + 1] - starts[slot]
                    if base is not None:
                        shards[pos] = s
                        offsets[pos] = start + starts[slot]
                    if one_by_one:
                        a = head.data_start + starts[slot]
                        by_value.append((pos, raw, a, a + lengths[pos], base, page))
                        by_value_slots.append(slot)
            _check_located(shard, col, by_value, by_value_slots)
        return (
            np.array(shards, dtype=np.int64),
            np.array(offsets, dtype=np.int64),
            np.array(lengths, dtype=np.int64),
        )

    def _group(self, ids: np.ndarray) -> list[Any]:
        """(shard, positions in ``ids`` or None for all of them, pages, slots) per shard."""
        if not len(ids):
            return []
        if len(self.shards) == 1:
            shard = self.shards[0]
            pages, slots = locate_rows(shard.page_starts, shard.uniform_page_rows, ids)
            return [(0, None, pages, slots)]
        shard_of = np.searchsorted(self.file_starts, ids, side="right") - 1
        local = ids - self.file_starts[shard_of]
        groups = []
        for s in sorted_unique(shard_of).tolist():
            positions = np.flatnonzero(shard_of == s)
            shard = self.shards[s]
            pages, slots = locate_rows(shard.page_starts, shard.uniform_page_rows, local[positions])
            groups.append((s, positions, pages, slots))
        return groups

    def _gather_fixed(self, field: Field, n: int, groups: list[Any]) -> np.ndarray:
        shape = field.row_shape
        elems = int(np.prod(shape, dtype=np.int64))
        if elems == 0:
            return np.empty((n, *shape), dtype=field.dtype)  # no values to read
        if len(groups) == 1 and groups[0][1] is None:
            # One shard, rows in the order asked: the gather is the result (one copy).
            s, _, pages, slots = groups[0]
            plan = self._fixed_plan(s, field)
            if plan is not None:
                return plan.gather(self.shards[s], pages, slots).reshape((n, *shape))
        result = np.empty((n, *shape), dtype=field.dtype)
        for s, positions, pages, slots in groups:
            shard = self.shards[s]
            where = slice(None) if positions is None else positions
            plan = self._fixed_plan(s, field)
            if plan is not None:
                result[where] = plan.gather(shard, pages, slots).reshape((len(pages), *shape))
                continue
            for page, members in _by_page(pages):
                values = shard.fixed_page(page, field)
                result[members if positions is None else positions[members]] = values[
                    slots[members]
                ]
        return result

    def _buffered_columns(
        self,
        ids: np.ndarray,
        groups: list[Any],
        names: list[str],
        window: bool = False,
        sweep: bool = False,
    ) -> list[str]:
        """The columns (of every kind: strings kept the map's path, and a random order over
        6M file names in a 250 MB memory group faulted on it, 12.6K rows/s) this read takes
        from whole chunks in the reader's own buffers (:mod:`mrecord.storage.chunk_buffers`)
        when its shards are cold and beyond memory; else none.

        In file order (``shuffle=False``, ``Shuffle.INFILE``'s runs) a read without a
        bytes column that takes several rows of each chunk does: each chunk is then read
        once, checked as it arrives, and its pages leave the page cache at once; after the
        read only its last page's chunks stay held (``read_rows``). Through the map, the
        first epoch's check read each chunk, the gather faulted its pages in again, and
        the memory group reclaimed the page cache on every allocation (measured, 8M
        tabular rows in a 200 MB group: ``memory.failcnt`` 258K-268K an epoch, against
        ~500 this way; rows/s on this disk 1.11M -> 1.80M, on a 3,000 IOPS / 250 MB/s
        throttle 1.30M -> 1.71M, second epochs 1.00M -> 1.72M and 1.10M -> 1.60M).

        A read that takes several rows per chunk on average and whose chunks all fit in
        the buffers at once (``Shuffle.BLOCK``'s window of pages) does: 1.5 rows with a
        bytes or variable-shape column (``Shuffle.BLOCK`` reads of images take 2-4), 4 for
        fixed-width columns alone. With such a column and fewer (a random order over
        images, one row per 1 MiB chunk; measured in a 200 MB group) it never does.
        Otherwise, over more chunks than the buffers hold or with fixed-width columns
        spread thin, when one pass over the chunks pays (:meth:`_one_pass_pays`).

        A ``window`` read (a block shuffle's: its next reads take the other rows of the same
        chunks) does whenever its chunks fit in the buffers, however few rows it takes of
        each (measured: 2.4 GB of images in a 763 MB group on an hdd-like volume, a few
        of each epoch's 241-row BLOCK reads took 1.47 rows a chunk, and read each value
        with a request of its own, 1-2 s each at 200 requests a second).

        A ``sweep`` read (a window of a random order, :meth:`sweep_rows`) does whenever
        its columns can be read so (uncompressed, regular chunks): it is one pass by
        design, its window cut so that the pass pays."""
        if not CHUNK_BUFFERS or len(ids) < 2 or not self._beyond_memory():
            return []
        fields = [self.schema[n] for n in names]
        if not fields:
            return []
        in_file_order = bool(np.all(ids[1:] >= ids[:-1]))
        if in_file_order and any(field.kind is FieldKind.BYTES for field in fields):
            # Bytes values stream through the map or come direct (_stream). Variable-shape
            # ones come from the buffers when the read's chunks fit in them (below), each
            # page's as slices of one copy of its data (_var_from_chunks, a run): 2M rows
            # of ~420 bytes in a 266 MB group on a 3,000 IOPS / 250 MB/s throttle,
            # 266-331K -> 385-399K rows/s, memory.failcnt 182K -> 3.5K an epoch (through
            # the map the group reclaimed the page cache on every allocation). Before
            # values were taken a run at a time they were no faster so (35-38K rows/s
            # against 32-42K, 2026-11-27).
            return []
        with_var = any(field.kind is not FieldKind.FIXED for field in fields)
        rows_per_chunk = _SHARED_CHUNK_ROWS if with_var else _BUFFERED_ROWS_PER_CHUNK
        total = 0
        # thin: rows spread over their chunks, as a random order reads them (a window's
        # next reads come back to its chunks, so a window is never taken for one)
        unchecked = thin = False
        for s, _, pages, _ in groups:
            shard = self.shards[s]
            unique = sorted_unique(pages)
            if len(pages) < rows_per_chunk * len(unique):
                if in_file_order:
                    return []  # a sparse subset in file order: the map's path
                if with_var and not (window or sweep):
                    return []  # a random order over big values: the direct reads
                thin = True
            chunks = shard.meta.chunks[unique]
            for field in fields:
                col = shard.field_index(field.name)
                nbytes = self._whole_chunk_bytes(s, field, chunks[:, col])
                if nbytes is None:
                    return []  # an irregular or compressed chunk: the map's path
                total += nbytes
                unchecked = unchecked or not shard.verified_chunks(unique, col).all()
        if sweep or ((window or not thin) and self._buffers().fits(total)):
            return [f.name for f in fields]
        if in_file_order and with_var:
            # Its values are copies beside the buffers, not page cache the group can
            # reclaim: a read_rows of 100,000 such rows (42 MB) a wave at a time got a
            # reader in a 100 MB group OOM-killed; through the map it thrashed, and ended.
            return []
        if thin and with_var:
            return []  # a window wider than the buffers: as a random order
        if unchecked or self._one_pass_pays(groups, len(fields), total):
            return [f.name for f in fields]
        return []

    def _one_pass_pays(self, groups: list[Any], columns: int, nbytes: int) -> bool:
        """Whether a read is faster as one pass over whole chunks (``nbytes`` of them, a
        wave at a time: ``_WAVE_SHARE`` of the buffers) than as a random request per row
        and column: where the device's measured bandwidth and IOPS say the pass takes at
        most ``1 / _PASS_SPEEDUP`` of the requests' time (``StorageProfile.pass_seconds``
        and ``requests_seconds``: an hdd's or a throttled volume's few requests). A read
        whose chunks need their checksum takes the pass without asking: they are read
        whole for it (through the map, a small memory group reclaimed them before the
        rows were gathered, and every row was a 4 KiB fault after: 0 rows in 15 s of a
        GLOBAL epoch of 4M tabular rows on an hdd-like volume)."""
        shard = self.shards[groups[0][0]]
        if shard.read_fd() is None:
            return False
        profile = probe_storage(shard.path)
        if profile is None:
            return False
        requests = sum(len(pages) for _, _, pages, _ in groups) * columns
        return profile.pass_seconds(nbytes) * _PASS_SPEEDUP <= profile.requests_seconds(requests)

    def sweep_rows(
        self,
        columns: Sequence[str] | None = None,
        rows: int | None = None,
        *,
        budget: int | None = None,
    ) -> int:
        """Rows per window in which a random order over these files is read fastest, or
        0 where rows are read as they come.

        Beyond memory a random order reads each row's values with requests of their own
        (a request per column for fixed-width rows: their columns lie in chunks of their
        own). Where the rows are small, one pass over the columns' chunks, read whole,
        serves thousands of rows for each that many requests would: a window of the order
        is read by sweeping the files (``read_rows(ids, sweep=True)``), every row of the
        window taken on the way, and handed out block by block. The window is as large as
        ``_SWEEP_WINDOWS`` of them fit in the memory budget (the one handed out, the next
        being read, and room beside), and a sweep is taken where the device's measured
        bandwidth and IOPS (``probe_storage``) say one pass over every chunk of the
        columns takes at most ``1 / _SWEEP_SPEEDUP`` of the window's requests.

        Measured: 8M tabular rows (609 MB) on a volume throttled to 3,000 IOPS and 250
        MB/s, the reader in a 200 MB memory group: a window of 200,000 random rows in
        2.5-2.9 s (70-80K rows/s) where rows one by one read 770-860 rows/s; on this
        machine's disk unthrottled, 0.8-1.0 s (200-240K rows/s).

        ``rows``: how many rows the order holds at most (an epoch of a few rows spread over
        every chunk is cheaper as requests: the rule weighs the window it would read).
        ``budget``: the bytes the window is cut from, where the window is held by another
        process than this one (a ``RemoteDataset`` client of ``mrecord serve``, which
        reads its window's rows from the server in ascending order and puts them back in
        its own memory); default this process's memory budget. Whether the files are
        beyond memory is always this process's question: it is the one reading them.

        0 unless the files are local, larger than the memory this process may fill, and
        every column is a fixed-width, variable-shape, string or small bytes one (values
        under ``_VIEW_MIN_BYTES`` on average, copied out of the pass's buffers) stored
        uncompressed (compressed chunks keep the map's path).
        """
        names = self.columns if columns is None else _check_columns(self.schema, columns)
        budget = self._memory_budget() if budget is None else budget
        if not CHUNK_BUFFERS or not names or budget is None or not self._beyond_memory():
            return 0
        per_row = _SWEEP_ROW_BYTES
        nbytes = 0
        for s, shard in enumerate(self.shards):
            if shard.read_fd() is None:
                return 0  # not a local file
            for name in names:
                field = self.schema[name]
                if field.kind not in _SWEPT_KINDS and not self._small_bytes(field):
                    return 0
                if not shard.meta.num_pages:
                    continue
                col = shard.field_index(name)
                whole = self._whole_chunk_bytes(s, field, shard.meta.chunks[:, col])
                if whole is None:
                    return 0
                nbytes += whole
        for name in names:
            field = self.schema[name]
            if field.kind is FieldKind.FIXED:
                per_row += field.dtype.itemsize * int(np.prod(field.row_shape, dtype=np.int64))
            else:
                raw = sum(
                    s.meta.raw_bytes(s.field_index(name), values_only=True) for s in self.shards
                )
                per_row += raw // max(1, self.num_rows) + _SWEEP_ARRAY_BYTES
        window = min(self.num_rows, budget // (_SWEEP_WINDOWS * per_row))
        if rows is not None:
            window = min(window, rows)
        profile = probe_storage(self.shards[0].path)
        if window < 2 or profile is None:
            return 0
        requests = profile.requests_seconds(window * len(names))
        requests += self._head_rereads_seconds(names, window, profile)
        return window if profile.pass_seconds(nbytes) * _SWEEP_SPEEDUP <= requests else 0

    def _small_bytes(self, field: Field) -> bool:
        """Whether ``field`` is a bytes column whose values average under
        ``_VIEW_MIN_BYTES``: a sweep copies them out of its buffers (views of big values
        would pin the pass's buffers)."""
        if field.kind is not FieldKind.BYTES or not self.num_rows:
            return False
        raw = sum(
            s.meta.raw_bytes(s.field_index(field.name), values_only=True) for s in self.shards
        )
        return raw // self.num_rows < _VIEW_MIN_BYTES

    def _head_rereads_seconds(
        self, names: Sequence[str], rows: int, profile: StorageProfile
    ) -> float:
        """What ``rows`` random rows read one by one also cost for their pages' heads
        (variable-shape columns of ``names``): each row whose page's head the shared
        head cache does not keep reads it again (a request and the head's bytes) and
        parses it. The cache keeps a tenth of the memory budget
        (``mrecord.storage.verified``); over 2M rows of a ``[-1, 3]`` column (48 MB of
        heads, 61 KB a page of 2,544 rows) in a 125 MB memory group it kept a fifth, and
        rows one by one read at 4.9K rows/s with 370K major faults for 200K rows, where
        a request a row was modelled and a sweep read 22K rows/s."""
        stored = kept = pages = columns = 0
        for name in names:
            field = self.schema[name]
            if field.kind not in (FieldKind.VARARRAY, FieldKind.STRING):
                continue
            columns += 1
            for shard in self.shards:
                count = shard.meta.num_pages
                if count:  # a chunk of n rows: 8 (n + 1) bytes of offsets, 8 n ndim of shapes
                    pages += count
                    size = head_length(field, shard.meta.num_rows) + 8 * (count - 1)
                    stored += size
                    kept += math.ceil(size * _kept_share(shard, shard.field_index(name)))
        if not pages:
            return 0.0
        missed = max(0.0, 1.0 - head_cache_bytes() / max(1, kept))
        a_head = profile.requests_seconds(1) + profile.pass_seconds(stored // pages)
        return rows * columns * missed * a_head

    def _whole_chunk_bytes(self, s: int, field: Field, chunks: np.ndarray) -> int | None:
        """Stored bytes of ``chunks`` (chunk records of ``field`` in shard ``s``) when they
        can be read whole into the reader's buffers; None for an irregular fixed-width
        chunk or a compressed one (those keep the map's path)."""
        if field.kind is FieldKind.FIXED and self._fixed_plan(s, field) is None:
            return None
        if bool((chunks["codec"] != _CODEC_NONE).any()):
            return None
        return int(chunks["length"].sum())

    def _buffers(self) -> ChunkBuffers:
        if self._chunk_buffers is None:
            self._chunk_buffers = ChunkBuffers(buffer_capacity(self._memory_budget()))
        return self._chunk_buffers

    def _gather_buffered(
        self,
        names: list[str],
        n: int,
        groups: list[Any],
        cold: set[int],
        bytes_as_arrays: bool,
        between_waves: Callable[[], None] | None = None,
    ) -> dict[str, ColumnValues]:
        """Columns' values, the cold shards' from whole chunks in the reader's buffers
        (read and checked on the way, :meth:`_take_from_chunks`), the others' from the
        map."""
        fields = [self.schema[name] for name in names]
        out: dict[str, ColumnValues] = {
            f.name: np.empty((n, *f.row_shape), dtype=f.dtype)
            if f.kind is FieldKind.FIXED
            else [None] * n
            for f in fields
        }
        for s, positions, pages, slots in groups:
            taken = (
                self._take_from_chunks(s, fields, pages, slots, bytes_as_arrays, between_waves)
                if s in cold
                else None
            )
            for field in fields:
                got = taken[field.name] if taken is not None else None
                if got is not None and positions is None:
                    # the read's one group, in its order, in arrays and lists made for
                    # this read: they are the answer (no copy into ``out``)
                    out[field.name] = got
                    continue
                if got is None:
                    group = [(s, None, pages, slots)]
                    if field.kind is FieldKind.FIXED:
                        got = self._gather_fixed(field, len(pages), group)
                    else:
                        got = self._gather_var(field, len(pages), group, bytes_as_arrays)
                if field.kind is not FieldKind.FIXED:
                    values: list[Any] = out[field.name]  # type: ignore[assignment]
                    targets = range(n) if positions is None else positions.tolist()
                    for pos, value in zip(targets, got, strict=True):
                        values[pos] = value
                else:
                    column: np.ndarray = out[field.name]  # type: ignore[assignment]
                    column[slice(None) if positions is None else positions] = got
        return out

    def _take_from_chunks(
        self,
        s: int,
        fields: list[Field],
        pages: np.ndarray,
        slots: np.ndarray,
        as_arrays: bool,
        between_waves: Callable[[], None] | None = None,
    ) -> dict[str, Any] | None:
        """The values of ``fields`` at (``pages``, ``slots``) of shard ``s``, in that order,
        from whole chunks in the reader's buffers; None when the shard cannot be read so
        (not a local file). Chunks are taken a wave of pages at a time, every column's
        chunks of a wave in flight together: all at once when they fit in the buffers (a
        ``Shuffle.BLOCK`` window, whose next reads find them there), else waves of a
        ``_WAVE_SHARE`` of them, not kept, each wave's rows taken before the next wave is
        read, so that a read over more chunks than memory holds is one pass over them.

        Rows are taken page by page in page order: a fixed-width column's into one array
        (``np.take`` into contiguous slices), put in the read's order with one more
        ``take`` (0.96 ms for 8,192 rows of float32[16] from 32 chunks, where assigning
        each page's rows to their scattered places took 1.69 ms); a bytes column's values
        are copied out of the chunk (or read-only views of it, ``as_arrays``), a
        variable-shape one's copied as writeable arrays."""
        shard = self.shards[s]
        buffers = self._buffers()
        order, bounds, unique = rows_by_page(pages)
        slots_in_order = slots[order]
        # Lists for the variable-size columns' Python loops only (~80 bytes a row: a
        # sweep's window of fixed-width rows has no use for them).
        with_var = any(f.kind is not FieldKind.FIXED for f in fields)
        order_list: list[int] = order.tolist() if with_var else []
        slot_list: list[int] = slots_in_order.tolist() if with_var else []
        cols = [shard.field_index(f.name) for f in fields]
        sizes = shard.meta.chunks["length"][unique][:, cols].sum(axis=1).tolist()
        whole = sum(sizes)
        keep = buffers.fits(whole)  # a window the next reads come back to
        wave = whole if keep else max(1, int(buffers.capacity * _WAVE_SHARE))
        fixed: dict[str, np.ndarray] = {}
        var: dict[str, list[Any]] = {}
        for field in fields:
            if field.kind is FieldKind.FIXED:
                fixed[field.name] = np.empty((len(pages), *field.row_shape), dtype=field.dtype)
            else:
                var[field.name] = [None] * len(pages)
        starts = shard.page_starts_list
        # A run of consecutive rows (a read in file order: shuffle=False, a block of
        # Shuffle.INFILE's runs, a sorted read_rows): each page's rows are a slice of its
        # chunk, copied as one; the two index gathers cost ~40% of such a read of 8,192
        # tabular rows from the buffers.
        run = _consecutive_rows(shard, pages, slots)
        first_slots = slots_in_order[bounds[:-1]].tolist() if run else []

        def fetch(lo: int, hi: int) -> list[list[np.ndarray]] | None:
            return buffers.chunks(s, shard, cols, unique[lo:hi], keep)

        for lo, hi, chunks in _waves_ahead(list(_waves(sizes, wave)), fetch, between_waves):
            if chunks is None:
                return None
            for field, held in zip(fields, chunks, strict=True):
                if field.kind is not FieldKind.FIXED:
                    _var_from_chunks(
                        shard,
                        field,
                        unique[lo:hi],
                        bounds[lo : hi + 1],
                        held,
                        slot_list,
                        order_list,
                        as_arrays,
                        var[field.name],
                        run,
                    )
                    continue
                taken, shape = fixed[field.name], field.row_shape
                for k, data in enumerate(held, start=lo):
                    a, b, page = bounds[k], bounds[k + 1], unique[k]
                    rows = starts[page + 1] - starts[page]
                    stored = np.frombuffer(data, dtype=field.dtype).reshape((rows, *shape))
                    if run:  # the page's rows one after another: a copy, no index
                        first = first_slots[k]
                        taken[a:b] = stored[first : first + b - a]
                    else:
                        # mode="clip": numpy buffers a take into ``out`` under the
                        # default "raise" (a copy more); the slots are the reader's own
                        # (``_group``), within the page's rows.
                        np.take(stored, slots_in_order[a:b], axis=0, out=taken[a:b], mode="clip")
        got: dict[str, Any] = dict(var)
        if run:
            got.update(fixed)  # already in the read's order
            return got
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        for name, taken in fixed.items():
            got[name] = np.take(taken, back, axis=0)
        return got

    def _fixed_plan(self, s: int, field: Field) -> _FixedPlan | None:
        key = (s, field.name)
        if key not in self._fixed_plans:
            self._fixed_plans[key] = _FixedPlan.build(self.shards[s], field)
        return self._fixed_plans[key]

    @property
    def beyond_memory(self) -> bool:
        """Whether this reader's files are larger than the memory it may fill (see
        :attr:`memory_budget`; with the processes it shares that memory with, which read
        the same files): then cold reads go around the page cache."""
        return self._beyond_memory()

    def _beyond_memory(self) -> bool:
        """Whether this reader's files are larger than the memory it may fill
        (``memory_budget``, asked once): then the page cache cannot keep them for a next
        epoch, and cold values are read with direct I/O, around it; otherwise through
        it, so that the next epoch finds them in memory."""
        budget = self._memory_budget()
        # Against the whole memory, not this process's share of it: the processes that
        # share it (a loader's workers, a host's ranks) read the same files through one
        # page cache, which keeps them for all when they fit.
        if self._sharers is None:  # asked once: a read asks this every time
            self._sharers = budget_sharers()
        whole = None if budget is None else budget * self._sharers
        return whole is not None and sum(shard.size for shard in self.shards) > whole

    @property
    def memory_budget(self) -> int | None:
        """Bytes this process may still fill, as storage measures it
        (``mrecord.storage.probe.memory_budget``: the memory group's limit less what is
        charged to it, and the machine's available memory), asked once per reader; None
        when nothing says. What the reader's read-ahead windows are cut from, and what a
        server sizes its blocks in flight by."""
        return self._memory_budget()

    def _memory_budget(self) -> int | None:
        """``memory_budget()``, asked once per reader (and again in a process it is
        unpickled in): the read-ahead decisions below are cut from it."""
        if self._budget is None:
            self._budget = (memory_budget(),)
        return self._budget[0]

    def _chunks_in_flight(self) -> int:
        """Whole chunks a cold read may check at once (each in a buffer of its own, up to
        ``ARRIVAL_MAX_BYTES``): ``IO_THREADS``, fewer when a sixteenth of the memory budget
        holds fewer (measured: 16 buffers of 1 MiB, kept, got a reader in a 96 MB memory
        group OOM-killed)."""
        budget = self._memory_budget()
        if budget is None:
            return IO_THREADS
        return max(1, min(IO_THREADS, budget // (16 * ARRIVAL_MAX_BYTES)))

    def _gather_var(
        self,
        field: Field,
        n: int,
        groups: list[Any],
        bytes_as_arrays: bool = False,
        cold: set[int] | frozenset[int] = frozenset(),
        direct_io: bool = True,
    ) -> list[Any]:
        result: list[Any] = [None] * n
        kind = field.kind
        for s, positions, pages, slots in groups:
            shard = self.shards[s]
            # A cold shard's values are read now, straight into one buffer (views of its
            # map would be read by the consumer later, maybe evicted by then).
            copied: list[tuple[int, Any, int, int, int | None, int]] | None = (
                [] if kind is FieldKind.BYTES and s in cold else None
            )
            col = shard.field_index(field.name)
            # VARARRAY rows located through the shard's value index where the files fit
            # in memory (built from every page's head: beyond memory those would be reads
            # of their own); else many rows with pages stored plain of which few rows are
            # wanted gathered by shape together; fewer page by page, below.
            if kind is FieldKind.VARARRAY and len(pages) >= min(
                _INDEXED_MIN_ROWS, GROUPED_MIN_ROWS
            ):
                index = None if self._beyond_memory() else shard.value_index(col)
                if index is not None or len(pages) >= GROUPED_MIN_ROWS:
                    _gather_arrays_by_page(
                        shard, field, col, positions, pages, slots, result, index
                    )
                    continue
            starts = shard.page_starts_list
            for page, members in _by_page(pages):
                # A cold plain chunk is checked as its values arrive (_read_cold). A warm
                # one with a CRC per value (format 1.3) of which the block wants only some
                # rows: each of those values, here (the chunk's other pages stay unread).
                # Else the chunk, here, by the policy, before any of its bytes is used.
                by_value = (
                    copied is None
                    and len(members) < starts[page + 1] - starts[page]
                    and shard.checks_by_value(page, col)
                    and shard.needs_check(page, col)
                )
                plain = (
                    shard.plain_var_page(page, field) if copied is not None or by_value else None
                )
                by_value = by_value and plain is not None
                head, raw = plain if plain is not None else shard.var_page(page, field)
                where = members if positions is None else positions[members]
                base = shard.uncompressed_offset(page, col) if copied is not None else None
                if kind is FieldKind.VARARRAY:
                    _gather_arrays(
                        field, head, raw, where.tolist(), slots[members].tolist(), result
                    )
                    continue
                pos_list, slot_list = where.tolist(), slots[members].tolist()
                offsets, start = head.offsets, head.data_start
                for pos, slot in zip(pos_list, slot_list, strict=True):
                    a, b = start + offsets[slot], start + offsets[slot + 1]
                    if by_value:
                        shard.check_value(page, col, slot, raw[a:b])  # raises if damaged
                    if kind is FieldKind.BYTES:
                        if copied is not None:
                            copied.append((pos, raw, a, b, base, page))
                        elif bytes_as_arrays:
                            value = np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a)
                            result[pos] = value.view(BytesArray)
                        else:
                            result[pos] = bytes(raw[a:b])
                    else:
                        try:
                            result[pos] = str(raw[a:b], "utf-8")
                        except UnicodeDecodeError as exc:
                            raise _not_utf8(shard, page, field, exc) from exc
            if copied:
                _read_cold(
                    shard,
                    col,
                    copied,
                    result,
                    bytes_as_arrays,
                    direct_io and self._beyond_memory(),
                    self._chunks_in_flight(),
                )
        return result


def _gather_arrays_by_page(
    shard: ShardFile,
    field: Field,
    col: int,
    positions: np.ndarray | None,
    pages: np.ndarray,
    slots: np.ndarray,
    result: list[Any],
    index: ValueIndex | None = None,
) -> None:
    """Variable-shape values of many rows of one shard (``GROUPED_MIN_ROWS`` or more, or
    ``_INDEXED_MIN_ROWS`` with ``index``) into ``result``: the pages of which a quarter or
    more is wanted copied whole
    (``_gather_arrays``), the wanted rows of the other plain pages gathered by shape
    together (``values_by_shape``: one fancy index a shape).

    A random read of 10,000 rows of 2M touches ~800 pages. With the shard's ``index``
    (every row's value start and shape) the other pages' rows are located all at once;
    without it the loop over pages does only what each page needs: its check, its head,
    where its rows start (the general loop's work a page was most of such a read)."""
    order, bounds, page_list = rows_by_page(pages)
    if index is not None and len(page_list) >= _INDEXED_MIN_PAGES:
        _gather_indexed(
            shard, field, index, positions, pages, slots, (order, bounds, page_list), result
        )
        return
    sorted_slots = slots[order]
    sorted_pos = order if positions is None else positions[order]
    slot_list = sorted_slots.tolist()
    # rows in file order into the read's own order: each page's are runs (_gather_arrays)
    run = positions is None and _consecutive_rows(shard, pages, slots)
    page_starts = shard.page_starts_list
    cached = shard.cached_heads(col)
    starts: list[int] = []  # file offset of each sparse row's value, in sorted order
    shapes: list[np.ndarray] = []
    picked: list[int] = []  # those rows' places in the sorted order
    sparse_pages: list[tuple[int, int, int]] = []
    grouping = len(pages) >= GROUPED_MIN_ROWS  # else too few rows ever to group by shape
    for k, page in enumerate(page_list):
        a, b = bounds[k], bounds[k + 1]
        offset = shard.uncompressed_offset(page, col) if grouping else None
        if offset is None or 4 * (b - a) >= page_starts[page + 1] - page_starts[page]:
            head, raw = shard.var_page(page, field)
            if run:
                first = slot_list[a]
                _gather_arrays(field, head, raw, range(a, b), range(first, first + b - a), result)
            else:
                pos_list = sorted_pos[a:b].tolist()
                _gather_arrays(field, head, raw, pos_list, slot_list[a:b], result)
            continue
        head = cached(page)
        if type(head) is DecodedVarChunk:
            shard.check_chunk(page, col)  # by the policy, before any of its bytes is used
        else:  # not parsed yet, or the head index's copy: checked, parsed, compared
            head = shard.var_page(page, field)[0]
        base, value_offsets = offset + head.data_start, head.offsets
        starts.extend([base + value_offsets[slot] for slot in slot_list[a:b]])
        shapes.append(np.asarray(head.shapes)[sorted_slots[a:b]])
        picked.extend(range(a, b))
        sparse_pages.append((page, a, b))
    if len(picked) >= GROUPED_MIN_ROWS:
        values_by_shape(
            shard.file_bytes,
            np.array(starts, dtype=np.int64),
            np.concatenate(shapes).astype(np.int64),
            field.dtype,
            sorted_pos[np.array(picked, dtype=np.int64)],
            result,
        )
        return
    for page, a, b in sparse_pages:  # too few to group: each value copied on its own
        head, raw = shard.var_page(page, field)
        _gather_arrays(field, head, raw, sorted_pos[a:b].tolist(), slot_list[a:b], result)


def _gather_indexed(
    shard: ShardFile,
    field: Field,
    index: ValueIndex,
    positions: np.ndarray | None,
    pages: np.ndarray,
    slots: np.ndarray,
    by_page: tuple[np.ndarray, list[int], list[int]],
    result: list[Any],
) -> None:
    """``_gather_arrays_by_page`` with the shard's value index (every chunk of the column
    checked already; ``by_page``: the read's rows grouped by page, ``rows_by_page``): the
    rows of pages a read wants a quarter of a page at a time (``_gather_arrays``: slices
    of one array of the page's rows), and in a read of fewer than ``GROUPED_MIN_ROWS``
    rows those of pages it wants ``_LEADING_ROWS_MIN`` rows of too (its shapes' groups are
    small, and a value cut on its own costs ~1.7 us against under one as a slice); every
    other row's value located through the index and gathered by shape at once (10,000
    random ids of 2M rows: ~12 a page, 156 a shape)."""
    order, bounds, page_list = by_page
    edges = np.asarray(bounds, dtype=np.int64)
    counts = edges[1:] - edges[:-1]
    distinct = np.asarray(page_list, dtype=np.int64)
    page_rows = shard.page_starts[distinct + 1] - shard.page_starts[distinct]
    whole = 4 * counts >= page_rows
    if len(order) < GROUPED_MIN_ROWS:  # its shapes' groups small: values cut one by one
        whole |= counts >= _LEADING_ROWS_MIN
    sparse = order[np.repeat(~whole, counts)]
    if len(sparse):
        rows = shard.page_starts[pages[sparse]] + slots[sparse]
        values_by_shape(
            shard.file_bytes,
            index.starts[rows],
            index.shapes[rows],
            field.dtype,
            sparse if positions is None else positions[sparse],
            result,
        )
    for k in np.flatnonzero(whole).tolist():
        members = order[bounds[k] : bounds[k + 1]]
        head, raw = shard.var_page(page_list[k], field)
        where = members if positions is None else positions[members]
        _gather_arrays(field, head, raw, where.tolist(), slots[members].tolist(), result)


def _read_cold(
    shard: ShardFile,
    col: int,
    values: list[tuple[int, Any, int, int, int | None, int]],
    result: list[Any],
    as_arrays: bool,
    direct: bool,
    in_flight: int,
) -> None:
    """``result[pos]`` = the bytes ``raw[a:b]`` of each value (of chunk ``page``, column
    ``col``), read into new buffers. Values of chunks that still need their checksum
    (stored plain, ``base`` their file offset) are read with their whole chunk, once, and
    checked as it arrives (``read_checked``: no second read of the chunk beside the
    values'). The others with parallel ``pread``s of exactly their bytes (``base`` None:
    not stored plain, copied from ``raw``): values of at least ``DIRECT_MIN_BYTES`` on
    average that are not in the page cache with direct I/O into page-aligned slots (no
    page cache filled, charged and reclaimed on their way; ``read_direct``), else, or
    where direct I/O is refused, with buffered ``pread``s. As read-only ``uint8``
    BytesArrays viewing the buffer (``as_arrays``), else as ``bytes``."""
    arriving: dict[int, list[int]] = {}
    rest: list[tuple[int, Any, int, int, int | None, int]] = []
    for i, value in enumerate(values):
        base, page = value[4], value[5]
        if base is not None and shard.needs_check(page, col):
            arriving.setdefault(page, []).append(i)
        else:
            rest.append(value)
    # Chunks with a CRC-32C per value (format 1.3) that the block takes only some rows
    # of: their values are read alone, as the checked ones are, and checked one by one
    # (read whole, a random first epoch read each chunk for its first value and again
    # for each later one: twice the dataset beyond memory).
    starts = shard.page_starts_list
    one_by_one = [
        page
        for page, idx in arriving.items()
        if len(idx) < starts[page + 1] - starts[page] and shard.has_value_crcs(page, col)
    ]
    checks = len(rest)
    for page in one_by_one:
        rest += [values[i] for i in arriving.pop(page)]
    parts: list[tuple[int, np.ndarray]] = []
    if arriving:
        parts += _read_arriving(shard, col, values, arriving, direct, in_flight)
    read = _read_checked_values(shard, rest, direct)
    for value, (_, part) in zip(rest[checks:], read[checks:], strict=True):
        _, _, a, b, _, page = value
        head = shard.parse_head(page, col)
        # Values that start at the same byte are empty but the last: an empty one takes
        # the first such slot (the same CRC as any other empty one), others the last.
        find = bisect.bisect_left if a == b else bisect.bisect_right
        slot = find(head.offsets, a - head.data_start) - (a != b) if head else 0
        shard.check_value(page, col, slot, part, arrived=True)  # raises for a damaged value
    parts += read
    for pos, part in parts:
        if as_arrays:
            array = part.view(BytesArray)
            array.flags.writeable = False  # as a view of the map is
            result[pos] = array
        else:
            result[pos] = part.tobytes()


_CODEC_NONE = CODEC_IDS["none"]

CHUNK_BUFFERS = os.environ.get("MRECORD_CHUNK_BUFFERS", "1") != "0"
"""``MRECORD_CHUNK_BUFFERS=0`` reads block-local cold rows through the map instead of
whole chunks in the reader's buffers (to compare; the values are the same)."""

_STREAMED_SHARE = 0.5
"""A read in file order streams (``DatasetReader._stream``) when it takes at least this
share of the rows between its first and last."""

_RAGGED_PAGE_ROWS = 8
"""``read_ragged`` cuts values page by page when a read takes at least this many rows a
page of the pages its rows span (a scan: 10x its rows as arrays), else joins the arrays
``read_rows`` makes."""

_BUFFERED_ROWS_PER_CHUNK = 4
"""Rows a read takes per chunk, on average, for its fixed-width columns to go through the
chunk buffers: a window of pages (``Shuffle.BLOCK``: 256 rows of each of 32 chunks per
read of tabular rows) does; a random order over images (one row per chunk) does not, and
the hints for its few bytes of labels cost less than a ``pread`` per chunk."""


_PASS_SPEEDUP = 10.0
"""How many times less time than a request per row the device's profile must give one
pass over whole chunks for a read of checked chunks to take it. The profile (random 4 KiB
reads at queue depth 16, 1 MiB reads at depth 4) cannot see the block layer merge
neighbouring small reads, nor the pass's own gaps: measured in a 200 MB group, GLOBAL
reads of 4M tabular rows and of 600K variable-shape ones, second epoch: this machine's
virtual disk, profiled at 5-6.5x, read rows one by one faster (tabular 23-36K rows/s
against 15-25K in one pass, varshape 21K against 7-9K); a volume throttled to 3,000 IOPS
and 250 MB/s, profiled at 5.4-7.8x, read them faster in one pass (tabular 9.6K against
1.3-2K); an hdd-like one (200 IOPS, 150 MB/s), profiled at ~60x, got 200 rows/s one by
one and 7.5K in one pass. The profile cannot tell the first two apart; the threshold
keeps the first's rows (and so the second's, a loss there), and takes the pass only
where requests are that much dearer."""

_VIEW_MIN_BYTES = 64 << 10
"""A bytes value taken from the chunk buffers as an array (``bytes_as_arrays``) views them
from this size on; smaller ones are copies. Viewed, each small value pinned the buffer
piece under it (64 KiB units): a random order over 6M rows of a 40-byte bytes column
beyond memory held 1.3 GB resident and was OOM-killed in a 250 MB memory group."""

_SWEPT_KINDS = (FieldKind.FIXED, FieldKind.VARARRAY, FieldKind.STRING)
"""The kinds of columns a sweep reads (``DatasetReader.sweep_rows``)."""

_SWEEP_WINDOWS = 8
"""A sweep's window (``DatasetReader.sweep_rows``) is cut to this share of the memory
budget: the window handed out and the next one being read, each with its passing
copies (the ids' groups and sort order, a wave of chunks, the pipeline's batches)."""

_SWEEP_SPEEDUP = 2.0
"""How many times less time than its window's requests the device's profile must give a
pass over every chunk for a random order to be read in sweeps (``sweep_rows``). Lower
than ``_PASS_SPEEDUP``: the requests a window replaces are every row's, not a block's
(measured on this machine's disk, profiled at 34K requests and 1.1 GB/s: 2M
variable-shape rows in a 266 MB group, GLOBAL, windows of 53,700 rows the profile puts
at 4.2x: 34K rows/s in sweeps against 6.7K one by one, the group thrashing)."""

_SWEEP_ROW_BYTES = 64
"""Bytes a row of a sweep's window costs beside its values: its id, page, slot and
place in the sort, int64 each, and the order's positions."""

_SWEEP_ARRAY_BYTES = 112
"""Bytes of a numpy array object beside its data: a variable-shape value of a sweep's
window is one (``sys.getsizeof(np.empty((0, 3)))``)."""

_WAVE_SHARE = 0.25
"""A read over more chunks than the chunk buffers hold takes them a wave of this share of
the buffers at a time (``DatasetReader._take_from_chunks``): each reading thread holds
one wave beside what the buffers keep."""

_SHARED_CHUNK_ROWS = 1.5
"""Values per chunk needing its check, on average in a cold block, from which the block's
order is taken as local (its chunks are read through the page cache, not around it)."""


def _read_arriving(
    shard: ShardFile,
    col: int,
    values: list[tuple[int, Any, int, int, int | None, int]],
    arriving: dict[int, list[int]],
    direct: bool,
    in_flight: int,
) -> list[tuple[int, np.ndarray]]:
    """The values ``values[i]`` for ``i`` in ``arriving[page]``, each chunk read once and
    checked as it arrives; a chunk ``read_checked`` could not do is checked the usual way
    (a damaged one raises ``ChecksumError``) and its values copied from the map.

    A chunk the block takes every row of (file order) is read straight into a region of
    the block's buffer and checked there (``read_checked_in_place``): its values are
    views of it, not copies out of an I/O thread's buffer."""
    starts = shard.page_starts_list
    in_place_direct = direct and shard.direct_fd() is not None
    regions: dict[int, tuple[int, int, int]] = {}  # page -> (start in buffer, lead, span)
    at = 0
    for page, idx in arriving.items():
        if len(idx) >= starts[page + 1] - starts[page]:
            offset, length, _ = shard.chunk_place(page, col)
            lead, span = chunk_region(offset, length, in_place_direct)
            regions[page] = (at, lead, span)
            at += -(-span // mmap.PAGESIZE) * mmap.PAGESIZE  # the next one on a page too
    rest = sum(
        values[i][3] - values[i][2]
        for page, idx in arriving.items()
        if page not in regions
        for i in idx
    )
    buffer = aligned_buffer(at + rest)
    parts: list[tuple[int, np.ndarray]] = []
    jobs: list[tuple[int, list[tuple[np.ndarray, int, int]]]] = []
    in_place: list[tuple[int, np.ndarray]] = []
    fallback: list[tuple[int, list[tuple[np.ndarray, int, int]]]] = []
    for page, idx in arriving.items():
        targets = []
        region = regions.get(page)
        for i in idx:
            pos, _, a, b, _, _ = values[i]
            if region is not None:
                dest = buffer[region[0] + region[1] + a : region[0] + region[1] + b]
            else:
                dest = buffer[at : at + b - a]
                at += b - a
            targets.append((dest, a, b))
            parts.append((pos, dest))
        if region is not None:
            in_place.append((page, buffer[region[0] : region[0] + region[2]]))
            fallback.append((page, targets))
        else:
            jobs.append((page, targets))
    # Direct, unless the block's values share their chunks (Shuffle.BLOCK mixes the rows
    # of a few neighbouring pages) and a chunk's other rows come later: those come within
    # the next blocks, and find the chunk in the page cache instead of reading it from the
    # disk again. A random order spreads its values over their chunks (the other rows come
    # much later: evicted by then); a file-order one (shuffle=False) wants all rows of each
    # chunk but those of the one it ends in, whose rest the next block reads direct
    # (measured: buffered, the page cache they filled made a second sequential epoch in a
    # 200 MB group 3x slower).
    local = sum(map(len, arriving.values())) >= _SHARED_CHUNK_ROWS * len(arriving)
    if local:
        ordered = [values[i] for idx in arriving.values() for i in idx]
        ordered.sort(key=lambda v: v[0])  # the block's order
        local = not _in_file_order([(v[4] + v[2], v[3] - v[2]) for v in ordered])  # type: ignore[operator]
    # (the chunks taken whole are in place: read direct when the block is)
    not_done = set(read_checked(shard, col, jobs, direct and not local, in_flight))
    if in_place:
        not_done |= set(read_checked_in_place(shard, col, in_place, in_place_direct, in_flight))
    for page, targets in jobs + fallback:
        if page in not_done:
            shard.check_chunk(page, col)  # raises for a damaged chunk
            raw = values[arriving[page][0]][1]
            for dest, a, b in targets:
                dest[:] = np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a)
    return parts


def _check_located(
    shard: ShardFile,
    col: int,
    values: list[tuple[int, Any, int, int, int | None, int]],
    slots: list[int],
) -> None:
    """Check values of column ``col`` (``_read_cold``'s tuples, at ``slots`` of their pages)
    against their CRC-32C (format 1.3) before :meth:`DatasetReader.locate_bytes` hands out
    their places: each read alone with buffered ``pread`` s (so into the page cache the
    other process maps; ``_read_checked_values``). Raises
    :class:`~mrecord.errors.ChecksumError` naming the first damaged row."""
    parts = _read_checked_values(shard, values, direct=False)
    for value, slot, (_, part) in zip(values, slots, parts, strict=True):
        shard.check_value(value[5], col, slot, part, arrived=True)


def _read_checked_values(
    shard: ShardFile, values: list[tuple[int, Any, int, int, int | None, int]], direct: bool
) -> list[tuple[int, np.ndarray]]:
    """The values of chunks that need no checksum now, read as ``_read_cold`` says."""
    if not values:
        return []
    total = sum(b - a for _, _, a, b, _, _ in values)
    plain = all(base is not None for *_, base, _ in values)
    buffer: np.ndarray | None = None
    starts: list[int] = []
    read = False
    if direct and plain and total >= DIRECT_MIN_BYTES * len(values):
        ranges = [(base + a, b - a) for _, _, a, b, base, _ in values]  # type: ignore[operator]
        # Buffered where they are in memory. Values that follow each other in the file
        # (shuffle=False) are read direct as long runs, in 1 MiB pieces: buffered, the page
        # cache they filled had to be reclaimed inside the memory group (measured: a second
        # sequential epoch in a 200 MB group at 1,061 rows/s and 3.2 CPU s, OOM-killed with
        # 16 I/O threads); direct, one request per 100 KB value was slower still.
        if not looks_resident(shard, ranges):
            layout = direct_spans if _in_file_order(ranges) else direct_layout
            nbytes, starts, places4 = layout(ranges)
            buffer = aligned_buffer(nbytes)
            read = read_direct(shard, buffer, places4)
    if buffer is None or not read:
        buffer = aligned_buffer(total)
        starts = []
        places, at = [], 0
        for _, _, a, b, base, _ in values:
            starts.append(at)
            if base is not None:
                places.append((at, base + a, b - a))
            at += b - a
        read = plain and read_into(shard, buffer, places)
    parts = []
    for (pos, raw, a, b, _, _), at in zip(values, starts, strict=True):
        part = buffer[at : at + b - a]
        if not read:
            part[:] = np.frombuffer(raw, dtype=np.uint8, count=b - a, offset=a)
        parts.append((pos, part))
    return parts


def _var_from_chunks(
    shard: ShardFile,
    field: Field,
    pages: list[int],
    bounds: list[int],
    chunks: list[np.ndarray],
    slots_in_order: list[int],
    order: list[int],
    as_arrays: bool,
    got: list[Any],
    run: bool = False,
) -> None:
    """The values of a bytes, string or variable-shape column from whole stored chunks
    (checked as they arrived): rows ``order[a:b]`` of the group take slots
    ``slots_in_order[a:b]`` of ``pages[k]``'s chunk, for each ``(a, b)`` of consecutive
    ``bounds``, into ``got``. Bytes as copies, or read-only views (``as_arrays``);
    strings decoded; arrays as writeable copies
    (``_gather_arrays``, as the map's path gives them). Many rows of variable-shape
    values are gathered by shape across the chunks, except in a ``run`` (consecutive
    rows, file order): there each page's wanted data is one copy and its values slices
    of it (``_gather_arrays``: ~0.5 us a value, no scatter)."""
    starts = shard.page_starts_list
    col = shard.field_index(field.name)
    heads = shard.cached_heads(col)
    grouped: list[tuple[int, Any]] = []
    grouped_rows = (
        not run and bounds[-1] - bounds[0] >= GROUPED_MIN_ROWS and field.kind is FieldKind.VARARRAY
    )
    for k, (page, data) in enumerate(zip(pages, chunks, strict=True)):
        head = heads(page)
        if head is None:
            try:
                head = decode_var(field, data, starts[page + 1] - starts[page])
            except ChunkFormatError:
                shard.var_page(page, field)  # raises naming the file, page and field
                raise
            head = shard.keep_head(page, col, head)  # a window's next reads take it again
        if grouped_rows:
            grouped.append((k, head))
            continue
        if field.kind is FieldKind.VARARRAY:
            a, b = bounds[k], bounds[k + 1]
            if run:  # the rows a..b of the read are the page's slots from its first on
                first = slots_in_order[a]
                _gather_arrays(field, head, data, range(a, b), range(first, first + b - a), got)
            else:
                _gather_arrays(field, head, data, order[a:b], slots_in_order[a:b], got)
            continue
        offsets, start = head.offsets, head.data_start
        if field.kind is FieldKind.STRING:
            text = data.data  # a memoryview: str() decodes a buffer
            try:
                for i in range(bounds[k], bounds[k + 1]):
                    slot = slots_in_order[i]
                    got[order[i]] = str(
                        text[start + offsets[slot] : start + offsets[slot + 1]], "utf-8"
                    )
            except UnicodeDecodeError as exc:
                raise _not_utf8(shard, page, field, exc) from exc
            continue
        for i in range(bounds[k], bounds[k + 1]):
            slot = slots_in_order[i]
            value = data[start + offsets[slot] : start + offsets[slot + 1]]
            if not as_arrays:
                got[order[i]] = value.tobytes()
            elif value.nbytes >= _VIEW_MIN_BYTES:
                got[order[i]] = value.view(BytesArray)
            else:  # a view would pin its buffer piece for as long as the value lives
                copied = value.copy().view(BytesArray)
                copied.flags.writeable = False  # as a view of the buffers or the map is
                got[order[i]] = copied
    if grouped:
        _gather_grouped(field, grouped, bounds, chunks, slots_in_order, order, got)


def _gather_grouped(
    field: Field,
    heads: list[tuple[int, Any]],
    bounds: list[int],
    chunks: list[np.ndarray],
    slots_in_order: list[int],
    order: list[int],
    got: list[Any],
) -> None:
    """Many variable-shape values from whole chunks at once (``gather_by_shape``: one
    fancy index per shape, where one slice, reshape and copy a row cost ~8 us in Python;
    a sweep's window takes tens of thousands a pass), indexed where the chunks lie in the
    reader's buffers (``spanning_view``: no chunk copied; laid end to end, a
    ``Shuffle.BLOCK`` read copied its whole window of chunks, 9x the dataset an epoch).
    ``heads``: (index into ``chunks``, its decoded head); chunk ``k``'s rows take slots
    ``slots_in_order[a:b]`` into places ``order[a:b]`` of ``got``, ``(a, b) = bounds[k],
    bounds[k + 1]``."""
    first, last = bounds[0], bounds[-1]
    where = np.asarray(order[first:last], dtype=np.int64)
    slots = np.asarray(slots_in_order[first:last], dtype=np.int64)
    span, offsets = spanning_view([chunks[k] for k, _ in heads])
    rows: list[PageRows] = []
    for (k, head), at in zip(heads, offsets, strict=True):
        a, b = bounds[k] - first, bounds[k + 1] - first
        rows.append((at, head, where[a:b], slots[a:b]))
    gather_by_shape(field, span, rows, got)


def _waves_ahead(
    spans: list[tuple[int, int]],
    fetch: Callable[[int, int], list[list[np.ndarray]] | None],
    between_waves: Callable[[], None] | None,
) -> Iterator[tuple[int, int, list[list[np.ndarray]] | None]]:
    """``(lo, hi, fetch(lo, hi))`` for each wave of ``spans``; with more than one, the
    next wave is read on a thread of its own while the caller takes this one's rows, so
    that a pass's reads and its Python overlap (two waves in memory).
    ``between_waves()`` runs before each wave after the first is asked for."""
    if len(spans) < 2:
        for lo, hi in spans:
            yield lo, hi, fetch(lo, hi)
        return
    with ThreadPoolExecutor(1, thread_name_prefix="mrecord-wave") as ahead:
        coming = ahead.submit(fetch, *spans[0])
        for k, (lo, hi) in enumerate(spans):
            got = coming.result()
            if k + 1 < len(spans):
                if between_waves is not None:
                    between_waves()
                coming = ahead.submit(fetch, *spans[k + 1])
            yield lo, hi, got


def _waves(sizes: list[int], limit: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` runs of consecutive ``sizes`` whose sum stays within ``limit`` (a run
    of one where a single size is over it), covering them all in order."""
    lo, held = 0, 0
    for i, size in enumerate(sizes):
        if i > lo and held + size > limit:
            yield lo, i
            lo, held = i, 0
        held += size
    if lo < len(sizes):
        yield lo, len(sizes)


def _page_end(chunks: np.ndarray, page: int) -> int:
    """Where the last chunk of ``page`` ends in its file."""
    return int((chunks[page]["offset"] + chunks[page]["length"]).max())


def _in_file_order(ranges: list[tuple[int, int]]) -> bool:
    """Whether ``(offset, length)`` ranges follow each other in the file, each starting
    at most a page after the one before ended (a sequential read)."""
    end = -1
    for offset, length in ranges:
        if end >= 0 and not end <= offset <= end + 4096:
            return False
        end = offset + length
    return True


def _page_copy_pays(wanted: int, head: Any) -> bool:
    """Whether ``wanted`` rows of a variable-shape page are many enough that one copy of
    the page's data and a view per row beat gathering them (``_gather_arrays``)."""
    return 4 * wanted >= len(head.offsets) - 1


def _not_utf8(shard: ShardFile, page: int, field: Field, exc: Exception) -> CorruptFileError:
    return CorruptFileError(
        f"{str(shard.path)!r}: page {page}, field {field.name!r}: "
        f"string value is not UTF-8 ({exc})",
        path=str(shard.path),
        page=page,
    )


def _chunk_checker(shard: ShardFile, col: int) -> Callable[[int], None] | None:
    """``check(page)`` applying the shard's checksum policy to column ``col``, or None
    when nothing is ever checked (``verify="never"``)."""
    if shard.verify == "never":
        return None
    if shard.verify == "always":
        return lambda page: shard.check_chunk(page, col)
    checked: set[int] = set()  # pages this reader knows the shard has verified

    def check_once(page: int) -> None:
        if page not in checked:
            shard.check_chunk(page, col)
            checked.add(page)

    return check_once


def _row_reader(
    shard: ShardFile, field: Field, plan: _FixedPlan | None
) -> Callable[[int, int], Any]:
    """A function ``read(page, slot)`` returning one value of ``field`` from ``shard``.

    Uncompressed fixed-width columns read straight from one whole-file view of the map
    (one index, or one slice copied); other columns go through the shard's chunk access.
    """
    kind = field.kind
    if plan is not None and field.type != "bool":
        return _fixed_row_reader(shard, plan, field.row_shape)
    if kind is FieldKind.FIXED:
        shape = field.row_shape

        def read_fixed_page(page: int, slot: int) -> Any:
            value = shard.fixed_page(page, field)[slot]
            return value.copy() if shape else value[()]

        return read_fixed_page
    if kind is FieldKind.VARARRAY:
        dtype = field.dtype
        itemsize = dtype.itemsize

        def read_array(page: int, slot: int) -> Any:
            head, raw = shard.var_page(page, field)
            a = head.data_start + head.offsets[slot]
            count = (head.data_start + head.offsets[slot + 1] - a) // itemsize
            value = np.frombuffer(raw, dtype=dtype, count=count, offset=a)
            shapes = head.shapes  # a variable-shape chunk always has them (decode_var)
            return value.reshape(shapes[slot].tolist() if shapes is not None else -1).copy()

        return read_array
    if kind is FieldKind.BYTES:

        def read_bytes(page: int, slot: int) -> bytes:
            head, raw = shard.var_page(page, field)
            start, offsets = head.data_start, head.offsets
            return bytes(raw[start + offsets[slot] : start + offsets[slot + 1]])

        return read_bytes

    def read_string(page: int, slot: int) -> str:
        head, raw = shard.var_page(page, field)
        start, offsets = head.data_start, head.offsets
        try:
            return str(raw[start + offsets[slot] : start + offsets[slot + 1]], "utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(shard, page, field, exc) from exc

    return read_string


def _plain_fixed(shard: ShardFile, field: Field, col: int) -> bool:
    """True when every chunk of the column is stored uncompressed, aligned to its item
    size, of exactly ``page rows x row bytes``, inside the file: then one whole-file view
    reads any row without the per-chunk structural checks (done here once)."""
    if not shard.uncompressed_fixed(field):
        return False
    chunks = shard.meta.chunks[:, col]
    offsets = chunks["offset"].astype(np.int64)
    lengths = chunks["length"].astype(np.int64)
    expected = shard.meta.page_rows.astype(np.int64) * field.row_nbytes
    return bool(
        np.all(offsets % field.dtype.itemsize == 0)
        and np.all(lengths == expected)
        and np.all(chunks["raw_length"].astype(np.int64) == lengths)
        and np.all(offsets + lengths <= shard.size)
    )


class _FixedPlan:
    """How to gather an uncompressed fixed-width column of one shard straight from the map.

    A value of ``elems`` items starts at element ``base[page] + slot * elems`` of
    ``flat`` (the whole file, or the head index's copies). Rows of several items are
    taken from a real two-dimensional view of ``flat`` (``np.take(..., axis=0)``), one
    view for each distinct ``base[page] % elems`` (the chunks' alignment to a whole
    value; one for all pages in the usual layout): a fancy index over an overlapping
    strided view of every element was 3-4x slower (13 ms against 3.2 ms for 55,188
    random rows of float32[16] of a 64 MB window, what a ``Shuffle.BLOCK`` read takes).
    Built only when :func:`_plain_fixed` holds; chunks are still checksummed by the
    shard's policy before their first read (``checked``: nothing is left to check).
    """

    __slots__ = (
        "base",
        "base_list",
        "checked",
        "col",
        "elems",
        "flat",
        "from_index",
        "residue",
        "residues",
        "row_base",
        "views",
    )

    def __init__(
        self, shard: ShardFile, field: Field, col: int, column: np.ndarray | None = None
    ) -> None:
        itemsize = field.dtype.itemsize
        self.col = col
        self.elems = int(np.prod(field.row_shape, dtype=np.int64))
        # ``column``: the values from the head index's copies (ShardFile.indexed_column),
        # checked when they were read; else the file's map
        self.from_index = column is not None
        if column is not None:
            self.flat = column
            self.base = shard.page_starts[:-1] * self.elems
        else:
            self.flat = np.frombuffer(shard.mm, dtype=field.dtype, count=shard.size // itemsize)
            self.base = shard.meta.chunks[:, col]["offset"].astype(np.int64) // itemsize
        self.base_list: list[int] = self.base.tolist()
        # Each page's first value as a row of the view for its residue.
        self.residue: np.ndarray = self.base % self.elems
        self.residues: list[int] = sorted_unique(self.residue).tolist()
        self.row_base: np.ndarray = (self.base - self.residue) // self.elems
        self.views: dict[int, np.ndarray] = {}
        self.checked = self.from_index or shard.all_verified(col)

    @classmethod
    def build(cls, shard: ShardFile, field: Field) -> _FixedPlan | None:
        """The plan for ``field`` of ``shard``: from the head index's copies of its
        chunks when it holds them all (no read of the file for these values), else
        from the map, or None when chunks need the page path."""
        if int(np.prod(field.row_shape, dtype=np.int64)) == 0:
            return None  # rows of no items: nothing to gather (the page path's empty values)
        col = shard.field_index(field.name)
        column = shard.indexed_column(col)
        if column is not None:
            return cls(shard, field, col, column)
        return cls(shard, field, col) if _plain_fixed(shard, field, col) else None

    def gather(self, shard: ShardFile, pages: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The values of rows (pages, slots), shape ``(n,)`` or ``(n, elems)``: one copy."""
        if not self.checked:
            shard.check_chunks(sorted_unique(pages), self.col)  # each chunk once per call
            self.checked = shard.all_verified(self.col)
        if self.elems == 1:
            values: np.ndarray = self.flat[self.base[pages] + slots]
            return values
        rows = self.row_base[pages] + slots
        if len(self.residues) == 1:
            taken: np.ndarray = np.take(self._view(self.residues[0]), rows, axis=0)
            return taken
        residue = self.residue[pages]
        values = np.empty((len(rows), self.elems), dtype=self.flat.dtype)
        for r in sorted_unique(residue).tolist():
            at = residue == r
            values[at] = np.take(self._view(r), rows[at], axis=0)
        return values

    def _view(self, residue: int) -> np.ndarray:
        """``flat`` from element ``residue`` on as rows of ``elems`` items (a view)."""
        view = self.views.get(residue)
        if view is None:
            count = (self.flat.size - residue) // self.elems
            view = self.flat[residue : residue + count * self.elems].reshape(count, self.elems)
            self.views[residue] = view
        return view


def _fixed_row_reader(
    shard: ShardFile, plan: _FixedPlan, shape: tuple[int, ...]
) -> Callable[[int, int], Any]:
    """``read(page, slot)`` for one value of a column that has a :class:`_FixedPlan`."""
    view, base, elems = plan.flat, plan.base_list, plan.elems
    check = None if plan.from_index else _chunk_checker(shard, plan.col)
    if not shape:
        if check is None:
            return lambda page, slot: view[base[page] + slot]

        def read_scalar(page: int, slot: int) -> Any:
            check(page)
            return view[base[page] + slot]

        return read_scalar

    def read_array(page: int, slot: int) -> Any:
        if check is not None:
            check(page)
        a = base[page] + slot * elems
        return view[a : a + elems].reshape(shape).copy()

    return read_array


def _gather_arrays(
    field: Field,
    head: Any,
    raw: Any,
    pos_list: list[int] | range,
    slot_list: list[int] | range,
    result: list[Any],
) -> None:
    """Variable-shape arrays of one page: writeable arrays, one copy of the bytes read.

    When many rows of the page are wanted, the page's data region is copied once and
    every value is a view of that copy; otherwise each value is copied on its own.
    ``range`` positions and slots: a run of the page's rows in file order (the caller
    found the read's rows consecutive, ``_consecutive_rows``), located with slices, no
    list of them indexed and no repeat to look for.
    """
    dtype = field.dtype
    itemsize = dtype.itemsize
    offsets, start = head.offsets, head.data_start
    wanted: slice | list[int] = (
        slice(slot_list.start, slot_list.stop) if type(slot_list) is range else slot_list
    )
    wanted_shapes = head.shapes[wanted]
    copy_page = _page_copy_pays(len(slot_list), head)
    # decode_var checked that every value is exactly prod(shape) items: offsets divide.
    data = _copy_released(raw, start, offsets[-1]) if copy_page else None
    source, base = (data, 0) if data is not None else (raw, start)
    value_starts = head.offsets_array[wanted] if len(slot_list) >= _LEADING_ROWS_MIN else None
    rows = (
        _leading_rows(dtype, source, base, offsets[-1], value_starts, wanted_shapes)
        if value_starts is not None
        else None
    )
    if rows is not None and value_starts is not None:
        # Every wanted value is a run of rows of one array over the region: one slice a
        # value (~0.5 against ~1.2 us a value for an array built from its shape).
        first_rows = value_starts // rows.strides[0]
        firsts = first_rows.tolist()
        lasts = (first_rows + wanted_shapes[:, 0].astype(np.int64)).tolist()
        if data is None:
            values = [rows[a:b].copy() for a, b in zip(firsts, lasts, strict=True)]
        else:
            values = [rows[a:b] for a, b in zip(firsts, lasts, strict=True)]
            if type(slot_list) is not range and len(set(slot_list)) < len(slot_list):
                values = _copies_of_repeats(values, slot_list)
        _put(result, pos_list, values)
        return
    # The wanted rows' shapes only: a list of tuples for every row of every cached head
    # (``shapes_list``) was most of the heads' memory (~56 bytes a row).
    shapes = wanted_shapes.tolist()
    if data is not None:
        # One array a value, straight over the copy: a slice and a reshape made two
        # (~480 against ~880 ns a row).
        array_over = np.ndarray
        values = [
            array_over(shape, dtype, data, offsets[slot])
            for slot, shape in zip(slot_list, shapes, strict=True)
        ]
        if type(slot_list) is not range and len(set(slot_list)) < len(slot_list):
            values = _copies_of_repeats(values, slot_list)
        _put(result, pos_list, values)
        return
    flat = np.frombuffer(raw, dtype=dtype, count=offsets[-1] // itemsize, offset=start)
    for pos, slot, shape in zip(pos_list, slot_list, shapes, strict=True):
        value = flat[offsets[slot] // itemsize : offsets[slot + 1] // itemsize]
        result[pos] = value.reshape(shape).copy()


_INDEXED_MIN_ROWS = 8
"""Reads of fewer rows go page by page even where the shard has a value index: locating
and grouping them at once has a fixed cost (one-row reads of 2M rows: 3.9-5.6K a second
that way against 7.5K; four rows alike); from 8 rows on the index wins (16 random ids:
38-58K rows/s against 21-22K; 256: 126-128K against 42-55K)."""

_INDEXED_MIN_PAGES = 8
"""A read of rows on fewer pages goes page by page (a page's fixed work is then little
beside locating and grouping its rows at once: 16 random ids of 12,500 rows on 5 pages
read 73-79K rows/s page by page against 40-70K through the index)."""

_LEADING_ROWS_MIN = 16
"""Fewer values of a page are each cut on their own: seeing the page as one array of rows
has a fixed cost (~6 us) that a value or two does not pay back (a random read of 256 ids
of 2M, a value a page: 22K rows/s that way against 40K)."""


def _kept_share(shard: ShardFile, col: int) -> float:
    """What the head cache holds of a head of variable-shape column ``col`` of ``shard``
    for each byte of it stored, from its first page's head (kept heads are narrowed,
    ``mrecord.format.chunks.kept_shapes``: ~6 bytes a row of ``[-1, 3]`` where 24 are
    stored); 1 where that head does not parse (compressed: parsed as stored)."""
    head = shard.parse_head(0, col)
    if head is None:
        return 1.0
    stored = head_length(shard.meta.schema.fields[col], int(shard.meta.page_rows[0]))
    return min(1.0, kept_head_bytes(head) / max(1, stored))


def _leading_rows(
    dtype: np.dtype[Any],
    source: Any,
    base: int,
    length: int,
    value_starts: np.ndarray,
    wanted_shapes: np.ndarray,
) -> np.ndarray | None:
    """The data region ``source[base : base + length]`` as one array whose rows are the
    wanted values' leading dimension, when every wanted value is a whole run of its rows:
    their shapes differ in the first dimension alone (a ``[-1, 3]`` column's always do)
    and each starts on a row. ``None`` otherwise (the caller builds each from its shape)."""
    if not len(value_starts) or wanted_shapes.ndim != 2 or wanted_shapes.shape[1] == 0:
        return None
    trailing = wanted_shapes[0, 1:]
    if len(trailing) and not (wanted_shapes[:, 1:] == trailing).all():
        return None
    row_shape = tuple(int(d) for d in trailing)
    row_bytes = dtype.itemsize * math.prod(row_shape)
    if row_bytes == 0 or (value_starts % row_bytes).any():
        return None
    count = length // row_bytes
    flat = np.frombuffer(
        source, dtype=dtype, count=count * (row_bytes // dtype.itemsize), offset=base
    )
    return flat.reshape(count, *row_shape)


def _copy_released(raw: Any, start: int, length: int) -> np.ndarray:
    """A writeable copy of ``raw[start : start + length]``, copied by numpy, which lets
    the GIL go for a copy of more than 500 bytes (a page's data is tens of KB or more):
    the consumer's thread runs Python meanwhile (a ``bytearray`` of the slice held it for
    the whole copy)."""
    data = np.empty(length, dtype=np.uint8)
    np.copyto(data, np.frombuffer(raw, dtype=np.uint8, count=length, offset=start))
    return data


def _copies_of_repeats(values: list[np.ndarray], slot_list: list[int]) -> list[np.ndarray]:
    """``values`` with every repeat of a slot a copy: a row asked twice gets two arrays,
    and writing to one must not change the other."""
    seen: set[int] = set()
    out = []
    for value, slot in zip(values, slot_list, strict=True):
        out.append(value.copy() if slot in seen else value)
        seen.add(slot)
    return out


def _put(result: list[Any], pos_list: list[int] | range, values: list[Any]) -> None:
    """``result[pos_list[k]] = values[k]`` for every k (one slice assignment when the
    positions are a run, as a read in file order's are)."""
    if type(pos_list) is range:
        result[pos_list.start : pos_list.stop] = values
        return
    if (
        pos_list
        and pos_list[-1] - pos_list[0] == len(pos_list) - 1
        and pos_list == list(range(pos_list[0], pos_list[-1] + 1))
    ):
        result[pos_list[0] : pos_list[-1] + 1] = values
        return
    for pos, value in zip(pos_list, values, strict=True):
        result[pos] = value


def _by_page(pages: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (page, member positions) for each distinct page, pages ascending."""
    if len(pages) == 1:
        yield int(pages[0]), np.zeros(1, dtype=np.int64)
        return
    order, bounds, page_list = rows_by_page(pages)
    for page, start, stop in zip(page_list, bounds[:-1], bounds[1:], strict=True):
        yield page, order[start:stop]


def _consecutive_rows(shard: ShardFile, pages: np.ndarray, slots: np.ndarray) -> bool:
    """Whether rows ``(pages, slots)`` of ``shard`` are consecutive rows of the file, in
    file order, none twice."""
    n = len(pages)
    if n < 2:
        return n == 1
    starts = shard.page_starts
    first = int(starts[pages[0]]) + int(slots[0])
    last = int(starts[pages[-1]]) + int(slots[-1])
    if last - first != n - 1:
        return False
    rows = starts[pages] + slots
    return bool((rows[1:] - rows[:-1] == 1).all())


def _reopenable(dataset_files: PathArg) -> str | list[str]:
    """``dataset_files`` as a child process can open it: absolute paths, URLs as given."""
    if isinstance(dataset_files, str) and is_remote(dataset_files):
        return dataset_files
    if is_remote(dataset_files) and isinstance(dataset_files, Sequence):
        return [str(p) for p in dataset_files]
    paths, expand = resolve_files(dataset_files)
    absolute = [str(p.absolute()) for p in paths]
    return absolute[0] if expand else absolute


def _identity(shards: list[ShardFile]) -> list[tuple[str, int, int]]:
    """What must match when a pickled reader reopens its files: the same commit."""
    return [(s.meta.dataset_id, s.meta.generation, s.meta.num_rows) for s in shards]


def _check_columns(schema: StoredSchema, columns: Sequence[str]) -> list[str]:
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise ArgumentError(f"columns must be a list of field names, got {columns!r}")
    unknown = [c for c in columns if c not in schema]
    if unknown:
        raise SchemaError(f"column(s) {unknown!r} are not in the schema {schema.names!r}")
    if len(set(columns)) != len(columns):
        raise ArgumentError(f"columns lists a name twice: {list(columns)!r}")
    return list(columns)
