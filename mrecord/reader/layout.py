"""What the block shuffle needs to know about an open dataset: pages, bytes, storage.

``Shuffle.BLOCK`` cuts blocks on page boundaries and sizes them from the storage under
the files; the order itself is pure arithmetic (``mrecord.sampling.shuffle.block``).
This module collects the facts from a :class:`~mrecord.reader.dataset_reader.DatasetReader`
and the measurements (``mrecord.storage.probe``) so the pipeline can pass them in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.probe import StorageProfile, memory_budget, probe_storage
from mrecord.storage.shard import ShardFile

__all__ = [
    "DatasetLayout",
    "dataset_layout",
    "measured_numbers",
    "memory_budget",
    "storage_profile",
]


@dataclass(frozen=True, eq=False)
class DatasetLayout:
    """Page boundaries and sizes of a dataset's files."""

    page_starts: npt.NDArray[np.int64]
    """Global row id of the first row of every page, file 0's pages first."""
    num_rows: int
    data_bytes: int
    """Bytes of the shard files together."""
    num_pages: int

    @property
    def page_bytes(self) -> int:
        """Mean bytes per page."""
        return self.data_bytes // max(1, self.num_pages)


def dataset_layout(reader: DatasetReader) -> DatasetLayout:
    """The pages and bytes of ``reader``'s files (metadata only, no data read)."""
    parts = []
    size = 0
    for start, shard in zip(reader.file_starts.tolist(), reader.shards, strict=False):
        parts.append(shard.page_starts[:-1] + start)
        size += _file_bytes(shard)
    starts = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    return DatasetLayout(starts, reader.num_rows, size, int(starts.size))


def _file_bytes(shard: ShardFile) -> int:
    try:
        return int(shard.path.stat().st_size)
    except OSError:  # a remote shard read by ranges has no local file
        return int(shard.meta.chunks["length"].sum()) if shard.meta.chunks.size else 0


def storage_profile(reader: DatasetReader) -> StorageProfile | None:
    """The measured storage under the reader's first local file (None: not measurable,
    e.g. a remote dataset or a file system without direct I/O)."""
    for shard in reader.shards:
        if shard.path.is_file():
            return probe_storage(shard.path)
    return None


def measured_numbers(reader: DatasetReader) -> tuple[float, float] | None:
    """``(iops, bytes per second)`` of :func:`storage_profile`, or None."""
    profile = storage_profile(reader)
    return None if profile is None else (profile.iops, profile.bandwidth)
