"""Peak memory of a pipeline with MindSpore's default prefetch (16) vs the FAQ's advice (2).

The FAQ's advice for high memory use: ``config.set_prefetch_size(2)`` and one worker
per op. mrecord's queues and map windows are sized from the prefetch setting, so
the advice must visibly lower memory. Each setting runs in its own subprocess; the
pipeline makes 256 KiB rows on the fly, maps them, batches 8 of them and is read by
a slow consumer (so every queue fills up). Printed per setting: the peak Python
allocation (tracemalloc, numpy buffers included) and the peak resident memory of
the process tree above its start.

Usage::

    python -m benchmarks.bench_pipeline_memory [--rows 1500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator

import numpy as np

ROW_BYTES = 256 * 1024
SETTINGS = [("MindSpore defaults", 16, 4), ("FAQ advice", 2, 1)]


def _child(rows: int, prefetch: int, workers: int) -> dict[str, float]:
    from benchmarks.measure import PeakRss
    from mrecord import config
    from mrecord.pipeline import GeneratorDataset

    config.set_prefetch_size(prefetch)

    def make() -> Iterator[tuple[np.ndarray]]:
        for i in range(rows):
            yield (np.full(ROW_BYTES, i % 251, dtype=np.uint8),)

    def brighten(x: np.ndarray) -> np.ndarray:
        return x + 1

    ds = GeneratorDataset(make, ["image"]).map(brighten, num_parallel_workers=workers).batch(8)
    tracemalloc.start()
    start = time.perf_counter()
    batches = 0
    with PeakRss() as rss:
        for (batch,) in ds.create_tuple_iterator(num_epochs=1):
            batches += 1
            if int(batch[0, 0]) != (batches - 1) * 8 % 251 + 1:
                raise SystemExit("wrong data")
            time.sleep(0.004)  # a slow training step: the pipeline runs ahead until bounded
    _, peak = tracemalloc.get_traced_memory()
    return {
        "tracemalloc_peak_mb": peak / 2**20,
        "rss_peak_above_start_mb": rss.peak_mb - rss.base_mb,
        "seconds": time.perf_counter() - start,
        "batches": batches,
    }


def main(argv: list[str] | None = None) -> int:
    """Run both settings in subprocesses and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--child", nargs=2, type=int, metavar=("PREFETCH", "WORKERS"))
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.rows, *args.child)))
        return 0
    kib = ROW_BYTES // 1024
    print(f"pipeline: {args.rows} rows of {kib} KiB -> map -> batch(8), slow consumer")
    print(f"{'setting':<20} {'prefetch':>8} {'workers':>7} {'tracemalloc MB':>15} {'RSS MB':>8}")
    for label, prefetch, workers in SETTINGS:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_pipeline_memory",
                "--rows",
                str(args.rows),
                "--child",
                str(prefetch),
                str(workers),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"{label:<20} {prefetch:>8} {workers:>7} {r['tracemalloc_peak_mb']:>15.1f} "
            f"{r['rss_peak_above_start_mb']:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
