"""The read-ahead window of a cold reader: how deep it is for the memory it has, and what
it asks of the disk (issue 23: no read-around, bytes read close to the bytes asked).

- ``MindDataset`` keeps at least ``ROWS_IN_FLIGHT`` rows of big values reading at once
  when its memory budget makes blocks small, and its blocks in flight (plus the one being
  consumed and the one waiting) stay within an eighth of the budget;
- with plenty of memory it reads as before (``num_parallel_workers`` blocks at once);
- a cold read of random rows leaves the map in ``MADV_RANDOM`` (``rr`` in smaps: no
  kernel read-around per fault) and reads from the disk about the rows' bytes, not
  megabytes per row (needs root to drop the page cache: fails, never skips, without).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.pipeline.sources.mind_dataset as mind_dataset
from mrecord import FileWriter, MindDataset, Shuffle
from mrecord.pipeline.sources.mind_dataset import ROWS_IN_FLIGHT
from mrecord.storage.verified import clear_verified

REPO = Path(__file__).resolve().parents[2]
MB = 1 << 20
ROW = 100_000


def _write_images() -> Path:
    """600 rows of 100 KB, on a disk (pytest's tmp_path may be in memory: nothing would
    ever be cold there); the caller removes the folder."""
    folder = Path(tempfile.mkdtemp(prefix="mrecord-window-", dir="/var/tmp"))
    path = folder / "images.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 20)
        for start in range(0, 600, 100):
            writer.write_raw_data(
                [
                    {"id": i, "blob": i.to_bytes(8, "little") * (ROW // 8)}
                    for i in range(start, start + 100)
                ]
            )
    return path


@pytest.fixture(scope="module")
def images() -> Iterator[str]:
    path = _write_images()
    yield str(path)
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.mark.parametrize("budget_mb", [16, 60, 100, 200])
def test_a_small_budget_reads_more_small_blocks_at_once_within_it(
    images: str, budget_mb: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mind_dataset, "memory_budget", lambda: budget_mb * MB)
    ds = MindDataset(images, shuffle=Shuffle.GLOBAL, num_parallel_workers=2)
    rows, in_flight = ds._block_rows, ds._reads_in_flight()
    assert 2 <= in_flight <= 8
    assert in_flight * rows >= ROWS_IN_FLIGHT or in_flight == 8
    if rows > 16:  # above the least block, the window fits the budget's eighth
        assert (in_flight + 2) * rows * ROW <= budget_mb * MB // 8


def test_plenty_of_memory_reads_num_parallel_workers_blocks(
    images: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mind_dataset, "memory_budget", lambda: 64 << 30)
    ds = MindDataset(images, shuffle=Shuffle.GLOBAL, num_parallel_workers=3)
    assert ds._reads_in_flight() == 3
    assert ds._block_rows * ROW >= 32 * MB  # big blocks: few hand-offs when warm


def test_a_deep_window_yields_the_same_rows_in_the_same_order(
    images: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = MindDataset(images, shuffle=Shuffle.GLOBAL)
    expected = [int(i) for _, i in wide.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    monkeypatch.setattr(mind_dataset, "memory_budget", lambda: 16 * MB)
    deep = MindDataset(images, shuffle=Shuffle.GLOBAL)
    assert deep._reads_in_flight() > 2
    got = []
    for blob, i in deep.create_tuple_iterator(num_epochs=1, output_numpy=True):
        assert np.asarray(blob).tobytes() == int(i).to_bytes(8, "little") * (ROW // 8)
        got.append(int(i))
    assert got == expected and sorted(got) == list(range(600))


_CHILD = """
import json, sys
import numpy as np
from mrecord import DatasetReader
def read_bytes():
    for line in open("/proc/self/io"):
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
reader = DatasetReader.open(sys.argv[1], verify="never")
ids = np.random.default_rng(0).choice(600, 60, replace=False)
before = read_bytes()
block = reader.read_rows(ids, ["blob"])
assert all(len(v) == 100000 for v in block.columns["blob"])
after = read_bytes()
path = str(reader.shards[0].path)
flags, mapped = [], False
for line in open("/proc/self/smaps"):
    if line.split() and line.split()[-1] == path:
        mapped = True
    elif mapped and line.startswith("VmFlags:"):
        flags.append(line.split()[1:])
        mapped = False
print(json.dumps({"read": after - before, "flags": flags}))
"""


def test_a_cold_random_read_reads_its_rows_and_no_neighbours() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "this test drops the page cache (echo 1 > /proc/sys/vm/drop_caches): it needs root"
        )
    path = _write_images()  # a file nobody maps (mapped pages survive drop_caches)
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path)],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-800:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    asked = 60 * ROW
    # The rows' own pages plus chunk heads and metadata; kernel read-around of up to
    # read_ahead_kb per fault would read megabytes per row (60 rows: 60 MB and more).
    assert out["read"] <= 2 * asked, out
    assert out["flags"] and all("rr" in flags for flags in out["flags"]), out


def _odd(i: int) -> bytes:
    """Row i's value: 33 KB to 150 KB, so values start and end anywhere in a page."""
    return i.to_bytes(4, "little") * ((33_000 + (i * 7_919) % 117_000) // 4) + bytes(i % 3)


@pytest.fixture(scope="module")
def odd_sizes() -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="mrecord-direct-", dir="/var/tmp"))
    with FileWriter(folder / "odd.mrecord") as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 20)
        writer.write_raw_data([{"id": i, "blob": _odd(i)} for i in range(150)])
    yield str(folder / "odd.mrecord")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("direct", [True, False])
def test_cold_big_values_read_with_direct_io_or_without_are_the_values(
    odd_sizes: str, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cold values of 32 KiB and more go by O_DIRECT into page-aligned slots (the last
    one ends inside the file's last pages); where direct I/O is not there, buffered."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.storage.readahead as readahead
    from mrecord import DatasetReader
    from mrecord.storage.shard import ShardFile

    # the direct path: the chunk buffers take these reads otherwise (test_chunk_buffers.py)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)  # all cold
    calls: list[bool] = []
    real = readahead.read_direct

    def spy(*args: object) -> bool:
        calls.append(real(*args))  # type: ignore[arg-type]
        return calls[-1]

    monkeypatch.setattr("mrecord.reader.dataset_reader.read_direct", spy)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    if not direct:
        monkeypatch.setattr(ShardFile, "direct_fd", lambda self: None)
    ids = np.random.default_rng(3).permutation(150)
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        for part in np.array_split(ids, 7):
            for as_arrays in (True, False):
                block = reader.read_rows(part, ["blob"], bytes_as_arrays=as_arrays)
                got = [bytes(v) for v in block.columns["blob"]]
                assert got == [_odd(int(i)) for i in part]
    assert calls and all(calls) if direct else calls and not any(calls)


def test_data_that_fits_in_memory_is_read_through_the_page_cache(
    odd_sizes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Direct I/O would leave the page cache empty, and every epoch as cold as the first:
    a dataset within the memory budget is read buffered (its next epoch is warm)."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.storage.readahead as readahead
    from mrecord import DatasetReader

    # the direct path: the chunk buffers take these reads otherwise (test_chunk_buffers.py)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    calls: list[object] = []

    def refuse(*args: object) -> bool:
        calls.append(args)
        return False

    monkeypatch.setattr(dataset_reader, "read_direct", refuse)
    ids = np.random.default_rng(5).permutation(150)  # a random order (file order: buffered)
    monkeypatch.setattr(dataset_reader, "memory_budget", lambda: 1 << 40)
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        got = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
    assert got == [_odd(int(i)) for i in ids] and calls == []
    monkeypatch.setattr(dataset_reader, "memory_budget", lambda: 1 << 20)  # 1 MB: beyond
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        got = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
    assert got == [_odd(int(i)) for i in ids] and calls  # tried direct (refused: buffered)


def test_values_in_file_order_are_read_direct_as_long_runs(
    odd_sizes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shuffle=False's values follow each other in the file: beyond memory, on storage
    that serves many small requests (no stream ahead), they are read direct as one run
    in 1 MiB pieces; a random order's values one read each."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.storage.readahead as readahead
    from mrecord import DatasetReader

    # the direct path: the chunk buffers take these reads otherwise (test_chunk_buffers.py)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: False))
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    calls: list[list[int]] = []
    real = readahead.read_direct

    def spy(shard: object, buffer: np.ndarray, places: list[tuple[int, int, int, int]]) -> bool:
        calls.append([span for _, _, span, _ in places])
        return real(shard, buffer, places)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset_reader, "read_direct", spy)
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        for ids in (np.arange(40, 80), np.arange(40, 80)[::-1].copy()):
            got = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
            assert got == [_odd(int(i)) for i in ids]
    in_order, reversed_ = calls
    run = sum(len(_odd(i)) for i in range(40, 80))  # the values, and little between them
    assert all(span <= readahead.SPAN_PIECE for span in in_order)
    assert len(in_order) == -(-sum(in_order) // readahead.SPAN_PIECE) and sum(in_order) >= run
    assert len(reversed_) == 40  # one read per value


def test_values_in_file_order_stream_through_the_page_cache(
    odd_sizes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond memory on storage that needs large requests (a hard disk), a dense read in
    file order asks for the bytes after it ahead (stream_ahead) and reads its values from
    the page cache, not direct; a sparse sorted subset (a third of its span), a random
    order and any read on storage that serves many small requests (this machine's disk)
    do not stream. A read of fixed-width columns alone streams once its chunks need no
    check (here ``verify="never"``; see the next test)."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.storage.readahead as readahead
    from mrecord import DatasetReader

    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: True))
    direct: list[int] = []
    real = readahead.read_direct

    def spy(shard: object, buffer: np.ndarray, places: list[tuple[int, int, int, int]]) -> bool:
        direct.append(len(places))
        return real(shard, buffer, places)  # type: ignore[arg-type]

    streamed = _streams_asked(monkeypatch)
    monkeypatch.setattr(dataset_reader, "read_direct", spy)
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        for ids in (np.arange(40, 80), np.arange(80, 120)):
            got = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
            assert got == [_odd(int(i)) for i in ids]
        assert direct == [] and len(streamed) == 2
        (a, b), (c, d) = streamed  # the second read's span lies further on
        assert a < b and c < d and a < c and b < d
        for ids in (np.arange(0, 150, 3), np.arange(40, 80)[::-1].copy()):
            got = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
            assert got == [_odd(int(i)) for i in ids]
        assert len(streamed) == 2 and len(direct) == 2
        ids = np.arange(0, 40)
        assert np.asarray(reader.read_rows(ids, ["id"]).columns["id"]).tolist() == ids.tolist()
        assert len(streamed) == 3  # fixed-width alone, nothing to check: streams too
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: False))
    with DatasetReader.open(odd_sizes, verify="never") as reader:
        got = [bytes(v) for v in reader.read_rows(np.arange(40, 80), ["blob"]).columns["blob"]]
        assert got == [_odd(int(i)) for i in range(40, 80)]
    assert len(streamed) == 3 and len(direct) == 3  # direct runs, as before


def test_fixed_width_columns_in_file_order_stream_once_their_chunks_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_head_index: None
) -> None:
    """Beyond memory on storage that needs large requests, a read of fixed-width columns
    alone in file order streams once its chunks are checked: before, ``verify="once"``
    reads each chunk whole for its check, in large requests of its own (a stream beside it
    read 1.36x the bytes); after, its exact row ranges asked for a column at a time came to
    ~150 KB a request (4M tabular rows on an hdd-like volume: a second epoch at 448K rows/s
    against 2.2M streamed). The rows are the same either way. (Written without a head
    index: with one, these small id chunks come from their copies there, no read at all.)"""
    import mrecord.storage.readahead as readahead
    from mrecord import DatasetReader

    odd_sizes = tmp_path / "odd.mrecord"
    with FileWriter(odd_sizes) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 20)
        writer.write_raw_data([{"id": i, "blob": _odd(i)} for i in range(150)])

    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: True))
    streamed = _streams_asked(monkeypatch)
    clear_verified()
    ids = np.arange(0, 120)
    with DatasetReader.open(odd_sizes, verify="once") as reader:
        assert np.asarray(reader.read_rows(ids, ["id"]).columns["id"]).tolist() == ids.tolist()
        assert streamed == []  # its chunks were checked on the way, not streamed
        assert np.asarray(reader.read_rows(ids, ["id"]).columns["id"]).tolist() == ids.tolist()
        assert len(streamed) == 1


def test_stream_ahead_asks_each_byte_once_restarts_on_a_jump_and_drops_behind(
    odd_sizes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mrecord.storage.readahead as readahead
    from mrecord.storage.shard import ShardFile

    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_STREAM_STEP", 1 << 20)
    advice: list[tuple[int, int, int]] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, o, n, a: advice.append((o, n, a)))
    shard = ShardFile(Path(odd_sizes), verify="never")
    try:
        need, drop = os.POSIX_FADV_WILLNEED, os.POSIX_FADV_DONTNEED
        mib = 1 << 20
        assert readahead.stream_ahead(shard, 0, mib, 3 * mib)
        asked = [(o, n) for o, n, a in advice if a == need]
        assert asked == [(0, mib), (mib, mib), (2 * mib, mib), (3 * mib, mib)]
        advice.clear()
        readahead.stream_ahead(shard, mib, 2 * mib, 3 * mib)  # one more MiB, nothing twice
        assert [(o, n) for o, n, a in advice if a == need] == [(4 * mib, mib)]
        advice.clear()
        readahead.stream_ahead(shard, 5 * mib, 6 * mib, mib)  # far ahead of what is asked:
        assert [(o, n) for o, n, a in advice if a == drop] == [(0, 4 * mib)]  # drops behind
        advice.clear()
        readahead.stream_ahead(shard, 0, mib // 2, mib)  # back to the start: a new epoch
        assert [(o, n) for o, n, a in advice if a == need] == [(0, mib), (mib, mib // 2)]
        assert all(o + n <= shard.size for o, n, _ in advice)
    finally:
        shard.close()


@pytest.mark.parametrize("seed", range(20))
def test_direct_spans_place_every_range_where_its_bytes_land(seed: int) -> None:
    """Simulated: the file's bytes read as the layout says give each range's bytes at its
    start, whether ranges touch, lie a little apart (merged) or far apart (a new slot)."""
    from mrecord.storage import readahead

    rng = np.random.default_rng(seed)
    places, at = [], int(rng.integers(0, 5000))
    for _ in range(int(rng.integers(1, 30))):
        n = int(rng.integers(1, 300_000))
        places.append((at, n))
        at += n + int(rng.choice([0, 0, 17, 4000, 9000, 2_000_000]))
    file = rng.integers(0, 256, at + 10_000, dtype=np.uint8)
    nbytes, starts, reads = readahead.direct_spans(places)
    buffer = np.zeros(nbytes, dtype=np.uint8)
    for slot, offset, span, need in reads:
        assert slot % 4096 == 0 and offset % 4096 == 0 and span % 4096 == 0
        assert 0 <= need <= span <= readahead.SPAN_PIECE
        got = file[offset : offset + span]
        assert len(got) >= need
        buffer[slot : slot + len(got)] = got
    for (offset, n), start in zip(places, starts, strict=True):
        assert np.array_equal(buffer[start : start + n], file[offset : offset + n])


def _streams_asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The ``(start, end)`` of every read the reader streams (``stream_ahead``) from now on."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.storage.readahead as readahead

    streamed: list[tuple[int, int]] = []
    real_stream = readahead.stream_ahead

    def stream(shard: Any, start: int, end: int, ahead: int) -> bool:
        streamed.append((start, end))
        return real_stream(shard, start, end, ahead)

    monkeypatch.setattr(dataset_reader, "stream_ahead", stream)
    return streamed
