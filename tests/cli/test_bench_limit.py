"""``mrecord bench``'s device limit reads each random place once (a second read of the
same pages is answered by the page cache and would measure memory, not the device)."""

from __future__ import annotations

import json
import mmap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mrecord import DatasetReader, FileWriter
from mrecord.block import Block
from mrecord.cli._bench import device_limit, drop_from_cache, in_memory_fraction, read_places
from mrecord.cli.main import cli


def test_random_reads_are_page_aligned_inside_the_files_and_never_share_a_page() -> None:
    sizes, row = [10_000_000, 3_000_000, 50_000], 100_000
    which, offsets = read_places(sizes, row, reads=2000)
    slots = sum((s - row) // 4096 // 25 + 1 if s > row else 1 for s in sizes)
    assert len(which) == len(offsets) == min(2000, slots)
    assert (offsets % 4096 == 0).all()
    ends = offsets + row
    assert all((ends[which == f] <= max(size, row)).all() for f, size in enumerate(sizes))
    pages = {
        (int(f), page)
        for f, a, b in zip(which, offsets, ends, strict=True)
        for page in range(int(a) // 4096, (int(b) - 1) // 4096 + 1)
    }
    assert len(pages) == sum(
        (int(b) - 1) // 4096 - int(a) // 4096 + 1 for a, b in zip(offsets, ends, strict=True)
    )


def test_small_rows_get_as_many_reads_as_asked_each_on_its_own_page() -> None:
    which, offsets = read_places([400_000_000], 76, reads=2000)
    assert len(set(zip(which.tolist(), (offsets // 4096).tolist(), strict=True))) == 2000
    assert np.all(offsets < 400_000_000)


def _dataset(path: Path, rows: int = 400) -> Path:
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.set_page_size(1 << 16)
        writer.write_raw_data([{"blob": bytes([i % 251]) * 20_000} for i in range(rows)])
    return path


def _drop(reader: DatasetReader) -> None:
    for shard in reader.shards:
        shard.mm.madvise(mmap.MADV_DONTNEED)  # out of this process's page tables first
    drop_from_cache(list(reader.files))


def test_the_limit_leaves_the_files_as_it_found_them(tmp_path: Path) -> None:
    """Measured before the patterns, the limit must not warm what they read next: the
    pages its reads brought in are dropped again (2,000 reads of 100 KB rows warmed 200
    MB, and the shuffled pattern then read a half-warm file)."""
    path = _dataset(tmp_path / "d.mrecord")
    with DatasetReader.open(path, verify="never") as reader:
        _drop(reader)
        before = in_memory_fraction(list(reader.shards))
        assert before is not None
        if before > 0.2:
            pytest.skip(f"this file system keeps {path} in memory (tmpfs?): nothing to test")
        sizes = [shard.size for shard in reader.shards]
        rate = device_limit(list(reader.files), sizes, 20_000, reads=200, shards=reader.shards)
        after = in_memory_fraction(list(reader.shards))
        assert rate > 0
        assert after is not None and after <= before + 0.02, (before, after)
        # without the maps to look pages up, what it read stays in memory (the old way)
        device_limit(list(reader.files), sizes, 20_000, reads=200)
        warmed = in_memory_fraction(list(reader.shards))
        assert warmed is not None and warmed > before + 0.2


def test_mrecord_bench_cold_drops_the_files_and_says_so(tmp_path: Path) -> None:
    path = _dataset(tmp_path / "d.mrecord")
    with DatasetReader.open(path) as reader:
        list(reader.read_rows(list(range(400))).columns["blob"])  # all of it in memory
    run = CliRunner().invoke(cli, ["bench", str(path), "--json", "--cold", "--max-rows", "100"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    assert out["cold"] is True
    assert 0 <= out["in_memory_at_start"] < 0.5
    assert out["device_limit_row_bytes"] >= 20_000  # a row's stored bytes
    text = CliRunner().invoke(cli, ["bench", str(path), "--max-rows", "100"]).stdout
    assert "measured before the patterns on the files as they were:" in text
    assert "of their pages in memory" in text and "% of it" in text


def test_mrecord_bench_cold_refuses_a_dataset_not_on_local_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard larger than the cache is read from its URL by range requests: there is no
    page cache of its file to drop, so --cold says so instead of measuring something
    else (a shard held whole in the local cache is a local file, and is dropped)."""
    from harness.servers import http_server

    (tmp_path / "srv").mkdir()
    path = _dataset(tmp_path / "srv" / "d.mrecord", rows=40)
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MRECORD_CACHE_BYTES", "100000")  # smaller than the shard: ranges
    with http_server(path.parent) as server:
        url = f"{server.url}/{path.name}"
        refused = CliRunner().invoke(cli, ["bench", url, "--cold", "--max-rows", "10"])
        plain = CliRunner().invoke(cli, ["bench", url, "--json", "--max-rows", "10"])
    assert refused.exit_code == 2, refused.output
    assert "--cold drops local files" in refused.output and url in refused.output
    assert plain.exit_code == 0, plain.output
    out = json.loads(plain.stdout)
    assert out["device_limit_rows_per_second"] is None and out["in_memory_at_start"] is None


class _SlowReader:
    """A reader whose every ``read_rows`` takes 50 ms and records how many run at once,
    and which records the batches announced to ``will_need_heads``."""

    num_rows = 40
    needs_large_requests = False

    def __init__(self, beyond_memory: bool) -> None:
        self.beyond_memory = beyond_memory
        self.running = 0
        self.most = 0
        self.hinted: list[list[int]] = []
        self.lock = threading.Lock()
        self.window = 0  # what sweep_rows answers: 0, read in batches
        self.swept: list[int] = []

    def read_rows(self, ids: np.ndarray, sweep: bool = False) -> Block:
        if sweep:
            self.swept.append(len(ids))
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return Block({"x": np.asarray(ids, dtype=np.int64)}, np.asarray(ids))

    def will_need_heads(self, ids: np.ndarray) -> None:
        with self.lock:
            self.hinted.append(np.asarray(ids).tolist())

    def sweep_rows(self, columns: Any = None, rows: int | None = None) -> int:
        return self.window


@pytest.mark.parametrize("beyond_memory", [False, True])
def test_bench_reads_batches_as_the_dataset_does(beyond_memory: bool) -> None:
    """``mrecord bench`` reads its batches on two threads, as ``MindDataset`` reads its
    blocks by default, and beyond memory announces each batch's heads four batches
    ahead (its lookahead): one batch at a time it reported about half of what the
    reader reaches (53% of the device limit against ~90%)."""
    from mrecord.cli._bench import run_bench

    reader = _SlowReader(beyond_memory)
    results = run_bench(reader, max_rows=40, batch_size=5, seed=0)
    assert reader.most == 2
    assert [r.pattern for r in results] == ["sequential", "shuffled"]
    assert all(r.rows == 40 and r.bytes == 40 * 8 for r in results)
    if beyond_memory:  # batches 4..7 of each pattern's 8, announced before they are read
        assert reader.hinted[:4] == [list(range(5 * k, 5 * k + 5)) for k in range(4, 8)]
        assert len(reader.hinted) == 8
    else:
        assert reader.hinted == []


def test_bench_sweeps_a_shuffled_epoch_where_the_dataset_would() -> None:
    """Small rows beyond memory: ``MindDataset`` reads a random order in windows, each
    swept in one pass (``sweep_rows``); the bench's shuffled pattern did not, and
    reported 5% of the device's limit where the dataset read 8x that."""
    from mrecord.cli._bench import run_bench

    reader = _SlowReader(True)
    reader.window = 16
    results = run_bench(reader, max_rows=40, batch_size=5, seed=0)
    sequential, shuffled = results
    assert (sequential.window, shuffled.window) == (0, 16)
    assert shuffled.rows == 40 and shuffled.bytes == 40 * 8
    assert reader.swept == [16, 16, 8]  # the shuffled rows in windows, each one read
