"""What the torch adapters share: the torch import, topology, the reader, samples and batches."""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrecord import DatasetReader
from mrecord.block import Block, BytesArray
from mrecord.errors import ArgumentError, MissingDependencyError, WrongTypeError

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised by the missing-torch test
    raise MissingDependencyError(
        "mrecord.torch needs PyTorch: pip install 'mrecord[torch]' (torch>=2.13,<2.15)"
    ) from exc

__all__ = [
    "DatasetFiles",
    "ReaderHandle",
    "block_batch",
    "block_samples",
    "in_worker",
    "resolve_topology",
    "torch",
]

DatasetFiles = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


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
    it inherited from the main process (``gc.freeze``).

    Without that the worker's first full garbage collection walks every object inherited
    from the main process, torch's included, and so copies each page of the inherited
    heap (copy-on-write): 0.1 to 0.2 s per worker, on every epoch that starts workers.
    Frozen objects are never collected in the worker (which exits at the epoch's end,
    or stays for the next with ``persistent_workers``); the main process is not touched.
    """
    global _FROZEN_PID
    if torch.utils.data.get_worker_info() is None:
        return False
    if os.getpid() != _FROZEN_PID:
        _FROZEN_PID = os.getpid()
        gc.freeze()
    return True


class ReaderHandle:
    """A DatasetReader opened once per process (DataLoader workers reopen theirs)."""

    def __init__(
        self,
        files: DatasetFiles,
        columns: Sequence[str] | None,
        verify: str,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._args = (files, None if columns is None else list(columns), verify)
        self._storage_options = None if storage_options is None else dict(storage_options)
        self._pid = os.getpid()
        self._reader: DatasetReader | None = DatasetReader.open(
            files, columns=self._args[1], verify=verify, storage_options=self._storage_options
        )

    @property
    def reader(self) -> DatasetReader:
        """This process's reader."""
        if self._reader is None or self._pid != os.getpid():
            files, columns, verify = self._args
            self._reader = DatasetReader.open(
                files, columns=columns, verify=verify, storage_options=self._storage_options
            )
            self._pid = os.getpid()
        return self._reader

    def fingerprint_parts(self) -> tuple[list[str], list[int]]:
        """Shard basenames and row counts, in file order."""
        reader = self.reader
        return [Path(f).name for f in reader.files], [int(n) for n in reader.file_row_counts]

    def __getstate__(self) -> dict[str, Any]:
        return {
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
