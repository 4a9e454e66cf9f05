"""Helpers for the tests of reads beyond memory (``DatasetReader.sweep_rows``, the chunk
buffers): make every reader's data beyond its memory and spy on what it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
import mrecord.storage.chunk_buffers as chunk_buffers
import mrecord.storage.readahead as readahead
from mrecord import DatasetReader, FileWriter
from mrecord.storage.probe import StorageProfile
from mrecord.storage.verified import clear_verified


def profile(iops: float, bandwidth: float) -> StorageProfile:
    """A device profile as ``probe_storage`` measures one."""
    return StorageProfile(device="0:0", iops=iops, bandwidth=bandwidth, seconds=0.0)


SLOW_REQUESTS = profile(iops=10.0, bandwidth=1e9)
"""A device whose requests cost far more than a pass over a small dataset."""


def sweeping(
    monkeypatch: pytest.MonkeyPatch,
    budget: int,
    device: StorageProfile | None = SLOW_REQUESTS,
) -> list[tuple[int, bool]]:
    """Every reader beyond its memory (``budget`` bytes), every block cold, the device
    ``device``; returns (rows, sweep) for every ``read_rows`` call made after."""
    clear_verified()
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_memory_budget", lambda self: budget)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(dataset_reader, "probe_storage", lambda path: device)
    calls: list[tuple[int, bool]] = []
    real = DatasetReader.read_rows

    def spy(self: DatasetReader, ids: Any, columns: Any = None, **kwargs: Any) -> Any:
        calls.append((len(np.asarray(ids).reshape(-1)), bool(kwargs.get("sweep", False))))
        return real(self, ids, columns, **kwargs)

    monkeypatch.setattr(DatasetReader, "read_rows", spy)
    return calls


def chunk_preads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(shard, offset) of every ``pread`` the chunk buffers make after this call."""
    seen: list[tuple[int, int]] = []
    real = readahead.pread_exactly

    def spy(shard: Any, fd: int, view: memoryview, offset: int) -> bool:
        seen.append((id(shard), offset))
        return real(shard, fd, view, offset)

    monkeypatch.setattr(chunk_buffers, "pread_exactly", spy)
    return seen


def column_bytes(reader: DatasetReader, columns: list[str]) -> int:
    """Stored bytes of ``columns``' chunks over every shard (what one pass reads)."""
    return sum(
        int(s.meta.chunks["length"][:, s.field_index(n)].sum())
        for s in reader.shards
        for n in columns
    )


SMALL_ROWS = 500
"""Rows of :func:`write_small_rows`'s dataset."""

SMALL_WINDOW_BUDGET = (
    100 * dataset_reader._SWEEP_WINDOWS * (dataset_reader._SWEEP_ROW_BYTES + 8 + 12)
)
"""A memory budget that holds sweep windows of 100 of :func:`write_small_rows`'s rows
(an int64 and a float32 [3] a row, ``_SWEEP_ROW_BYTES`` beside, eight windows)."""


def write_small_rows(folder: Path) -> list[str]:
    """A dataset of ``SMALL_ROWS`` small rows (``id``, and ``vec`` = three times the id)
    in two shards of many 1 KiB pages; its shard files."""
    with FileWriter(folder / "t.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "vec": {"type": "float32", "shape": [3]}})
        writer.set_page_size(1 << 10)  # many chunks a shard
        writer.write_raw_data(
            [{"id": i, "vec": np.full(3, i, dtype=np.float32)} for i in range(SMALL_ROWS)]
        )
    return [str(f) for f in writer.files]


def read_ids(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """The ids of every ``DatasetReader.read_rows`` call made after this call (a server's
    reads, when it runs in this process)."""
    reads: list[np.ndarray] = []
    real = DatasetReader.read_rows

    def spy(self: DatasetReader, ids: Any, columns: Any = None, **kwargs: Any) -> Any:
        reads.append(np.asarray(ids, dtype=np.int64).reshape(-1).copy())
        return real(self, ids, columns, **kwargs)

    monkeypatch.setattr(DatasetReader, "read_rows", spy)
    return reads
