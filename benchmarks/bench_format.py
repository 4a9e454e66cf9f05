"""mrecord's side of the format benchmarks (issues 2 and 3) for one workload.

Usage (``benchmarks/run.py`` runs it in a subprocess per workload)::

    python -m benchmarks.bench_format images --scale 0.1 [--out-dir bench_out/mrecord]
        [--max-seconds 30] [--json FILE]

Metrics (rows/s; ``mb_per_s`` counts payload bytes; ``peak_rss_mb`` is the process tree's
peak resident memory during that step):

- ``write_rows``: ``FileWriter.write_raw_data`` with row dicts, chunk by chunk, + ``commit``;
- ``write_columnar``: the same rows given as a dict of columns per chunk (fast path);
- ``read_seq_reader``: ``DatasetReader.read_rows`` over consecutive ranges of 4,096 ids
  (fewer for big rows: at most 16 MB of payload per call, 160 rows for images);
- ``read_seq``: ``MindDataset(shuffle=False)`` tuple iterator, one row at a time;
- ``read_random_row``: ``DatasetReader.read_row(i)`` for ``i`` in a random permutation;
- ``read_random``: ``MindDataset(shuffle=True)`` (GLOBAL) tuple iterator;
- ``read_random_row_cold`` / ``read_random_cold``: the same two, first forgetting which
  chunks this process has checksummed (``verify="once"`` is once per process, and the
  steps before them have read every chunk): every chunk is checksummed again, as in a
  training job's first epoch;
- ``read_batch256``: ``DatasetReader.read_rows`` of 256 random ids at a time;
- ``read_batch256_iter``: ``MindDataset(shuffle=True).batch(256)`` iterator (varshape:
  ``padded_batch(256, pad_info={"points": ([64, 3], 0)})``, as MindSpore's side; before
  2026-11-28 a ``per_batch_map`` padding, :func:`pad_points`);
- ``read_4shards``: ``MindDataset(shuffle=True, num_shards=4, shard_id=0)`` iterator.

A step that fails (e.g. a layer not written yet) is recorded with its error and the
others still run. Reads stop after ``--max-seconds`` and report the rows done so far.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.measure import (
    Measurement,
    PeakRss,
    Stopwatch,
    files_size,
    guarded,
    measuring,
    median_of,
    read_repeats,
    touch,
    workload_main,
)

__all__ = [
    "PAGE_SIZE",
    "POINTS_PAD_INFO",
    "main",
    "mrecord_version",
    "pad_points",
    "remove_dataset",
    "run_format",
    "write_mrecord",
]

PAGE_SIZE = 1 << 20
"""Page size given to ``FileWriter.set_page_size`` in every benchmark."""

SEQ_CHUNK = 4096
SEQ_CHUNK_BYTES = 16 << 20
BATCH = 256


def _dataset_files(path: Path) -> list[Path]:
    return [path, Path(str(path) + ".db")]


def write_mrecord(name: str, scale: float, path: Path, columnar: bool) -> Measurement:
    """Write workload ``name`` at ``scale`` with mrecord's FileWriter; time only the writer
    (its modules imported first: mrecord's package imports lazily, and a process pays
    that once, as MindSpore's side imports ``mindspore.mindrecord`` before its timing)."""
    import mrecord.storage.index_db
    import mrecord.storage.transaction  # noqa: F401
    from mrecord import FileWriter

    w = W.get(name)
    m = Measurement("write_columnar" if columnar else "write_rows")
    sw = Stopwatch()
    with PeakRss() as rss:
        with sw:
            writer = FileWriter(str(path), shard_num=1, overwrite=True)
            writer.add_schema(w.schema, name)
            writer.set_page_size(PAGE_SIZE)
        for chunk in w.chunks(scale):
            data: Any = chunk if columnar else W.to_rows(chunk)  # built outside the timing
            with sw:
                writer.write_raw_data(data)
            m.rows += len(next(iter(chunk.values())))
            m.nbytes += W.chunk_nbytes(chunk)
        with sw:
            writer.commit()
    m.seconds = sw.seconds
    m.record_memory(rss)
    m.extra["file_bytes"] = files_size(_dataset_files(path))
    m.extra["api"] = "columns dict" if columnar else "list of row dicts"
    m.extra["settings"] = f"page size {PAGE_SIZE >> 20} MiB, shard_num=1, commit fsyncs"
    return m


def _timed_loop(
    m: Measurement, steps: Iterable[int], max_seconds: float, bytes_per_row: float
) -> None:
    """Count rows from ``steps`` (each item: rows done by that step) under a time cap."""
    t0 = time.perf_counter()
    for rows in steps:
        m.rows += rows
        if time.perf_counter() - t0 > max_seconds:
            m.extra["stopped_early"] = True
            break
    m.nbytes = int(m.rows * bytes_per_row)


def _iter_rows(iterator: Iterable[Any], batched: bool) -> Iterator[int]:
    for item in iterator:
        touch(item)  # read what was delivered (a zero-copy view nobody reads costs nothing)
        yield len(item[0]) if batched else 1


def _dataset_reader() -> Any:
    """``mrecord.reader.DatasetReader`` (its defining module if the package does not export it)."""
    import mrecord.reader

    found = getattr(mrecord.reader, "DatasetReader", None)
    if found is None:
        from mrecord.reader.dataset_reader import DatasetReader

        found = DatasetReader
    return found


POINTS_PAD_INFO = {"points": ([64, 3], 0)}
"""``padded_batch``'s padding of the varshape workload: [k, 3] points to [64, 3] with 0."""


def pad_points(points: list[np.ndarray], label: np.ndarray, info: Any) -> tuple[Any, ...]:
    """``per_batch_map`` padding a batch of [k, 3] arrays to [64, 3] with zeros.

    The varshape ``batch(256)`` iterators padded so until 2026-11-28; they now use
    ``padded_batch`` with :data:`POINTS_PAD_INFO`, as MindSpore's side does (the same
    output). Kept for a user's comparison of the two.
    """
    out = np.zeros((len(points), 64, 3), dtype=np.float32)
    for i, p in enumerate(points):
        out[i, : len(p)] = p
    return out, label


def _reader_steps(path: Path, ids: np.ndarray, size: int, per_row: bool) -> Iterator[int]:
    reader = _dataset_reader().open(str(path))
    try:
        if per_row:
            for i in ids.tolist():
                touch(reader.read_row(i))
                yield 1
        else:
            for start in range(0, len(ids), size):
                block = reader.read_rows(ids[start : start + size])
                touch(block.columns)
                yield len(block)
    finally:
        reader.close()


def _cold(steps: Callable[[], Iterator[int]]) -> Iterator[int]:
    """``steps()`` after forgetting every chunk checksum done in this process."""
    try:
        from mrecord.storage.verified import clear_verified
    except ImportError:  # an mrecord whose readers never shared checksums
        pass
    else:
        clear_verified()
    yield from steps()


def remove_dataset(path: Path) -> None:
    """Delete a written dataset: the data file, its ``.db`` and any sidecar ``NAME.*`` file."""
    for f in path.parent.glob(path.name + "*"):
        if f.is_file():
            f.unlink()


def run_format(name: str, scale: float, out_dir: Path, max_seconds: float) -> list[Measurement]:
    """Every metric of the format suite for workload ``name`` (see the module docstring)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_path = out_dir / f"mr_{name}_rows.mrecord"
    path = out_dir / f"mr_{name}.mrecord"
    write_rows = guarded("write_rows", lambda: write_mrecord(name, scale, rows_path, False))
    write_cols = guarded("write_columnar", lambda: write_mrecord(name, scale, path, True))
    results = [write_rows, write_cols]
    if "error" in write_cols.extra:
        path = rows_path  # read what the row-dict writer produced
    else:
        remove_dataset(rows_path)  # same rows twice: keep one copy on disk
    n = W.get(name).num_rows(scale)
    bytes_per_row = sum(W.chunk_nbytes(c) for c in W.get(name).chunks(scale)) / n
    perm = np.random.default_rng([W.SEED, 99]).permutation(n).astype(np.int64)
    seq = np.arange(n, dtype=np.int64)
    seq_chunk = int(max(1, min(SEQ_CHUNK, SEQ_CHUNK_BYTES // max(bytes_per_row, 1))))

    def mind_dataset(**kwargs: Any) -> Any:
        import mrecord

        return mrecord.MindDataset(str(path), **kwargs)

    def iterate(build: Callable[[], Any], batched: bool) -> Iterator[int]:
        it = build().create_tuple_iterator(num_epochs=1, output_numpy=True)
        return _iter_rows(it, batched)

    def batched_dataset() -> Any:
        ds = mind_dataset(shuffle=True)
        if name == "varshape":
            return ds.padded_batch(BATCH, pad_info=POINTS_PAD_INFO)
        return ds.batch(BATCH)

    plans: list[tuple[str, Callable[[], Iterator[int]]]] = [
        ("read_seq_reader", lambda: _reader_steps(path, seq, seq_chunk, False)),
        ("read_seq", lambda: iterate(lambda: mind_dataset(shuffle=False), False)),
        ("read_random_row", lambda: _reader_steps(path, perm, 1, True)),
        ("read_random", lambda: iterate(lambda: mind_dataset(shuffle=True), False)),
        ("read_random_row_cold", lambda: _cold(lambda: _reader_steps(path, perm, 1, True))),
        (
            "read_random_cold",
            lambda: _cold(lambda: iterate(lambda: mind_dataset(shuffle=True), False)),
        ),
        ("read_batch256", lambda: _reader_steps(path, perm, BATCH, False)),
        (
            "read_batch256_iter",
            lambda: iterate(batched_dataset, True),
        ),
        (
            "read_4shards",
            lambda: iterate(lambda: mind_dataset(shuffle=True, num_shards=4, shard_id=0), False),
        ),
    ]
    for metric, steps in plans:

        def one(metric: str = metric, steps: Callable[[], Iterator[int]] = steps) -> Measurement:
            m = Measurement(metric)
            with measuring(m):
                _timed_loop(m, steps(), max_seconds, bytes_per_row)
            return m

        results.append(guarded(metric, functools.partial(median_of, read_repeats(), one)))
    return results


def mrecord_version() -> str:
    """``mrecord.__version__``."""
    import mrecord

    return str(mrecord.__version__)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    return workload_main(
        argv,
        description=__doc__.splitlines()[0],
        suite="format",
        workloads=W.FORMAT_WORKLOADS,
        run=run_format,
        rows=lambda name, scale: W.get(name).num_rows(scale),
        version=mrecord_version(),
        max_seconds=30.0,
    )


if __name__ == "__main__":
    sys.exit(main())
