"""mrecord through Ray Data (issue 12), against mrecord alone and Ray's own Parquet I/O.

Run ``python -m benchmarks.bench_ray [--scale S] [--cpus 1,2] [--json PATH]``.

- **read, tabular**: the ``tabular`` workload (int64 id, int32 label, float32[16]) as 4
  shards / 4 Parquet files; rows/s of iterating numpy batches of 4,096 rows through
  ``read_mrecord`` and ``ray.data.read_parquet``, and of ``DatasetReader`` in one process.
- **write, tabular**: the same rows from memory through ``write_mrecord`` (4 tasks into 4
  shards) and ``write_parquet`` (4 files).
- **convert, image folder**: JPEGs in 10 class folders (made by ``bench_convert``'s code) with
  ``mrecord.ray.convert`` against the same Ray tasks writing Parquet, and against the
  single-process ``convert_imagefolder``.

Each Ray figure is measured with a cluster of 1 and of 2 CPUs (``ray.init(num_cpus=k)``),
after one warm-up pass (the files are in the page cache, Ray's workers are started).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.bench_convert import make_folder

OUT = Path("bench_out/ray")
BATCH = 4096
TASKS = 4


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    start = time.perf_counter()
    rows = fn()
    return rows, time.perf_counter() - start


def _tabular(rows: int) -> dict[str, np.ndarray]:
    wl = W.get("tabular")
    chunks = [
        wl.make_chunk(np.random.default_rng([W.SEED, wl.index, c]), a, min(wl.chunk_rows, rows - a))
        for c, a in enumerate(range(0, rows, wl.chunk_rows))
    ]
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def _write_mrecord_alone(columns: dict[str, np.ndarray], path: Path) -> list[Path]:
    from mrecord import FileWriter

    with FileWriter(path, shard_num=TASKS, overwrite=True) as writer:
        writer.add_schema(W.get("tabular").schema)
        writer.write_raw_data(columns)
    return writer.files


def _count(ds: Any) -> int:
    rows = 0
    for batch in ds.iter_batches(batch_size=BATCH, batch_format="numpy"):
        rows += len(batch["id"])
    return rows


def _arrow_table(columns: dict[str, np.ndarray]) -> Any:
    import pyarrow as pa
    from ray.data.extensions import ArrowTensorArray

    return pa.table(
        {
            "id": columns["id"],
            "label": columns["label"],
            "vector": ArrowTensorArray.from_numpy(columns["vector"]),
        }
    )


def _record(
    results: list[dict[str, Any]], case: str, cpus: int | None, fn: Callable[[], int]
) -> None:
    """Run ``fn`` once to warm up, then once timed; append the figure."""
    fn()
    rows, seconds = _timed(fn)
    results.append({"case": case, "cpus": cpus, "rows": rows, "s": seconds})


def _tabular_on_cluster(
    results: list[dict[str, Any]], cpus: int, columns: dict[str, np.ndarray], first: Path
) -> None:
    import ray

    from mrecord.ray import read_mrecord, write_mrecord

    rows = len(columns["id"])
    parquet = OUT / "tab_parquet"
    ds_mem = ray.data.from_arrow(_arrow_table(columns)).repartition(TASKS).materialize()

    def parquet_write() -> int:
        shutil.rmtree(parquet, ignore_errors=True)
        ds_mem.write_parquet(str(parquet))
        return rows

    def mrecord_write() -> int:
        write_mrecord(ds_mem, OUT / "tab_ray.mrecord", overwrite=True)
        return rows

    _record(results, "write tabular, Ray write_parquet", cpus, parquet_write)
    _record(results, "write tabular, write_mrecord", cpus, mrecord_write)
    _record(
        results,
        "read tabular, Ray read_parquet",
        cpus,
        lambda: _count(ray.data.read_parquet(str(parquet))),
    )
    _record(results, "read tabular, read_mrecord", cpus, lambda: _count(read_mrecord(first)))


def bench_tabular(rows: int, cpus: list[int]) -> list[dict[str, Any]]:
    """Read and write figures of the tabular workload."""
    import ray

    from mrecord import DatasetReader

    columns = _tabular(rows)
    files = _write_mrecord_alone(columns, OUT / "tab.mrecord")
    results: list[dict[str, Any]] = []

    def alone() -> int:
        n = 0
        with DatasetReader.open(files[0]) as reader:
            for block in reader.iter_blocks(BATCH):
                n += len(block)
        return n

    _record(results, "read tabular, DatasetReader (1 process)", None, alone)
    for k in cpus:
        ray.init(num_cpus=k, include_dashboard=False, log_to_driver=False)
        try:
            _tabular_on_cluster(results, k, columns, files[0])
        finally:
            ray.shutdown()
    return results


def _images_on_cluster(
    results: list[dict[str, Any]], cpus: int, folder: Path, images: int
) -> None:
    import ray

    import mrecord.ray
    from mrecord.convert import ImageFolderSource
    from mrecord.ray.convert import _UnitConverter, _units

    per_task = max(1, images // 10 // 2)  # 2 tasks per class folder

    def to_parquet() -> int:
        source = ImageFolderSource(folder)
        units = _units(source, "imagefolder", per_task)
        classes = list(source.classes)
        target = OUT / "img_parquet"
        shutil.rmtree(target, ignore_errors=True)
        convert = _UnitConverter("imagefolder", str(folder), {}, classes, 4096)
        ds = ray.data.from_items(units, override_num_blocks=len(units))
        ds.map_batches(convert, batch_size=1).write_parquet(str(target))
        return len(source.items)

    def to_mrecord() -> int:
        dst = OUT / "img_ray.mrecord"
        return mrecord.ray.convert(
            "imagefolder", folder, dst, overwrite=True, files_per_task=per_task
        ).rows

    _record(results, "convert images, Ray tasks + write_parquet", cpus, to_parquet)
    _record(results, "convert images, mrecord.ray.convert", cpus, to_mrecord)


def bench_images(images: int, cpus: list[int]) -> list[dict[str, Any]]:
    """Image-folder conversion figures."""
    import ray

    from mrecord.convert import convert_imagefolder

    folder = OUT / f"folder_{images}"  # its own: make_folder keeps what a folder already has
    make_folder(folder, images)
    results: list[dict[str, Any]] = []

    def alone() -> int:
        return convert_imagefolder(folder, OUT / "img.mrecord", overwrite=True).rows

    _record(results, "convert images, convert_imagefolder (1 process)", None, alone)
    for k in cpus:
        ray.init(num_cpus=k, include_dashboard=False, log_to_driver=False)
        try:
            _images_on_cluster(results, k, folder, images)
        finally:
            ray.shutdown()
    return results


def _ratios(results: list[dict[str, Any]]) -> list[str]:
    by = {(r["case"], r.get("cpus")): r["rows"] / r["s"] for r in results}
    lines = []
    pairs = [
        ("read tabular, read_mrecord", "read tabular, Ray read_parquet"),
        ("write tabular, write_mrecord", "write tabular, Ray write_parquet"),
        ("convert images, mrecord.ray.convert", "convert images, Ray tasks + write_parquet"),
    ]
    for cpus in sorted({int(r["cpus"]) for r in results if r["cpus"]}):
        for mine, theirs in pairs:
            if (mine, cpus) in by and (theirs, cpus) in by:
                lines.append(
                    f"{cpus} CPU(s): {mine.split(', ')[0]}: mrecord / Parquet = "
                    f"{by[(mine, cpus)] / by[(theirs, cpus)]:.2f}x"
                )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the table and ratios; optionally save them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workloads")
    parser.add_argument("--cpus", default="1,2", help="Ray cluster sizes, e.g. 1,2")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    cpus = [int(c) for c in args.cpus.split(",") if c]
    OUT.mkdir(parents=True, exist_ok=True)
    results = bench_tabular(max(BATCH, int(400_000 * args.scale)), cpus)
    results += bench_images(max(20, int(5_000 * args.scale)), cpus)
    print(f"{'case':52} {'cpus':>4} {'rows':>9} {'seconds':>8} {'rows/s':>11}")
    for r in results:
        k = "-" if r["cpus"] is None else str(r["cpus"])
        rate = r["rows"] / r["s"]
        print(f"{r['case']:52} {k:>4} {r['rows']:9,} {r['s']:8.2f} {rate:11,.0f}")
    ratios = _ratios(results)
    for line in ratios:
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
