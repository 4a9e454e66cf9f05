"""mrecord's side of the issue-4 pipeline benchmarks for one workload (cifar or jpeg).

Usage (``benchmarks/run.py`` runs it in a subprocess per workload)::

    python -m benchmarks.bench_pipeline cifar --scale 0.1 [--out-dir bench_out/mrecord]
        [--max-seconds 60] [--json FILE]

Writes the workload with mrecord's columnar ``FileWriter`` path, then iterates the
pipeline of ``benchmarks.pipelines`` (2 workers) once. Metrics, in images/s with the
process tree's peak memory:

- ``write``: the columnar write of the workload;
- ``pipeline``: the pipeline as the issue specifies it (CIFAR with ``offload=True``);
- ``pipeline_no_offload`` (CIFAR only): the same pipeline with ``offload=False``.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import workloads as W
from benchmarks.bench_format import mrecord_version, write_mrecord
from benchmarks.measure import (
    Measurement,
    guarded,
    measuring,
    median_of,
    read_repeats,
    touch,
    workload_main,
)
from benchmarks.pipelines import PIPELINES, mrecord_api

__all__ = ["main", "run_pipeline"]

WORKERS = 2


def _drain(iterator: Any, m: Measurement, max_seconds: float) -> None:
    t0 = time.perf_counter()
    for item in iterator:
        touch(item)  # read what was delivered, as MindSpore's side does
        m.rows += len(item[0])
        if time.perf_counter() - t0 > max_seconds:
            m.extra["stopped_early"] = True
            break


def run_pipeline(name: str, scale: float, out_dir: Path, max_seconds: float) -> list[Measurement]:
    """Write workload ``name`` and time its pipeline, with and without offload (CIFAR)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"mr_{name}.mrecord"
    write = guarded("write", lambda: write_mrecord(name, scale, path, columnar=True))
    write.name = "write"
    results = [write]
    bytes_per_row = write.nbytes / max(write.rows, 1)
    variants: list[tuple[str, bool | None]] = [("pipeline", True if name == "cifar" else None)]
    if name == "cifar":
        variants.append(("pipeline_no_offload", False))
    for metric, offload in variants:

        def one(metric: str = metric, offload: bool | None = offload) -> Measurement:
            m = Measurement(metric)
            m.extra.update(workers=WORKERS, offload=offload)
            with measuring(m):  # includes building the pipeline and its iterator
                ds = PIPELINES[name](mrecord_api(), str(path), workers=WORKERS, offload=offload)
                it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
                _drain(it, m, max_seconds)
            m.nbytes = int(m.rows * bytes_per_row)
            return m

        results.append(guarded(metric, functools.partial(median_of, read_repeats(), one)))
    return results


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    return workload_main(
        argv,
        description=__doc__.splitlines()[0],
        suite="pipeline",
        workloads=W.PIPELINE_WORKLOADS,
        run=run_pipeline,
        rows=lambda name, scale: W.get(name).num_rows(scale),
        version=mrecord_version(),
        max_seconds=60.0,
    )


if __name__ == "__main__":
    sys.exit(main())
