"""A reader beyond its memory never skips looking at a block because the one before looked
warm (issue 23). The skip (``WARM_SECONDS`` after a warm block) saves warm readers a
``mincore`` per block; beyond memory a warm block is an accident (the end of an epoch, a
chunk just checked) and the blocks after it, taken as warm too, were served from the map
one 4 KiB page fault at a time: a second sequential epoch in a 200 MB group ran at a sixth
of the first's rate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
import mrecord.storage.readahead as readahead
from mrecord import DatasetReader, FileWriter
from mrecord.storage.verified import clear_verified


def _value(i: int) -> bytes:
    return i.to_bytes(4, "little") * 10_000


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    file = tmp_path / "d.mrecord"
    with FileWriter(file) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 16)
        writer.write_raw_data([{"id": i, "blob": _value(i)} for i in range(60)])
    clear_verified()
    yield file
    clear_verified()


@pytest.mark.parametrize("beyond_memory", [True, False])
def test_after_a_warm_block_the_next_cold_one_is_read_cold_beyond_memory(
    path: Path, monkeypatch: pytest.MonkeyPatch, beyond_memory: bool
) -> None:
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "WARM_SECONDS", 3600.0)  # a slow machine changes nothing
    half = path.stat().st_size // 2  # rows 50-59 lie past it, rows 0-9 before it
    # The first block read (the file's end) looks warm, the second (its start) is cold.
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: ranges[0][0] > half)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: beyond_memory)
    cold_reads: list[int] = []
    real = dataset_reader._read_cold

    def spy(shard: object, col: int, values: list[object], *rest: object) -> None:
        cold_reads.append(len(values))
        real(shard, col, values, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset_reader, "_read_cold", spy)
    with DatasetReader.open(path, verify="never") as reader:
        for ids in (np.arange(50, 60), np.arange(0, 10)):
            got = reader.read_rows(ids, bytes_as_arrays=True).columns["blob"]
            assert [bytes(v) for v in got] == [_value(int(i)) for i in ids]
    # Beyond memory the second block is looked at, found cold and read into a buffer;
    # with memory to spare it is taken as warm for WARM_SECONDS (views of the map).
    assert cold_reads == ([10] if beyond_memory else [])


def test_a_range_in_memory_looks_resident_wherever_it_starts_in_a_page(path: Path) -> None:
    """``mincore`` wants a page-aligned address: a range that starts inside a page (every
    value but the first of a chunk) was always taken as cold, so a warm reader paid the
    cold path (hints, copies instead of views) on every block."""
    data = path.read_bytes()  # the whole file is in the page cache now
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        _ = shard.mm[: len(data)]  # and mapped
        for offset in (0, 1, 100, 4095, 4096, 5000, len(data) - 10):
            assert readahead.looks_resident(shard, [(offset, 10)]), offset
        assert readahead.looks_resident(shard, [(8, 3 * 4096), (70_001, 20_000)])
