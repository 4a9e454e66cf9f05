"""What the torch adapters share: the torch import, topology, the reader, samples and batches."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mrecord import DatasetReader
from mrecord.block import Block, BytesArray
from mrecord.errors import ArgumentError, MissingDependencyError, WrongTypeError
from mrecord.serve.client.served import ServedSpec, served_spec
from mrecord.serve.client.served import read_rows as read_served_rows
from mrecord.storage.probe import share_memory_budget

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised by the missing-torch test
    raise MissingDependencyError(
        "mrecord.torch needs PyTorch: pip install 'mrecord[torch]' (torch>=2.13,<2.15)"
    ) from exc

__all__ = [
    "DatasetFiles",
    "ReaderHandle",
    "RowReader",
    "block_batch",
    "block_samples",
    "in_worker",
    "resolve_topology",
    "torch",
]

DatasetFiles = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Any
"""Shard files (a path, a URL, a list), or a served dataset: a ``RemoteDataset`` or its
``http(s)://HOST:PORT/api/datasets/NAME`` URL(s) (:mod:`mrecord.serve.client.served`)."""


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ArgumentError(f"environment variable {name}={raw!r} is not an int") from None


def resolve_topology(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world): the arguments when given, else torch.distributed, else RANK/WORLD_SIZE."""
    dist_rank: int | None = None
    dist_world: int | None = None
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        dist_rank, dist_world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    else:
        dist_rank, dist_world = _env_int("RANK"), _env_int("WORLD_SIZE")
    r = rank if rank is not None else (dist_rank or 0)
    w = world_size if world_size is not None else (dist_world or 1)
    for name, value in (("rank", r), ("world_size", w)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise WrongTypeError(f"{name} must be an int, got {value!r}")
    if w < 1 or not 0 <= r < w:
        raise ArgumentError(f"need 0 <= rank < world_size, got rank={r!r}, world_size={w!r}")
    return r, w


_FROZEN_PID = -1


def in_worker() -> bool:
    """Whether this is a DataLoader worker; the first call in a worker freezes the objects
    it inherited from the main process (``gc.freeze``) and tells the memory budget that
    the loader's workers share it (``mrecord.storage.probe.share_memory_budget``).

    Without that the worker's first full garbage collection walks every object inherited
    from the main process, torch's included, and so copies each page of the inherited
    heap (copy-on-write), per worker, on every epoch that starts workers (measured in
    docs/BENCHMARKS.md, "PyTorch DataLoader").
    Frozen objects are never collected in the worker (which exits at the epoch's end,
    or stays for the next with ``persistent_workers``); the main process is not touched.
    """
    global _FROZEN_PID
    info = torch.utils.data.get_worker_info()
    if info is None:
        return False
    if os.getpid() != _FROZEN_PID:
        _FROZEN_PID = os.getpid()
        gc.freeze()
        # The workers read beside each other in one memory: each sizes its read-ahead
        # from its share (4 workers sizing from the whole stalled at a group's limit).
        share_memory_budget(int(info.num_workers))
    return True


class RowReader(Protocol):
    """What the torch datasets read through: a ``DatasetReader`` or a served dataset."""

    @property
    def files(self) -> Sequence[Any]:
        """The shard files (paths or names), in file order."""

    @property
    def file_row_counts(self) -> Sequence[int]:
        """Rows per shard file."""

    @property
    def num_rows(self) -> int:
        """Rows of the dataset."""

    def read_rows(
        self,
        ids: np.ndarray | Sequence[int],
        columns: Sequence[str] | None = None,
        *,
        bytes_as_arrays: bool = False,
        sweep: bool = False,
    ) -> Block:
        """The rows at global ``ids``, in that order (``columns``: the reader's by default;
        ``sweep``: a window of :meth:`sweep_rows` rows, read in one pass)."""

    def sweep_rows(self, columns: Sequence[str] | None = None, rows: int | None = None) -> int:
        """Rows per window in which a random order (of at most ``rows``) is read fastest
        in one pass over the files (``DatasetReader.sweep_rows``), or 0."""

    def plan_reads(self, order_of: Callable[[int], np.ndarray], epoch: int) -> None:
        """The coming row orders (``order_of(e)``: epoch ``e``'s ids), for storage that
        evicts by next use; others ignore them."""


class ServedReader:
    """A dataset of ``mrecord serve`` read as a :class:`RowReader`: same row ids, same
    values as ``DatasetReader`` on the server's files (the order is the caller's)."""

    def __init__(self, spec: ServedSpec, columns: Sequence[str] | None) -> None:
        self._ds = spec.open(columns)
        names = [f.name for f in self._ds.schema.fields]
        self._columns = names if columns is None else list(columns)
        self.files: list[str] = self._ds.file_names
        self.file_row_counts: list[int] = self._ds.file_row_counts
        self.num_rows = sum(self.file_row_counts)
        self._coming: np.ndarray | None = None
        """This pass's ids in read order (``plan_reads``), and how far reads got in it."""
        self._at = 0

    def read_rows(
        self,
        ids: np.ndarray | Sequence[int],
        columns: Sequence[str] | None = None,
        *,
        bytes_as_arrays: bool = False,
        sweep: bool = False,
    ) -> Block:
        """The rows at global ``ids`` (as many requests as the server's limits need;
        ``sweep``: a window of :meth:`sweep_rows` rows, asked for in ascending order and
        put back in order here, ``RemoteDataset.read_rows(sweep=True)``)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        # A sweep's requests tell the server their own next rows; the next window's,
        # spread over every file, would only make it read at random.
        self._hint_next(ids, announce=not sweep)
        chosen = self._columns if columns is None else list(columns)
        return read_served_rows(self._ds, ids, chosen, bytes_as_arrays=bytes_as_arrays, sweep=sweep)

    def sweep_rows(self, columns: Sequence[str] | None = None, rows: int | None = None) -> int:
        """Rows per window in which a random order is read fastest from the server, each
        window's rows asked for in ascending order (``RemoteDataset.sweep_rows``: the
        server weighs its files, memory and device for this process's memory), or 0."""
        return self._ds.sweep_rows(self._columns if columns is None else columns, rows)

    def plan_reads(self, order_of: Callable[[int], np.ndarray], epoch: int) -> None:
        """Remember this pass's ids in read order: each read then tells the server the
        rows of the read after it (``RemoteDataset.hint``), which it reads ahead while
        this one travels."""
        self._coming = np.asarray(order_of(epoch), dtype=np.int64).reshape(-1)
        self._at = 0

    def _hint_next(self, ids: np.ndarray, announce: bool = True) -> None:
        coming, at, n = self._coming, self._at, len(ids)
        if coming is None or not np.array_equal(coming[at : at + n], ids):
            return  # not the planned order (a skip after damage): no guess
        self._at = at + n
        following = coming[at + n : at + 2 * n]
        if announce and len(following):
            self._ds.hint(following)


class ReaderHandle:
    """A reader opened once per process (DataLoader workers reopen theirs): a
    ``DatasetReader`` over files, or a :class:`ServedReader` over a served dataset."""

    def __init__(
        self,
        files: DatasetFiles,
        columns: Sequence[str] | None,
        verify: str,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._served = served_spec(files, storage_options)
        if self._served is not None:
            files, storage_options = self._served.where, None
        self._args = (files, None if columns is None else list(columns), verify)
        self._storage_options = None if storage_options is None else dict(storage_options)
        self._pid = os.getpid()
        self._reader: RowReader | None = self._open()

    def _open(self) -> RowReader:
        files, columns, verify = self._args
        if self._served is not None:
            return ServedReader(self._served, columns)
        return DatasetReader.open(
            files, columns=columns, verify=verify, storage_options=self._storage_options
        )

    @property
    def served(self) -> ServedSpec | None:
        """The served dataset read, or None for files."""
        return self._served

    @property
    def reader(self) -> RowReader:
        """This process's reader."""
        if self._reader is None or self._pid != os.getpid():
            self._reader = self._open()
            self._pid = os.getpid()
        return self._reader

    def fingerprint_parts(self) -> tuple[list[str], list[int]]:
        """Shard basenames and row counts, in file order (the same for the server's files
        read through the service: a checkpoint resumes on either)."""
        reader = self.reader
        return [Path(f).name for f in reader.files], [int(n) for n in reader.file_row_counts]

    def __getstate__(self) -> dict[str, Any]:
        return {
            "_served": self._served,
            "_args": self._args,
            "_storage_options": self._storage_options,
            "_pid": -1,
            "_reader": None,
        }


def block_samples(block: Block) -> list[dict[str, Any]]:
    """The rows of ``block`` as sample dicts (numpy values; DataLoader collates them)."""
    names = block.column_names
    cols = [block.columns[name] for name in names]
    return [dict(zip(names, values, strict=True)) for values in zip(*cols, strict=True)]


def _tensor(values: Any) -> Any:
    if isinstance(values, np.ndarray) and values.dtype != object:
        if not values.flags.writeable:
            values = values.copy()
        return torch.from_numpy(values)
    return [
        torch.from_numpy(np.array(v))
        if isinstance(v, np.ndarray) and not isinstance(v, BytesArray)
        else v
        for v in values
    ]


def block_batch(block: Block) -> dict[str, Any]:
    """``block`` as one collated batch: fixed-width columns as tensors, others as lists
    (a :class:`~mrecord.block.BytesArray` stays one, for ``transport.pack``)."""
    return {name: _tensor(values) for name, values in block.columns.items()}
