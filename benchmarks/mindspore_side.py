"""MindSpore's side of the benchmarks, run by MindSpore's interpreter in a subprocess.

Usage (from the repository root, by ``benchmarks/run.py``)::

    /work/msvenv/bin/python -m benchmarks.mindspore_side format images \\
        --scale 0.1 --out-dir bench_out/mindspore [--max-seconds 30] [--json FILE]

It writes the same rows as mrecord's side (``benchmarks.workloads``) with MindSpore's
``FileWriter`` and reads them back with ``MindDataset``; it prints one JSON object on
the last line of stdout (and writes it to ``--json`` when given). Needs only numpy,
Pillow and MindSpore: never mrecord.

Metrics of the ``format`` suite (rows/s; ``mb_per_s`` counts payload bytes):

- ``write``: ``FileWriter.write_raw_data`` with row dicts, chunk by chunk, plus ``commit``,
  then ``fsync`` of the data file and its ``.db`` (time to durable, as mrecord's commit,
  which fsyncs before it publishes); MindSpore's default page size (mrecord's side sets
  1 MiB: each side as its users would run it, recorded in ``extra["settings"]``);
- ``read_seq``: ``MindDataset(shuffle=False)`` tuple iterator, one row at a time;
- ``read_random``: ``MindDataset(shuffle=True)`` (GLOBAL) tuple iterator;
- ``read_batch256``: ``MindDataset(shuffle=True).batch(256)`` (variable shapes through
  ``padded_batch`` to [64, 3], as MindSpore cannot batch them otherwise);
- ``read_4shards``: ``MindDataset(shuffle=True, num_shards=4, shard_id=0)`` iterator.

The ``pipeline`` suite times the issue-4 pipelines (``benchmarks.pipelines``).

Every consumer reads what it gets (:func:`benchmarks.measure.touch`: one byte per 4 KiB
page of each value), as mrecord's side does; reads run ``MRECORD_BENCH_REPEAT`` times
(default 3) and report the median, every run kept.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import workloads as W
from benchmarks.measure import (
    Measurement,
    PeakRss,
    Stopwatch,
    emit,
    files_size,
    fsync_tree,
    guarded,
    measuring,
    median_of,
    read_repeats,
    touch,
)
from benchmarks.pipelines import PIPELINES, mindspore_api

__all__ = ["main", "run_format", "run_pipeline", "write_mindrecord"]


def write_mindrecord(name: str, scale: float, path: Path) -> Measurement:
    """Write workload ``name`` at ``scale`` with MindSpore's FileWriter; time only the writer."""
    FileWriter = importlib.import_module("mindspore.mindrecord").FileWriter

    w = W.get(name)
    m = Measurement("write")
    sw = Stopwatch()
    with PeakRss() as rss:
        with sw:
            writer = FileWriter(str(path), shard_num=1, overwrite=True)
            writer.add_schema(w.schema, name)
        for chunk in w.chunks(scale):
            rows = W.to_rows(chunk)  # row dicts are built outside the timed section
            with sw:
                writer.write_raw_data(rows)
            m.rows += len(rows)
            m.nbytes += W.chunk_nbytes(chunk)
        with sw:
            writer.commit()
            for f in (path, Path(str(path) + ".db")):
                fsync_tree(f)  # to durable, as mrecord's commit is
    m.seconds = sw.seconds
    m.record_memory(rss)
    m.extra["file_bytes"] = files_size([path, Path(str(path) + ".db")])
    m.extra["api"] = "FileWriter.write_raw_data(list of row dicts), then fsync"
    m.extra["settings"] = "MindSpore defaults (its default page size), shard_num=1"
    return m


def _drain(iterator: Any, m: Measurement, max_seconds: float, bytes_per_row: float) -> None:
    """Consume ``iterator`` (rows or batches) until exhausted or ``max_seconds`` elapse."""
    t0 = time.perf_counter()
    for item in iterator:
        touch(item)  # read what was delivered, as a training step would
        first = item[0]
        m.rows += len(first) if m.extra.get("batched") else 1
        if time.perf_counter() - t0 > max_seconds:
            m.extra["stopped_early"] = True
            break
    m.nbytes = int(m.rows * bytes_per_row)


def run_format(name: str, scale: float, out_dir: Path, max_seconds: float) -> list[Measurement]:
    """Write and read back one format workload with MindSpore; every metric of this suite."""
    msds = importlib.import_module("mindspore.dataset")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"ms_{name}.mindrecord"
    results = [write_mindrecord(name, scale, path)]
    bytes_per_row = results[0].nbytes / max(results[0].rows, 1)
    w = W.get(name)
    columns = list(w.schema)
    pad_info = None
    if name == "varshape":
        pad_info = {"points": ([64, 3], 0.0)}

    def dataset(**kwargs: Any) -> Any:
        return msds.MindDataset(str(path), columns_list=columns, **kwargs)

    plans: list[tuple[str, Any, bool]] = [
        ("read_seq", lambda: dataset(shuffle=False), False),
        ("read_random", lambda: dataset(shuffle=True), False),
        (
            "read_batch256",
            lambda: (
                dataset(shuffle=True).padded_batch(256, pad_info=pad_info)
                if pad_info
                else dataset(shuffle=True).batch(256)
            ),
            True,
        ),
        ("read_4shards", lambda: dataset(shuffle=True, num_shards=4, shard_id=0), False),
    ]
    for metric, build, batched in plans:

        def one(metric: str = metric, build: Any = build, batched: bool = batched) -> Measurement:
            m = Measurement(metric)
            m.extra["batched"] = batched
            with measuring(m):  # rows/s include building the pipeline and iterator
                it = build().create_tuple_iterator(num_epochs=1, output_numpy=True)
                _drain(it, m, max_seconds, bytes_per_row)
            return m

        results.append(guarded(metric, functools.partial(median_of, read_repeats(), one)))
    return results


def run_pipeline(name: str, scale: float, out_dir: Path, max_seconds: float) -> list[Measurement]:
    """Write a pipeline workload with MindSpore and time its training pipeline (images/s)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"ms_{name}.mindrecord"
    write = write_mindrecord(name, scale, path)
    bytes_per_row = write.nbytes / max(write.rows, 1)

    def one() -> Measurement:
        m = Measurement("pipeline")
        m.extra.update(batched=True, workers=2, offload=False)
        with measuring(m):
            ds = PIPELINES[name](mindspore_api(), str(path), workers=2)
            it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
            _drain(it, m, max_seconds, bytes_per_row)
        return m

    return [write, guarded("pipeline", functools.partial(median_of, read_repeats(), one))]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=["format", "pipeline"])
    parser.add_argument("workload", choices=sorted(W.WORKLOADS))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out-dir", type=Path, default=Path("bench_out/mindspore"))
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    mindspore = importlib.import_module("mindspore")
    runner = run_format if args.suite == "format" else run_pipeline
    measurements = runner(args.workload, args.scale, args.out_dir, args.max_seconds)
    emit(
        measurements,
        side="mindspore",
        version=str(mindspore.__version__),
        suite=args.suite,
        workload=args.workload,
        scale=args.scale,
        rows=W.get(args.workload).num_rows(args.scale),
        path=args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
