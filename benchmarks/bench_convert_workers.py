"""Threads or processes for a conversion's per-row work: the measurement behind the rule.

Run ``python -m benchmarks.bench_convert_workers [--images 4000] [--rounds 2]`` after
``benchmarks.bench_convert`` has generated its JPEG folder (``/tmp/mrecord-bench-jpegs-N``,
100 KB JPEGs; any ImageFolder works with ``--folder``). Warm cache: the folder is read once
before timing. For the image check and for ``--resize 64x64`` it times the same
``BatchPlan`` (``mrecord.convert.parallel.run_plan``) run serially, in 2 threads and in 2
processes, and PNG-encodes CIFAR-sized records serially and in 2 threads.
It also prints what each ``--check-images`` mode catches on 300 of the JPEGs
(whole, cut short, 10 bytes changed) and its cost per image. The rule in
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
    # the "decode" check: the CPU-bound one (the default structure check is I/O-bound)
    source = ImageFolderSource(folder, resize=(64, 64) if resize else None, check="decode")
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


def compare_checks(folder: Path, images: int = 300) -> None:
    """What each ``--check-images`` mode catches on ``images`` JPEGs, and what it costs:
    the files whole, cut at a random point, and with 10 random bytes changed inside the
    compressed data (after the first scan marker)."""
    import random

    from mrecord.convert.imagefolder import _Loader

    datas = [p.read_bytes() for p in sorted(folder.rglob("*.jpg"))[:images]]
    rng = random.Random(0)
    cut = [d[: rng.randint(200, len(d) - 10)] for d in datas]
    flipped = []
    for d in datas:
        b = bytearray(d)
        first = d.find(b"\xff\xda") + 20
        for _ in range(10):
            b[rng.randint(first, len(b) - 3)] = rng.randint(0, 255)
        flipped.append(bytes(b))
    print(
        f"{'check':10} {'ms/image':>9} {'whole ok':>9} {'cut caught':>11} {'10 bytes caught':>16}"
    )
    for mode in ("structure", "decode"):
        loader = _Loader(None, None, 95, mode)
        start = time.perf_counter()
        whole = sum(isinstance(loader.convert(d), bytes) for d in datas)
        ms = (time.perf_counter() - start) / len(datas) * 1e3
        caught_cut = sum(isinstance(loader.convert(d), str) for d in cut)
        caught_flip = sum(isinstance(loader.convert(d), str) for d in flipped)
        n = len(datas)
        print(f"{mode:10} {ms:9.3f} {whole:5}/{n} {caught_cut:7}/{n} {caught_flip:12}/{n}")


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
                f"{'--resize 64x64' if resize else 'decode check':18} {r + 1:5} {base:8,.0f} "
                f"{rates['threads']:8,.0f} ({rates['threads'] / base:.2f}x) "
                f"{rates['processes']:8,.0f} ({rates['processes'] / base:.2f}x)"
            )
    compare_checks(folder)
    for r in range(args.rounds):
        serial, threaded = time_png(3000)
        print(
            f"{'PNG encode 3,000':18} {r + 1:5} {serial:7.2f}s {threaded:7.2f}s "
            f"({serial / threaded:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
