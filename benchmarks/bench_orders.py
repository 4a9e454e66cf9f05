"""Benchmark row orders: build and fully iterate the order of every shuffle mode.

Run: ``python -m benchmarks.bench_orders [--rows 10000000] [--files 10] [--chunk 65536]``.

1. For ``--rows`` rows in ``--files`` equal files, each mode (no shuffle, GLOBAL,
   PARTIAL, FILES, INFILE, ADAPTIVE, and GLOBAL split into 4 shards with padding) is
   built and iterated chunk by chunk: the median wall time of ``--repeats`` runs, and
   the peak extra memory (tracemalloc) of one more run, which also checks that the ids
   are the expected permutation (their sum). Target: under a second for 10M rows.
2. GLOBAL at ``--big-rows`` (100,000,000) rows: build the order and take a few chunks;
   the peak extra memory stays a few chunks' worth (MindSpore materializes the order:
   800 MB of int64 ids for 100M rows).

mrecord only: MindSpore has no public API to build an order without reading data.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from mrecord.sampling.arguments import sampler_from_args
from mrecord.sampling.order import Order
from mrecord.sampling.shuffle import Shuffle, shuffle_order

T = TypeVar("T")
SEED = 5489
MB = 1 << 20


def _modes(counts: list[int]) -> dict[str, Callable[[], Order]]:
    def mode(m: Shuffle | None) -> Callable[[], Order]:
        return lambda: shuffle_order(m, counts, SEED, 1)

    def sharded() -> Order:
        n = sum(counts)
        sampler = sampler_from_args(
            shuffle=True, num_shards=4, shard_id=3, num_samples=None, num_padded=(-n) % 4
        )
        return sampler.build_order(counts, seed=SEED, epoch=1)

    return {
        "none": mode(None),
        "GLOBAL": mode(Shuffle.GLOBAL),
        "PARTIAL": mode(Shuffle.PARTIAL),
        "FILES": mode(Shuffle.FILES),
        "INFILE": mode(Shuffle.INFILE),
        "ADAPTIVE": mode(Shuffle.ADAPTIVE),
        "GLOBAL 4 shards": sharded,
    }


def _iterate(build: Callable[[], Order], chunk: int, checksum: bool = False) -> tuple[int, int]:
    order = build()
    rows = 0
    total = 0
    for ids in order.iter_chunks(chunk):
        rows += len(ids)
        if checksum:
            total += int(ids.sum())
    return rows, total


def _timed(build: Callable[[], Order], chunk: int, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds (CPU shows the cost on a busy, shared machine)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        _iterate(build, chunk)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _peak(fn: Callable[[], T]) -> tuple[T, int]:
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def bench_modes(rows: int, files: int, chunk: int, repeats: int) -> bool:
    """Print the table of part 1; return whether every check passed."""
    counts = [rows // files + (f < rows % files) for f in range(files)]
    expected_sum = rows * (rows - 1) // 2
    print(f"\nOrders for {rows:,} rows in {files} files, chunks of {chunk:,} ids")
    print(
        f"{'mode':<18}{'rows':>12}{'wall s':>9}{'cpu s':>9}{'M rows/s':>10}{'peak MB':>10}  check"
    )
    ok = True
    for name, build in _modes(counts).items():
        seconds, cpu = _timed(build, chunk, repeats)
        (got_rows, got_sum), peak = _peak(functools.partial(_iterate, build, chunk, True))
        if name.endswith("shards"):
            good = got_rows == -(-rows // 4)
        else:
            good = got_rows == rows and got_sum == expected_sum
        ok &= good
        speed = got_rows / seconds / 1e6 if seconds else float("inf")
        flag = "ok" if good else "WRONG"
        target = "" if seconds < 1.0 else "  (over the 1 s target)"
        print(
            f"{name:<18}{got_rows:>12,}{seconds:>9.3f}{cpu:>9.3f}{speed:>10.1f}{peak / MB:>10.2f}  "
            f"{flag}{target}"
        )
    return ok


def bench_big_global(rows: int, chunk: int, chunks: int) -> None:
    """Print part 2: GLOBAL's memory at ``rows`` rows."""

    def work() -> int:
        order = shuffle_order(Shuffle.GLOBAL, [rows], SEED, 0)
        rng = np.random.default_rng(0)
        starts = rng.integers(0, rows - chunk, size=chunks)
        taken = 0
        for s in starts:
            taken += len(order.take(np.arange(s, s + chunk)))
        return taken

    start = time.perf_counter()
    taken, peak = _peak(work)
    seconds = time.perf_counter() - start
    print(
        f"\nGLOBAL over {rows:,} rows: built and took {chunks} chunks of {chunk:,} "
        f"({taken:,} ids) in {seconds:.3f} s; peak extra memory {peak / MB:.2f} MB "
        f"(a materialized int64 order would be {rows * 8 / MB:,.0f} MB)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run both parts; exit status 1 if an order was wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=1 << 16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big-rows", type=int, default=100_000_000)
    parser.add_argument("--big-chunks", type=int, default=8)
    args = parser.parse_args(argv)
    ok = bench_modes(args.rows, args.files, args.chunk, args.repeats)
    bench_big_global(args.big_rows, args.chunk, args.big_chunks)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
