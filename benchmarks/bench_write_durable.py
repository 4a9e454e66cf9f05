"""The images write to durable beside the disk's fsync'd sequential write of as many bytes.

Run ``python -m benchmarks.bench_write_durable [--rounds 5] [--scale 1.0] [--dir bench_out]``.
Issue 24's target is a ratio of two numbers that move together with the machine's load:
mrecord's ``FileWriter`` writing the images workload (100 KB rows, row-major columns per
``write_raw_data`` call as ``bench_peers`` does, page size 1 MiB, ``commit`` fsyncs every
file) against writing the same number of bytes into a new file, the faster of buffered
1 MiB ``write`` calls + ``fsync`` and 8 MiB ``O_DIRECT`` writes + ``fsync`` (the disk's
limit for this work). The two alternate, round
after round, in one process, so each round's ratio compares neighbours in time; the
table prints every round and the median. Data warm (generated in memory before timing).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks import workloads as W

_CALL = 1 << 20


def disk_limit(path: Path, size: int) -> float:
    """Seconds to write ``size`` bytes into a new file ``path`` to durable, the faster of
    two ways: buffered 1 MiB ``write`` calls and one ``fsync``; ``O_DIRECT`` writes of
    8 MiB (no page cache, no copy) and one ``fsync``."""
    block = np.random.default_rng(0).integers(0, 256, _CALL, dtype=np.uint8).tobytes()
    path.unlink(missing_ok=True)
    start = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(size // _CALL):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    buffered = time.perf_counter() - start
    path.unlink()
    direct = float("inf")
    flag = getattr(os, "O_DIRECT", 0)
    if flag:
        big = mmap.mmap(-1, 8 * _CALL)  # page-aligned, as O_DIRECT needs
        big.write(block * 8)
        start = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flag, 0o644)
        try:
            for _ in range(-(-size // len(big))):
                os.write(fd, big)
            os.fsync(fd)
        finally:
            os.close(fd)
        direct = time.perf_counter() - start
        big.close()
        path.unlink()
    return min(buffered, direct)


def mrecord_write(folder: Path, chunks: list[W.Chunk]) -> tuple[float, int]:
    """Seconds for ``FileWriter`` to write ``chunks`` to durable, and the bytes written."""
    from mrecord import FileWriter

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    workload = W.get("images")
    start = time.perf_counter()
    writer = FileWriter(str(folder / "images.mrecord"), shard_num=1, overwrite=True)
    writer.add_schema(workload.schema, "images")
    writer.set_page_size(1 << 20)
    for chunk in chunks:
        writer.write_raw_data(chunk)
    writer.commit()
    seconds = time.perf_counter() - start
    written = sum(p.stat().st_size for p in folder.iterdir())
    shutil.rmtree(folder)
    return seconds, written


def _settle(seconds: float) -> None:
    """Let the disk finish what earlier writes and removals left for it."""
    os.sync()
    time.sleep(seconds)


def main() -> int:
    """Print the rounds and the median ratio (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=Path("bench_out/write_durable"))
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds of quiet disk before each write"
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    chunks = list(W.get("images").chunks(args.scale))
    rows = sum(len(next(iter(c.values()))) for c in chunks)
    mrecord_write(args.dir / "warmup", chunks)  # imports and first-touch costs out of the rounds
    print(f"images workload: {rows:,} rows of ~100 KB, warm in memory; load {os.getloadavg()}")
    print(f"{'round':>5} {'limit MB/s':>11} {'mrecord MB/s':>13} {'of limit':>9}")
    ratios = []
    written = 0
    for r in range(1, args.rounds + 1):
        if r % 2 == 0 and written:  # even rounds: the limit first
            _settle(args.settle)
            limit_s = disk_limit(args.dir / "limit.scratch", written)
            _settle(args.settle)
            seconds, written = mrecord_write(args.dir / "mrecord", chunks)
        else:
            _settle(args.settle)
            seconds, written = mrecord_write(args.dir / "mrecord", chunks)
            _settle(args.settle)
            limit_s = disk_limit(args.dir / "limit.scratch", written)
        limit, mine = written / limit_s / 1e6, written / seconds / 1e6
        ratios.append(mine / limit)
        print(f"{r:5} {limit:11,.0f} {mine:13,.0f} {mine / limit:9.0%}")
    spread = f"{min(ratios):.0%}-{max(ratios):.0%}"
    print(f"median of limit: {statistics.median(ratios):.0%} (spread {spread})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
