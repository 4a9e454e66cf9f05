"""mrecord against the strongest random-access peers, on the same rows, one system per process.

Usage (``python -m benchmarks.peers`` runs every system of every workload)::

    python -m benchmarks.bench_peers SYSTEM WORKLOAD [--scale S] [--out-dir DIR]
        [--max-seconds T] [--json FILE]

``SYSTEM``: ``mrecord``, ``lance`` (``pylance``), ``arrayrecord`` (``array-record``),
``hf`` (Hugging Face ``datasets``, Arrow memory-mapped) or ``streaming`` (Mosaic
``mosaicml-streaming``). A peer runs in its own virtual environment (never a dependency
of mrecord); this module needs only numpy and the peer.

Metrics (rows/s):

- ``write``: the rows in chunks, then every output file ``fsync``-ed: time to durable.
  Each system gets its input in its own native form, built before the timing
  (``prepare``: mrecord and Lance columns / Arrow batches, ArrayRecord packed records,
  Streaming row dicts, HF an Arrow table), and its modules are imported before the timing
  (a process pays that once), so the time is the system's write, not the harness's
  conversion or the imports;
- ``read_seq``: a sequential scan, the system's batch API (1,024 rows a call; mrecord
  reads a variable-shape column with ``read_ragged``, one buffer and offsets, as Lance
  and HF hand out a ragged column, since 2026-11-28; one array a value before);
- ``read_row``: one row per call, ids in a random order;
- ``read_batch256``: 256 random ids per call (``take`` / ``read(ids)`` / ``ds[ids]``,
  mrecord's ``read_rows`` with ``read_ragged`` as above;
  Streaming has no batch call: 256 ``get_item`` calls);
- ``read_epoch``: one shuffled epoch through the system's own shuffling reader
  (mrecord: ``MindDataset(shuffle=True).batch(256)``, varshape ``padded_batch`` to
  [64, 3] as in ``bench_format`` (a ``per_batch_map`` before 2026-11-28); Lance:
  ``take`` of a permutation, 1,024 ids a call; ArrayRecord: ``read`` of a permutation,
  1,024 ids a call; HF: ``ds.shuffle(seed).iter(batch_size=256)``; Streaming:
  ``StreamingDataset(shuffle=True)``).

Every read returns decoded values: numpy arrays (or bytes for blobs) per row or per
column, as each system gives them (Lance and HF: Arrow / numpy, never Python objects);
ArrayRecord stores opaque records, so its rows are packed and unpacked here with numpy (a
fixed header, then the arrays' bytes). Every consumer reads what it gets
(:func:`benchmarks.measure.touch`: one byte per 4 KiB page of each value): a zero-copy
view that nobody reads would cost its reader nothing. Streaming's epoch is per sample,
its natural fast path (``StreamingDataset`` yields samples; batching is a DataLoader's
job); the others read batches of 256 (mrecord, HF) or 1,024 ids (Lance, ArrayRecord).
Each read metric is the median of ``MRECORD_BENCH_REPEAT`` runs (default 3), every run's
rate kept in ``extra["runs_rows_per_s"]``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import shutil
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.measure import (
    Measurement,
    PeakRss,
    fsync_tree,
    guarded,
    median_of,
    read_repeats,
    touch,
)

__all__ = ["SYSTEMS", "main", "run_system"]

SYSTEMS = ("mrecord", "lance", "arrayrecord", "hf", "streaming")
"""Systems in table order."""

BATCH = 256
SEQ = 1024


# --- the systems ------------------------------------------------------------------------------
# Each: prepare(name, chunks) -> its native input (untimed); write(prepared, path) -> None;
# open(path) -> reader with seq(start, stop), row(i), batch(ids) -> the values read, and
# epoch(seed) -> iterator of (rows, values) per batch or sample; the harness touches every
# value it gets back.


class _Mrecord:
    def prepare(self, name: str, chunks: list[W.Chunk]) -> Any:
        return name, chunks  # columns dicts: FileWriter's columnar input

    def write(self, prepared: Any, path: Path) -> None:
        from mrecord import FileWriter

        name, chunks = prepared
        w = W.get(name)
        writer = FileWriter(str(path), shard_num=1, overwrite=True)
        writer.add_schema(w.schema, name)
        writer.set_page_size(1 << 20)
        for chunk in chunks:
            writer.write_raw_data(chunk)
        writer.commit()  # fsyncs its files before publishing

    def open(self, path: Path) -> None:
        from mrecord.reader.dataset_reader import DatasetReader

        self.path = path
        self.reader = DatasetReader.open(str(path))
        # Variable-shape columns in one buffer (read_ragged), as Lance and HF hand out a
        # ragged column; the others as read_rows gives them.
        schema = self.reader.schema
        self.ragged = [n for n in self.reader.columns if -1 in (schema[n].shape or ())]
        self.plain = [n for n in self.reader.columns if n not in self.ragged]

    def _rows(self, ids: np.ndarray) -> Any:
        columns: dict[str, Any] = dict(self.reader.read_rows(ids, self.plain).columns)
        for name in self.ragged:
            columns[name] = self.reader.read_ragged(ids, name)
        return columns

    def seq(self, start: int, stop: int) -> Any:
        return self._rows(np.arange(start, stop))

    def row(self, i: int) -> Any:
        return self.reader.read_row(i)

    def batch(self, ids: np.ndarray) -> Any:
        return self._rows(ids)

    def epoch(self, seed: int) -> Iterator[tuple[int, Any]]:
        import mrecord

        mrecord.config.set_seed(seed)
        ds: Any = mrecord.MindDataset(str(self.path), shuffle=True)
        if "points" in ds.get_col_names():  # variable shapes: padded, as bench_format does
            from benchmarks.bench_format import POINTS_PAD_INFO

            ds = ds.padded_batch(BATCH, pad_info=POINTS_PAD_INFO)
        else:
            ds = ds.batch(BATCH)
        for item in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            yield len(item[0]), item


def _arrow_table(name: str, chunk: W.Chunk) -> Any:
    import pyarrow as pa

    cols: dict[str, Any] = {}
    for field, spec in W.get(name).schema.items():
        values = chunk[field]
        if spec["type"] == "bytes":
            cols[field] = pa.array(values, type=pa.large_binary())
        elif "shape" in spec and -1 in spec["shape"]:  # variable shape: the raw bytes
            cols[field] = pa.array([np.ascontiguousarray(v).tobytes() for v in values],
                                   type=pa.large_binary())
            cols[field + "_rows"] = pa.array([len(v) for v in values], type=pa.int32())
        elif "shape" in spec:
            flat = np.ascontiguousarray(values).reshape(len(values), -1)
            cols[field] = pa.FixedSizeListArray.from_arrays(
                pa.array(flat.reshape(-1)), flat.shape[1]
            )
        else:
            cols[field] = pa.array(np.asarray(values))
    return pa.table(cols)


class _Lance:
    def prepare(self, name: str, chunks: list[W.Chunk]) -> Any:
        return [_arrow_table(name, c) for c in chunks]

    def write(self, prepared: Any, path: Path) -> None:
        import lance  # type: ignore[import-not-found,import-untyped,unused-ignore]
        import pyarrow as pa

        batches = (b for t in prepared for b in t.to_batches())
        reader = pa.RecordBatchReader.from_batches(prepared[0].schema, batches)
        lance.write_dataset(reader, str(path), mode="overwrite")
        fsync_tree(path)

    def open(self, path: Path) -> None:
        import lance  # type: ignore[import-not-found,import-untyped,unused-ignore]

        self.ds = lance.dataset(str(path))
        self.n = self.ds.count_rows()

    def seq(self, start: int, stop: int) -> Any:
        return self.ds.take(np.arange(start, stop))

    def row(self, i: int) -> Any:
        return self.ds.take([i])  # an Arrow table, as its other reads (no to_pydict)

    def batch(self, ids: np.ndarray) -> Any:
        return self.ds.take(ids)

    def epoch(self, seed: int) -> Iterator[tuple[int, Any]]:
        perm = np.random.default_rng(seed).permutation(self.n)
        for s in range(0, self.n, SEQ):
            table = self.ds.take(perm[s : s + SEQ])
            yield table.num_rows, table

    def scan(self) -> Iterator[tuple[int, Any]]:
        for batch in self.ds.to_batches(batch_size=SEQ):
            yield batch.num_rows, batch


def _record_codec(name: str) -> tuple[Callable[[W.Chunk, int], bytes], Callable[[bytes], Any]]:
    """(pack row i of a chunk, unpack one record) for ArrayRecord's opaque records."""
    if name == "tabular":
        dtype = np.dtype([("id", "<i8"), ("label", "<i4"), ("vector", "<f4", (16,))])

        def pack(c: W.Chunk, i: int) -> bytes:
            return struct.pack("<qi", int(c["id"][i]), int(c["label"][i])) + np.asarray(
                c["vector"][i], "<f4"
            ).tobytes()

        return pack, lambda rec: np.frombuffer(rec, dtype=dtype)[0]
    if name == "images":
        return (
            lambda c, i: struct.pack("<i", int(c["label"][i])) + bytes(c["data"][i]),
            lambda rec: (struct.unpack_from("<i", rec)[0], rec[4:]),
        )
    if name == "varshape":
        return (
            lambda c, i: struct.pack("<i", int(c["label"][i]))
            + np.ascontiguousarray(c["points"][i], "<f4").tobytes(),
            lambda rec: (
                struct.unpack_from("<i", rec)[0],
                np.frombuffer(rec, "<f4", offset=4).reshape(-1, 3),
            ),
        )
    raise ValueError(f"no ArrayRecord codec for workload {name!r}")


class _ArrayRecord:
    def prepare(self, name: str, chunks: list[W.Chunk]) -> Any:
        pack, _ = _record_codec(name)  # its records are opaque bytes: packed untimed
        return [pack(c, i) for c in chunks for i in range(len(next(iter(c.values()))))]

    def write(self, prepared: Any, path: Path) -> None:
        from array_record.python.array_record_module import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
            ArrayRecordWriter,
        )

        writer = ArrayRecordWriter(str(path), "group_size:1")
        for record in prepared:
            writer.write(record)
        writer.close()
        fsync_tree(path)

    def open(self, path: Path) -> None:
        from array_record.python.array_record_module import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
            ArrayRecordReader,
        )

        name = path.name.split(".")[0].split("_", 1)[1]
        self.unpack = _record_codec(name)[1]
        self.reader = ArrayRecordReader(str(path), "readahead_buffer_size:0")
        self.n = self.reader.num_records()

    def _decode(self, recs: list[bytes]) -> list[Any]:
        return [self.unpack(rec) for rec in recs]

    def seq(self, start: int, stop: int) -> Any:
        return self._decode(self.reader.read(list(range(start, stop))))

    def row(self, i: int) -> Any:
        return self.unpack(self.reader.read([i])[0])

    def batch(self, ids: np.ndarray) -> Any:
        return self._decode(self.reader.read(ids.tolist()))

    def epoch(self, seed: int) -> Iterator[tuple[int, Any]]:
        perm = np.random.default_rng(seed).permutation(self.n)
        for s in range(0, self.n, SEQ):
            ids = perm[s : s + SEQ]
            yield len(ids), self.batch(ids)


class _HF:
    def prepare(self, name: str, chunks: list[W.Chunk]) -> Any:
        import pyarrow as pa

        return pa.concat_tables([_arrow_table(name, c) for c in chunks])

    def write(self, prepared: Any, path: Path) -> None:
        import datasets

        ds = datasets.Dataset(prepared)
        ds.save_to_disk(str(path))
        fsync_tree(path)

    def open(self, path: Path) -> None:
        import datasets

        datasets.disable_progress_bars()
        self.ds = datasets.load_from_disk(str(path)).with_format("numpy")
        self.n = len(self.ds)

    def seq(self, start: int, stop: int) -> Any:
        return self.ds[start:stop]

    def row(self, i: int) -> Any:
        return self.ds[i]

    def batch(self, ids: np.ndarray) -> Any:
        return self.ds[ids]

    def epoch(self, seed: int) -> Iterator[tuple[int, Any]]:
        for b in self.ds.shuffle(seed=seed).iter(batch_size=BATCH):
            yield len(next(iter(b.values()))), b


class _Streaming:
    def prepare(self, name: str, chunks: list[W.Chunk]) -> Any:
        spec = W.get(name).schema
        columns = {}
        for field, f in spec.items():
            if f["type"] == "bytes":
                columns[field] = "bytes"
            elif "shape" in f:
                columns[field] = "ndarray"
            else:
                columns[field] = "int"
        rows = []  # MDSWriter takes row dicts of Python values: built untimed
        for chunk in chunks:
            for i in range(len(next(iter(chunk.values())))):
                row = {}
                for field, kind in columns.items():
                    v = chunk[field][i]
                    row[field] = int(v) if kind == "int" else (
                        bytes(v) if kind == "bytes" else np.asarray(v)
                    )
                rows.append(row)
        return columns, rows

    def write(self, prepared: Any, path: Path) -> None:
        from streaming import MDSWriter  # type: ignore[import-not-found,import-untyped,unused-ignore]

        columns, rows = prepared
        shutil.rmtree(path, ignore_errors=True)
        with MDSWriter(out=str(path), columns=columns, size_limit=1 << 27) as out:
            for row in rows:
                out.write(row)
        fsync_tree(path)

    def open(self, path: Path) -> None:
        from streaming import StreamingDataset  # type: ignore[import-not-found,import-untyped,unused-ignore]
        from streaming.base.util import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
            clean_stale_shared_memory,
        )

        clean_stale_shared_memory()
        self.path = path
        self.ds = StreamingDataset(local=str(path), shuffle=False, batch_size=BATCH)
        self.n = len(self.ds)

    def seq(self, start: int, stop: int) -> Any:
        return [self.ds.get_item(i) for i in range(start, stop)]

    def row(self, i: int) -> Any:
        return self.ds.get_item(i)

    def batch(self, ids: np.ndarray) -> Any:
        return [self.ds.get_item(i) for i in ids.tolist()]

    def epoch(self, seed: int) -> Iterator[tuple[int, Any]]:
        from streaming import StreamingDataset  # type: ignore[import-not-found,import-untyped,unused-ignore]

        ds = StreamingDataset(local=str(self.path), shuffle=True, shuffle_seed=seed,
                              batch_size=BATCH)
        for sample in ds:  # one sample at a time: its natural fast path
            yield 1, sample


_IMPL: dict[str, Callable[[], Any]] = {
    "mrecord": _Mrecord, "lance": _Lance, "arrayrecord": _ArrayRecord, "hf": _HF,
    "streaming": _Streaming,
}
_SUFFIX = {"mrecord": ".mrecord", "lance": ".lance", "arrayrecord": ".array_record",
           "hf": ".hf", "streaming": ".mds"}


def _loop(m: Measurement, steps: Iterator[int], max_seconds: float) -> None:
    with PeakRss() as rss:
        t0 = time.perf_counter()
        for rows in steps:
            m.rows += rows
            if time.perf_counter() - t0 > max_seconds:
                m.extra["stopped_early"] = True
                break
        m.seconds = time.perf_counter() - t0
    m.record_memory(rss)


_WRITE_IMPORTS = {
    # mrecord's package imports lazily: the writer's modules load on its first use (~100
    # ms of a 100K-row tabular write's 150, measured), so name them
    "mrecord": (
        "mrecord",
        "mrecord.writer.file_writer",
        "mrecord.storage.transaction",
        "mrecord.storage.index_db",
    ),
    "lance": ("lance", "pyarrow"),
    "arrayrecord": ("array_record.python.array_record_module",),
    "hf": ("datasets", "pyarrow"),
    "streaming": ("streaming",),
}
"""Modules each system's ``write`` imports, imported before its timing starts."""


def run_system(
    system: str, name: str, scale: float, out_dir: Path, max_seconds: float
) -> list[Measurement]:
    """Every metric of ``system`` on workload ``name`` (see the module docstring)."""
    impl = _IMPL[system]()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{system}_{name}{_SUFFIX[system]}"
    n = W.get(name).num_rows(scale)
    chunks = list(W.get(name).chunks(scale))  # generated outside the timing
    bytes_per_row = sum(W.chunk_nbytes(c) for c in chunks) / n
    # The system's native input, built outside the timing (a list: released after write).
    prepared = [impl.prepare(name, chunks)]

    def write() -> Measurement:
        m = Measurement("write")
        for module in _WRITE_IMPORTS[system]:  # a process's one-time cost, not the write's
            importlib.import_module(module)
        with PeakRss() as rss:
            t0 = time.perf_counter()
            impl.write(prepared[0], path)
            m.seconds = time.perf_counter() - t0
        m.record_memory(rss)
        m.rows, m.nbytes = n, int(n * bytes_per_row)
        return m

    results = [guarded("write", write)]
    prepared.clear()
    if "error" in results[0].extra:
        return results
    impl.open(path)
    perm = np.random.default_rng([W.SEED, 99]).permutation(n).astype(np.int64)

    # Every step reads what it got (touch) and yields the rows it read.
    def seq_steps() -> Iterator[int]:
        if hasattr(impl, "scan"):
            for rows, values in impl.scan():
                touch(values)
                yield rows
            return
        for s in range(0, n, SEQ):
            stop = min(n, s + SEQ)
            touch(impl.seq(s, stop))
            yield stop - s

    def row_steps() -> Iterator[int]:
        for i in perm.tolist():
            touch(impl.row(i))
            yield 1

    def batch_steps() -> Iterator[int]:
        for s in range(0, n, BATCH):
            ids = perm[s : s + BATCH]
            touch(impl.batch(ids))
            yield len(ids)

    def epoch_steps() -> Iterator[int]:
        for rows, values in impl.epoch(7):
            touch(values)
            yield rows

    plans: list[tuple[str, Callable[[], Iterator[int]]]] = [
        ("read_seq", seq_steps),
        ("read_row", row_steps),
        ("read_batch256", batch_steps),
        ("read_epoch", epoch_steps),
    ]
    for metric, steps in plans:

        def one(metric: str = metric, steps: Callable[[], Iterator[int]] = steps) -> Measurement:
            m = Measurement(metric)
            _loop(m, steps(), max_seconds)
            m.nbytes = int(m.rows * bytes_per_row)
            return m

        results.append(guarded(metric, functools.partial(median_of, read_repeats(), one)))
    return results


def _version(system: str) -> str:
    module = {"mrecord": "mrecord", "lance": "lance", "arrayrecord": "array_record",
              "hf": "datasets", "streaming": "streaming"}[system]
    try:
        from importlib.metadata import version

        dist = {"lance": "pylance", "arrayrecord": "array-record", "hf": "datasets",
                "streaming": "mosaicml-streaming", "mrecord": "mrecord"}[system]
        return version(dist)
    except Exception:
        return getattr(__import__(module), "__version__", "?")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("workload", choices=("images", "tabular", "varshape"))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out-dir", type=Path, default=Path("bench_out/peers"))
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run_system(args.system, args.workload, args.scale, args.out_dir, args.max_seconds)
    report = {
        "system": args.system,
        "version": _version(args.system),
        "workload": args.workload,
        "scale": args.scale,
        "rows": W.get(args.workload).num_rows(args.scale),
        "metrics": {m.name: m.to_dict() for m in results},
    }
    for p in args.out_dir.glob(f"{args.system}_{args.workload}*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
