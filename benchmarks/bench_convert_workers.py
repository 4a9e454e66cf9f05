"""Threads or processes for a conversion's per-row work: the measurement behind the rule.

Run ``python -m benchmarks.bench_convert_workers [--images 4000] [--rounds 2]`` after
``benchmarks.bench_convert`` has generated its JPEG folder (``/tmp/mrecord-bench-jpegs-N``,
100 KB JPEGs; any ImageFolder works with ``--folder``). Warm cache: the folder is read once
before timing. For the image check and for ``--resize 64x64`` it times the same
``BatchPlan`` (``mrecord.convert.parallel.run_plan``) run serially, in 2 threads and in 2
processes, and PNG-encodes CIFAR-sized records serially and in 2 threads. The rule in
``mrecord/convert/parallel.py`` (threads where the work releases the GIL, processes
elsewhere) follows from this table; docs/CONVERT.md records a run. The machine may be
shared: compare within a round.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from mrecord.convert.cifar10 import encode_png
from mrecord.convert.imagefolder import ImageFolderSource
from mrecord.convert.parallel import run_plan
from mrecord.pool import ThreadPool


def time_plan(folder: Path, images: int, resize: bool, mode: str) -> float:
    """Rows per second of the imagefolder plan over ``images`` files in ``mode``."""
    source = ImageFolderSource(folder, resize=(64, 64) if resize else None)
    source.items = source.items[:images]
    plan = source.plan(256)
    if mode == "processes":
        plan = dataclasses.replace(plan, releases_gil=False)
    elif mode == "threads":
        plan = dataclasses.replace(plan, releases_gil=True)
    start = time.perf_counter()
    rows = sum(
        len(batch["image"])
        for _b, batch in run_plan(plan, workers=1 if mode == "serial" else 2)
        if batch
    )
    return rows / (time.perf_counter() - start)


def time_png(records: int) -> tuple[float, float]:
    """Seconds to PNG-encode ``records`` 32x32x3 images serially and in 2 threads."""
    images = list(np.random.default_rng(0).integers(0, 256, (records, 32, 32, 3), dtype=np.uint8))
    start = time.perf_counter()
    for image in images:
        encode_png(image)
    serial = time.perf_counter() - start
    with ThreadPool(encode_png, 2, "bench-png") as pool:
        start = time.perf_counter()
        list(pool.map(images))
        threaded = time.perf_counter() - start
    return serial, threaded


def main() -> int:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    folder = args.folder or Path(f"/tmp/mrecord-bench-jpegs-{args.images}")
    if not folder.exists():
        candidates = sorted(Path("/tmp").glob("mrecord-bench-jpegs-*[0-9]"))
        if not candidates:
            raise SystemExit("no JPEG folder: run python -m benchmarks.bench_convert first")
        folder = candidates[-1]
    for path in sorted(folder.rglob("*.jpg"))[: args.images * 2]:
        path.read_bytes()  # warm cache
    print(f"folder {folder}, {args.images} images, warm cache")
    print(f"{'work':18} {'round':>5} {'serial':>8} {'2 threads':>16} {'2 processes':>16}")
    for resize in (False, True):
        for r in range(args.rounds):
            rates = {
                m: time_plan(folder, args.images, resize, m)
                for m in ("serial", "threads", "processes")
            }
            base = rates["serial"]
            print(
                f"{'--resize 64x64' if resize else 'image check':18} {r + 1:5} {base:8,.0f} "
                f"{rates['threads']:8,.0f} ({rates['threads'] / base:.2f}x) "
                f"{rates['processes']:8,.0f} ({rates['processes'] / base:.2f}x)"
            )
    for r in range(args.rounds):
        serial, threaded = time_png(3000)
        print(
            f"{'PNG encode 3,000':18} {r + 1:5} {serial:7.2f}s {threaded:7.2f}s "
            f"({serial / threaded:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
