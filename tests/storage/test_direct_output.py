"""Shard pages written with ``O_DIRECT`` (``mrecord/storage/direct_output.py``): the same
bytes as buffered writes, only whole aligned blocks written directly, short direct writes
finished, buffered writes where the file system refuses ``O_DIRECT``, and the stage
buffers' process-wide budget."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord.format.metadata import ShardMetadata
from mrecord.storage import direct_output, shard_output
from mrecord.storage.direct_output import (
    BLOCK,
    STAGE_BUDGET,
    STAGE_MAX,
    STAGE_MIN,
    DirectStream,
    stage_bytes,
)
from mrecord.storage.shard import read_shard_metadata
from mrecord.storage.shard_output import ShardOutput
from tests.storage.test_mutants_shard_output import _OsProxy, _write

pytestmark = pytest.mark.skipif(not getattr(os, "O_DIRECT", 0), reason="no O_DIRECT here")

STAGE_BYTES = 1 << 20
"""The stage size in the byte-for-byte tests: values cross stage boundaries at small sizes."""


@pytest.fixture(autouse=True)
def small_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct_output, "STAGE_MAX", STAGE_BYTES)


@pytest.fixture
def real_stage_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct_output, "STAGE_MAX", STAGE_MAX)  # the value imported above
    # Streams other tests abandoned are collected now, not during the test, and the
    # budget counts only this test's streams (restored afterwards).
    gc.collect()
    monkeypatch.setattr(direct_output, "_staged", 0)
    monkeypatch.setattr(direct_output, "_cap", [direct_output.STAGE_CAP])  # not the budget's


@pytest.fixture(autouse=True)
def direct_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Direct from the first byte (by default a shard's first 64 MiB are buffered)."""
    monkeypatch.setattr(shard_output, "DIRECT_AFTER", 0)


@pytest.fixture
def meta(tmp_path: Path) -> ShardMetadata:
    return read_shard_metadata(_write(tmp_path / "m", range(3)))


def _pages(seed: int) -> list[list[tuple[list[Any], int]]]:
    """Pages of chunks: small blobs, a numpy array, values bigger than a stage."""
    rng = np.random.default_rng(seed)
    pages = []
    for p in range(12):
        chunks: list[tuple[list[Any], int]] = []
        for _ in range(int(rng.integers(1, 4))):
            n = int(rng.choice([1, 63, 4096, 70_000, STAGE_BYTES + 12_345]))
            parts: list[Any] = [rng.bytes(n)]
            if p % 3 == 0:
                parts.append(np.arange(n % 97, dtype=np.int64))
            chunks.append((parts, sum(memoryview(x).nbytes for x in parts)))
        pages.append(chunks)
    return pages


def _shard(path: Path, pages: list[list[tuple[list[Any], int]]], meta: ShardMetadata) -> bytes:
    out = ShardOutput(path)
    for i, page in enumerate(pages):
        out.write_page(page)
        if i == 5:
            out.sync()  # a checkpoint in the middle: the stream goes on after it
    out.finish(meta)
    return path.read_bytes()


def test_direct_and_buffered_shards_are_the_same_bytes(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values across stage boundaries, odd sizes, a sync on the way: identical files."""
    pages = _pages(1)
    direct = _shard(tmp_path / "direct", pages, meta)
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)
    assert direct == _shard(tmp_path / "buffered", pages, meta)
    assert len(direct) > 3 * STAGE_BYTES


def test_only_whole_aligned_blocks_are_written_directly(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pages go through a descriptor opened with O_DIRECT, in whole blocks at block
    positions (the rest, a last partial block, through the ordinary descriptor)."""
    direct_fds: set[int] = set()
    writes: list[tuple[bool, int, int]] = []
    real_open, real_pwrite = os.open, os.pwrite

    def opening(path: Any, flags: int, *args: Any) -> int:
        fd = real_open(path, flags, *args)
        if flags & os.O_DIRECT:
            direct_fds.add(fd)
        return fd

    def pwrite(fd: int, data: Any, position: int) -> int:
        writes.append((fd in direct_fds, position, memoryview(data).nbytes))
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(direct_output, "os", _OsProxy(open=opening, pwrite=pwrite))
    _shard(tmp_path / "p", _pages(2), meta)
    direct = [(pos, n) for is_direct, pos, n in writes if is_direct]
    assert direct and all(pos % BLOCK == 0 and n % BLOCK == 0 for pos, n in direct)
    assert sum(n for _pos, n in direct) >= 3 * STAGE_BYTES


def test_a_short_direct_write_is_finished(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct write that wrote only part (a nearly full disk) is finished through the
    ordinary descriptor: the file is whole."""
    real_pwrite = os.pwrite
    cut = [0]

    def pwrite(fd: int, data: Any, position: int) -> int:
        view = memoryview(data)
        if len(view) >= 2 * BLOCK and cut[0] < 3:
            cut[0] += 1
            return real_pwrite(fd, view[:BLOCK], position)
        return real_pwrite(fd, view, position)

    pages = _pages(3)
    expected = _shard(tmp_path / "whole", pages, meta)
    monkeypatch.setattr(direct_output, "os", _OsProxy(pwrite=pwrite))
    assert _shard(tmp_path / "short", pages, meta) == expected
    assert cut[0] == 3


def test_a_file_system_without_o_direct_gets_buffered_writes(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where opening with O_DIRECT fails (tmpfs: EINVAL) the shard is written as before."""
    real_open = os.open

    def opening(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *args)

    pages = _pages(4)
    expected = _shard(tmp_path / "direct", pages, meta)
    monkeypatch.setattr(direct_output, "os", _OsProxy(open=opening))
    out = ShardOutput(tmp_path / "probe")
    assert out._direct is None  # the fallback is what is tested
    out.abort()
    assert _shard(tmp_path / "buffered", pages, meta) == expected


def test_a_shard_goes_direct_after_its_first_bytes(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default the first ``DIRECT_AFTER`` bytes are written buffered (a small dataset
    stays in the page cache for its first reader) and the rest directly, from an
    unaligned point on: the file is byte for byte the buffered one."""
    pages = _pages(5)
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)
    expected = _shard(tmp_path / "buffered", pages, meta)
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", True)
    monkeypatch.setattr(shard_output, "DIRECT_AFTER", 2 * STAGE_BYTES + 100)
    opened_at: list[int] = []
    real_open = os.open

    def opening(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            opened_at.append(os.stat(path).st_size)
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct_output, "os", _OsProxy(open=opening))
    assert _shard(tmp_path / "switched", pages, meta) == expected
    assert len(opened_at) == 1 and opened_at[0] >= 2 * STAGE_BYTES + 100


def test_empty_arrays_among_the_parts(tmp_path: Path, meta: ShardMetadata) -> None:
    """A variable-shape value with no elements (shape (0, 4)) is a part of zero bytes:
    written directly it adds nothing, as in a buffered write (it once failed to cast)."""
    parts: list[Any] = [b"x" * 10, np.zeros((0, 4), np.float32), np.ones((2, 4), np.float32)]
    pages = [[(parts, 10 + 32)]]
    direct = _shard(tmp_path / "direct", pages, meta)
    assert direct[64 : 64 + 42] == b"x" * 10 + np.ones((2, 4), np.float32).tobytes()


def test_a_dataset_with_empty_values_written_directly_reads_back(
    tmp_path: Path,
) -> None:
    """End to end: FileWriter rows with empty variable-shape arrays and empty blobs,
    pages written with O_DIRECT from the first byte, read back equal."""
    from mrecord import DatasetReader, FileWriter

    rng = np.random.default_rng(0)
    boxes = [rng.random((i % 3, 4), dtype=np.float32) for i in range(300)]
    blobs = [rng.bytes(i % 5 * 1000) for i in range(300)]
    with FileWriter(tmp_path / "d") as writer:
        writer.add_schema(
            {"boxes": {"type": "float32", "shape": [-1, 4]}, "blob": {"type": "bytes"}}
        )
        writer.set_page_size(8192)
        writer.write_raw_data({"boxes": boxes, "blob": blobs})
    with DatasetReader.open(tmp_path / "d") as reader:
        rows = list(reader.iter_rows())
    assert [bytes(r["blob"]) for r in rows] == blobs
    for row, want in zip(rows, boxes, strict=True):
        np.testing.assert_array_equal(np.asarray(row["boxes"]).reshape(-1, 4), want)


def _streams(tmp_path: Path, count: int) -> list[DirectStream]:
    streams = []
    for i in range(count):
        path = tmp_path / f"s{i}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        stream = DirectStream.open(path, fd)
        assert stream is not None
        streams.append(stream)
        os.close(fd)
    return streams


@pytest.mark.usefixtures("real_stage_sizes")
def test_a_few_streams_get_big_stages_and_many_get_small_ones(tmp_path: Path) -> None:
    """The first streams of a process get STAGE_MAX buffers; once the budget is taken,
    new ones get STAGE_MIN (hundreds of shards stay at 2 MiB each); a closed stream's
    buffers count no more."""
    assert stage_bytes() == STAGE_MAX  # nothing else open
    big = STAGE_BUDGET // (2 * STAGE_MAX)
    streams = _streams(tmp_path, big + 3)
    assert [s._size for s in streams[:big]] == [STAGE_MAX] * big
    assert [s._size for s in streams[big:]] == [STAGE_MIN] * 3
    for stream in streams:
        stream.close()
    assert stage_bytes() == STAGE_MAX


@pytest.mark.usefixtures("real_stage_sizes")
def test_an_abandoned_stream_gives_its_budget_back(tmp_path: Path) -> None:
    """A stream dropped without ``close`` (a writer abandoned on an error) does not keep
    later streams on small buffers for the rest of the process."""
    streams = _streams(tmp_path, STAGE_BUDGET // (2 * STAGE_MAX))
    assert stage_bytes() == STAGE_MIN
    del streams
    gc.collect()
    assert stage_bytes() == STAGE_MAX


@pytest.mark.usefixtures("real_stage_sizes")
def test_past_the_cap_a_stream_is_refused_and_its_shard_writes_buffered(tmp_path: Path) -> None:
    """Every stream got at least STAGE_MIN buffers: a writer of 1,000 shards past their
    first 64 MiB held 2 GiB of them, anonymous memory a memory limit counts. Past
    ``STAGE_CAP`` a new stream is refused and its shard goes on through the page cache,
    which the kernel can reclaim; a closed stream's room serves the next one."""
    cap = direct_output.stage_cap()
    room = (cap - STAGE_BUDGET) // (2 * STAGE_MIN) + STAGE_BUDGET // (2 * STAGE_MAX)
    streams = _streams(tmp_path, room)
    path = tmp_path / "over"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert DirectStream.open(path, fd) is None, "a stream past the cap"
        streams.pop().close()
        again = DirectStream.open(path, fd)
        assert again is not None
        again.close()
    finally:
        os.close(fd)
        for stream in streams:
            stream.close()


def test_the_cap_is_an_eighth_of_the_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer in a 400 MB memory group may not hold 256 MiB of stage buffers."""
    from mrecord.storage import probe

    for budget, cap in ((None, 256 << 20), (8 << 30, 256 << 20), (320 << 20, 40 << 20),
                        (8 << 20, 4 * STAGE_MIN)):  # fmt: skip
        monkeypatch.setattr(direct_output, "_cap", [])
        monkeypatch.setattr(probe, "memory_budget", lambda budget=budget: budget)
        assert direct_output.stage_cap() == cap
