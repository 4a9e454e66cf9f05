"""A quick read benchmark of a dataset: sequential and shuffled, rows/s and MiB/s."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = ["BenchResult", "block_nbytes", "device_limit", "run_bench"]


@dataclass(frozen=True)
class BenchResult:
    """One measured read pattern."""

    pattern: str
    rows: int
    seconds: float
    bytes: int

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


def run_bench(reader: Any, *, max_rows: int, batch_size: int, seed: int) -> list[BenchResult]:
    """Read up to ``max_rows`` rows in order, then in a shuffled order, in batches."""
    n = min(int(reader.num_rows), max_rows)
    results = []
    rng = np.random.default_rng(seed)
    orders = {
        "sequential": np.arange(n, dtype=np.int64),
        "shuffled": rng.permutation(int(reader.num_rows))[:n].astype(np.int64),
    }
    for pattern, ids in orders.items():
        nbytes = 0
        started = time.perf_counter()
        for lo in range(0, n, batch_size):
            nbytes += block_nbytes(reader.read_rows(ids[lo : lo + batch_size]))
        results.append(BenchResult(pattern, n, time.perf_counter() - started, nbytes))
    return results


def device_limit(
    files: list[Path], sizes: list[int], row_bytes: int, depth: int = 32, reads: int = 2000
) -> float:
    """Random reads of ``row_bytes`` (rows/s) at page-aligned random offsets of ``files``
    (of ``sizes`` bytes), ``depth`` threads of ``pread`` at once, no kernel read-ahead: the
    most a random-order reader can get from where the files are now (the disk when they
    are cold, memory when they are cached)."""
    rng = np.random.default_rng(0)
    which = rng.choice(len(files), size=reads, p=np.asarray(sizes) / max(1, sum(sizes)))
    spans = np.maximum(np.asarray(sizes)[which] - row_bytes, 1)
    offsets = rng.integers(0, spans)
    offsets -= offsets % 4096
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
        return reads / max(time.perf_counter() - started, 1e-9)
    finally:
        for fd in fds:
            os.close(fd)
