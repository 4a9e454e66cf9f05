"""Conversion throughput (issue 6): CIFAR-10 binary, ImageFolder of JPEGs, MindRecord import.

Run ``python -m benchmarks.bench_convert [--scale S] [--mindspore-python PATH]``.
Sources are synthetic and deterministic (seeded numpy, Pillow for the JPEGs), built in
``bench_out/convert/``. The MindRecord source is written by MindSpore itself, in its own
interpreter, when one is found (see ``benchmarks.run.find_mindspore``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.convert import convert_cifar10, convert_imagefolder, convert_mindrecord

OUT = Path("bench_out/convert")


def make_cifar(root: Path, records_per_file: int) -> int:
    """Five ``data_batch_N.bin`` files of ``records_per_file`` records (1 label + 3072 pixels)."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        path = root / f"data_batch_{i}.bin"
        labels = rng.integers(0, 10, (records_per_file, 1), dtype=np.uint8)
        pixels = rng.integers(0, 256, (records_per_file, 3072), dtype=np.uint8)
        path.write_bytes(np.concatenate([labels, pixels], axis=1).tobytes())
    return 5 * records_per_file


def make_folder(root: Path, images: int) -> int:
    """``images`` JPEGs (64x64, quality 90) in 10 class folders; kept between runs."""
    from PIL import Image

    if root.exists() and sum(1 for _ in root.rglob("*.jpg")) == images:
        return images
    rng = np.random.default_rng(1)
    for i in range(images):
        folder = root / f"class_{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, 3)
        ramp = np.linspace(0, 60, 64, dtype=np.float32)
        pixels = (base + ramp[:, None, None] + ramp[None, :, None]).clip(0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
    return images


MINDSPORE_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from mindspore.mindrecord import FileWriter
    path, rows = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(2)
    w = FileWriter(path, shard_num=1, overwrite=True)
    w.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"},
                  "name": {"type": "string"}, "box": {"type": "float32", "shape": [-1, 4]}})
    batch = []
    for i in range(rows):
        batch.append({"image": rng.bytes(3072), "label": i % 10, "name": f"img_{i}",
                      "box": rng.random((1 + i % 3, 4), dtype=np.float32)})
        if len(batch) == 1000:
            w.write_raw_data(batch); batch = []
    if batch:
        w.write_raw_data(batch)
    w.commit()
    """
)


def main(argv: list[str] | None = None) -> int:
    """Print a table of conversion throughput."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the sources")
    parser.add_argument("--mindspore-python", default=None, help="interpreter with mindspore")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, int, float]] = []

    n = make_cifar(OUT / "cifar", max(1, int(10_000 * args.scale)))
    cases: list[tuple[str, dict[str, Any]]] = [
        ("cifar10 -> 1 shard", {}),
        ("cifar10 -> 4 shards", {"shard_num": 4}),
    ]
    for label, options in cases:
        summary = convert_cifar10(OUT / "cifar", OUT / "cifar.mrecord", overwrite=True, **options)
        results.append((label, summary.rows, summary.seconds))
    assert summary.rows == n

    images = make_folder(OUT / "folder", max(10, int(5_000 * args.scale)))
    summary = convert_imagefolder(OUT / "folder", OUT / "folder.mrecord", overwrite=True)
    results.append((f"imagefolder ({images} JPEGs)", summary.rows, summary.seconds))

    from benchmarks.run import find_mindspore

    python, why = find_mindspore(args.mindspore_python)
    if python is not None:
        rows = max(100, int(50_000 * args.scale))
        source = OUT / "ms.mindrecord"
        start = time.perf_counter()
        subprocess.run([python, "-c", MINDSPORE_WRITER, str(source), str(rows)], check=True)
        written = time.perf_counter() - start
        summary = convert_mindrecord(source, OUT / "imported.mrecord", overwrite=True)
        results.append(
            (f"mindrecord import ({rows} rows by MindSpore)", summary.rows, summary.seconds)
        )
        results.append(("  (MindSpore writing that source)", rows, written))
    else:
        print(f"MindRecord import skipped: {why}")

    print(f"{'conversion':48} {'rows':>8} {'seconds':>8} {'rows/s':>10}")
    for label, count, seconds in results:
        print(f"{label:48} {count:8,} {seconds:8.2f} {count / seconds:10,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
