"""A quick read benchmark of a dataset: sequential and shuffled, rows/s and MiB/s."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "BenchResult",
    "block_nbytes",
    "default_batch_size",
    "device_limit",
    "drop_from_cache",
    "in_memory_fraction",
    "run_bench",
    "stored_row_bytes",
]


@dataclass(frozen=True)
class BenchResult:
    """One measured read pattern."""

    pattern: str
    rows: int
    seconds: float
    bytes: int
    window: int = 0
    """Rows a sweep read in one pass over the files (0: read in batches)."""

    @property
    def rows_per_second(self) -> float:
        """Rows read per second."""
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def bytes_per_second(self) -> float:
        """Decoded bytes per second."""
        return self.bytes / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """As JSON-able values."""
        out = asdict(self)
        out["rows_per_second"] = round(self.rows_per_second, 1)
        out["mib_per_second"] = round(self.bytes_per_second / (1 << 20), 2)
        return out


def block_nbytes(block: Block) -> int:
    """Bytes of decoded data in a block (array bytes, bytes/str lengths)."""
    total = 0
    for values in block.columns.values():
        if isinstance(values, np.ndarray):
            total += values.nbytes
        else:
            for v in values:
                total += v.nbytes if isinstance(v, np.ndarray) else len(v)
    return total


DEFAULT_BATCH_ROWS = 256
"""Rows per ``read_rows`` call of ``mrecord bench`` unless memory says fewer."""


def default_batch_size(reader: Any) -> int:
    """``DEFAULT_BATCH_ROWS``, fewer where that many rows would hold more than a
    ``BUDGET_PER_COPIED_BLOCK``-th of the memory budget (the bound of ``MindDataset``'s
    blocks, whose reading the bench follows): four batches are held at once, and 256
    rows of 100 KB images (25 MB each) got ``mrecord bench --cold`` OOM-killed over
    2.4 GB of them in a 200 MB memory group."""
    from mrecord.pipeline.sources.random_access import BUDGET_PER_COPIED_BLOCK
    from mrecord.storage.probe import memory_budget

    budget, row_bytes = memory_budget(), int(reader.mean_row_bytes)
    if budget is None or not row_bytes:
        return DEFAULT_BATCH_ROWS
    return max(1, min(DEFAULT_BATCH_ROWS, budget // BUDGET_PER_COPIED_BLOCK // row_bytes))


def run_bench(
    reader: Any,
    *,
    max_rows: int,
    batch_size: int,
    seed: int,
    before_each: Callable[[], None] | None = None,
    readers: int = 2,
) -> list[BenchResult]:
    """Read up to ``max_rows`` rows in order, then in a shuffled order, in batches;
    ``before_each()`` (dropping the files from the page cache) before each pattern.

    Batches are read as ``MindDataset`` reads its blocks: ``readers`` threads of
    ``read_rows`` (its default ``num_parallel_workers``, 2), and beyond memory the chunk
    heads of the batches a few ahead asked for on a thread of their own. One batch after
    another on one thread measured about half of what the reader reaches (2.4 GB of
    images from a cold cache: 53% of the random limit against ~90% through
    ``MindDataset``). Where ``MindDataset`` would sweep the shuffled epoch (small rows
    beyond memory, ``DatasetReader.sweep_rows``), the shuffled pattern is read so too:
    windows each in one pass, the next read while one is counted. In batches it reported
    5% of the device's limit over 6M rows with a string column in a 150 MB group, where
    ``MindDataset`` read 8x that."""
    from mrecord.pool import ThreadPool, ordered_map

    n = min(int(reader.num_rows), max_rows)
    results = []
    rng = np.random.default_rng(seed)
    orders = {
        "sequential": np.arange(n, dtype=np.int64),
        "shuffled": rng.permutation(int(reader.num_rows))[:n].astype(np.int64),
    }
    # as MindDataset's lookahead: not where every request counts (an hdd-like volume)
    lookahead = reader.beyond_memory and not reader.needs_large_requests

    def swept(ids: np.ndarray) -> Block:
        block: Block = reader.read_rows(ids, sweep=True)
        return block

    with (
        ThreadPool(reader.read_rows, readers, "mrecord-bench") as pool,
        ThreadPool(reader.will_need_heads, 1, "mrecord-bench-heads") as heads,
        ThreadPool(swept, 1, "mrecord-bench-sweep") as sweeper,
    ):
        for pattern, ids in orders.items():
            window = reader.sweep_rows(None, int(reader.num_rows)) if pattern == "shuffled" else 0
            if before_each is not None:
                before_each()
            nbytes = 0
            started = time.perf_counter()
            if window > 1:
                windows = (ids[lo : lo + window] for lo in range(0, len(ids), window))
                for _, block in ordered_map(sweeper, windows, window=2):
                    nbytes += block_nbytes(block)
            else:
                window = 0
                batches = _batches(ids, batch_size, readers + 2, heads if lookahead else None)
                for _, block in ordered_map(pool, batches, window=readers):
                    nbytes += block_nbytes(block)
            seconds = time.perf_counter() - started
            results.append(BenchResult(pattern, n, seconds, nbytes, window))
    return results


def _batches(
    ids: np.ndarray, batch_size: int, ahead: int, heads: Any | None
) -> Iterator[np.ndarray]:
    """``ids`` in batches; with ``heads`` (a pool of ``will_need_heads``), each batch's
    coming ``ahead``-th one is announced as it is handed out (a hint: what it raises is
    dropped with its future)."""
    starts = list(range(0, len(ids), batch_size))
    for k, lo in enumerate(starts):
        if heads is not None and k + ahead < len(starts):
            at = starts[k + ahead]
            heads.submit(ids[at : at + batch_size])
        yield ids[lo : lo + batch_size]


def read_places(
    sizes: list[int], row_bytes: int, reads: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(file index, offset) of up to ``reads`` random reads of ``row_bytes`` over files of
    ``sizes`` bytes: page-aligned, and no two on the same pages (a read the page cache
    answers because an earlier one brought its pages in would measure memory, not the
    device; fewer reads when the files hold fewer places)."""
    stride = -(-max(1, row_bytes) // 4096) * 4096
    slots = np.asarray([max(1, (size - row_bytes) // stride + 1) for size in sizes])
    starts = np.concatenate([[0], np.cumsum(slots)])
    rng = np.random.default_rng(seed)
    picked = rng.choice(int(starts[-1]), size=min(reads, int(starts[-1])), replace=False)
    which = np.searchsorted(starts, picked, side="right") - 1
    return which, (picked - starts[which]) * stride


def device_limit(
    files: list[Path],
    sizes: list[int],
    row_bytes: int,
    depth: int = 32,
    reads: int = 2000,
    shards: list[Any] | None = None,
) -> float:
    """Random reads of ``row_bytes`` (rows/s) at page-aligned random offsets of ``files``
    (of ``sizes`` bytes), ``depth`` threads of ``pread`` at once, no kernel read-ahead: the
    most a random-order reader can get from where the files are now (the disk when they
    are cold, memory when they are cached).

    With ``shards`` (the files' :class:`~mrecord.storage.shard.ShardFile` maps, to look
    pages up), the places that were not in memory before are dropped from the page cache
    again after: the files are left as they were found, so a measurement that follows
    sees them in the same state (else 2,000 rows of 100 KB read warm 200 MB of them)."""
    which, offsets = read_places(sizes, row_bytes, reads)
    reads = len(which)
    was_cold = _cold_places(shards, which, offsets, row_bytes) if shards else None
    fds = [os.open(f, os.O_RDONLY) for f in files]
    try:
        for fd in fds:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        todo = iter(zip(which.tolist(), offsets.tolist(), strict=True))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    item = next(todo, None)
                if item is None:
                    return
                os.pread(fds[item[0]], row_bytes, item[1])

        started = time.perf_counter()
        threads = [threading.Thread(target=work) for _ in range(depth)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rate = reads / max(time.perf_counter() - started, 1e-9)
        if was_cold is not None:
            # whole pages: the kernel keeps a page the range only partly covers
            span = -(-row_bytes // 4096) * 4096
            for f, offset in zip(which[was_cold].tolist(), offsets[was_cold].tolist(), strict=True):
                os.posix_fadvise(fds[f], offset, span, os.POSIX_FADV_DONTNEED)
        return rate
    finally:
        for fd in fds:
            os.close(fd)


def _cold_places(
    shards: list[Any], which: np.ndarray, offsets: np.ndarray, row_bytes: int
) -> np.ndarray:
    """Whether each place (file ``which``, ``offset``, ``row_bytes`` long) has a page that
    is not in memory now (a place that cannot be looked up counts as cold)."""
    from mrecord.storage.readahead import resident_pages

    cold = np.ones(len(which), dtype=bool)
    for i, (f, offset) in enumerate(zip(which.tolist(), offsets.tolist(), strict=True)):
        shard = shards[f]
        resident = resident_pages(shard, offset, min(row_bytes, shard.size - offset))
        cold[i] = resident is None or not bool(resident.all())
    return cold


def in_memory_fraction(shards: list[Any]) -> float | None:
    """The share of the files' 4 KiB pages that are in the page cache now; None when that
    cannot be told (a file not mapped locally, no ``mincore``)."""
    from mrecord.storage.readahead import resident_pages

    resident = total = 0
    for shard in shards:
        if not shard.size:
            continue
        pages = resident_pages(shard, 0, shard.size)
        if pages is None:
            return None
        resident += int(pages.sum())
        total += len(pages)
    return resident / total if total else None


def drop_from_cache(files: list[Path]) -> None:
    """Ask the kernel to drop ``files`` from the page cache (``POSIX_FADV_DONTNEED``): a
    cold read after it goes to the disk (pages another process maps stay)."""
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def stored_row_bytes(shards: list[Any], rows: int) -> int:
    """The stored bytes of a row on average (every chunk of every shard over the rows):
    the size of the random reads the device's limit is measured with."""
    total = sum(int(shard.meta.chunks["length"].sum()) for shard in shards)
    return max(1, total // max(1, rows))
