"""mrecord against the strongest random-access peers, on the same rows, one system per process.

Usage (``python -m benchmarks.peers`` runs every system of every workload)::

    python -m benchmarks.bench_peers SYSTEM WORKLOAD [--scale S] [--out-dir DIR]
        [--max-seconds T] [--json FILE]

``SYSTEM``: ``mrecord``, ``lance`` (``pylance``), ``arrayrecord`` (``array-record``),
``hf`` (Hugging Face ``datasets``, Arrow memory-mapped) or ``streaming`` (Mosaic
``mosaicml-streaming``). A peer runs in its own virtual environment (never a dependency
of mrecord); this module needs only numpy and the peer.

Metrics (rows/s):

- ``write``: the rows in chunks, then every output file ``fsync``-ed: time to durable
  (the system's modules are imported before the timing starts: a process pays that once);
- ``read_seq``: a sequential scan, the system's batch API (1,024 rows a call);
- ``read_row``: one row per call, ids in a random order;
- ``read_batch256``: 256 random ids per call (``take`` / ``read(ids)`` / ``ds[ids]``;
  Streaming has no batch call: 256 ``get_item`` calls);
- ``read_epoch``: one shuffled epoch through the system's own shuffling reader
  (mrecord: ``MindDataset(shuffle=True).batch(256)``, varshape padded to [64, 3] in a
  ``per_batch_map`` as in ``bench_format``; Lance: ``take`` of a permutation,
  1,024 ids a call; ArrayRecord: ``read`` of a permutation, 1,024 ids a call; HF:
  ``ds.shuffle(seed).iter(batch_size=256)``; Streaming: ``StreamingDataset(shuffle=True)``).

Every read returns decoded values: numpy arrays (or bytes for blobs) per row or per
column, as each system gives them; ArrayRecord stores opaque records, so its rows are
packed and unpacked here with numpy (a fixed header, then the arrays' bytes).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.measure import Measurement, PeakRss, guarded

__all__ = ["SYSTEMS", "main", "run_system"]

SYSTEMS = ("mrecord", "lance", "arrayrecord", "hf", "streaming")
"""Systems in table order."""

BATCH = 256
SEQ = 1024


def fsync_tree(root: Path) -> int:
    """``fsync`` every file under ``root`` (and ``root`` itself if a file); bytes synced."""
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    total = 0
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        total += p.stat().st_size
    dirs = {p.parent for p in files} | ({root} if root.is_dir() else set())
    for d in dirs:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return total


# --- the systems ------------------------------------------------------------------------------
# Each: write(name, chunks, path) -> None; open(path) -> reader with
# seq(start, stop), row(i), batch(ids), epoch(seed) -> iterator of row counts.


class _Mrecord:
    def write(self, name: str, chunks: list[W.Chunk], path: Path) -> None:
        from mrecord import FileWriter

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

    def seq(self, start: int, stop: int) -> int:
        return len(self.reader.read_rows(np.arange(start, stop)))

    def row(self, i: int) -> Any:
        return self.reader.read_row(i)

    def batch(self, ids: np.ndarray) -> int:
        return len(self.reader.read_rows(ids))

    def epoch(self, seed: int) -> Iterator[int]:
        import mrecord

        mrecord.config.set_seed(seed)
        ds: Any = mrecord.MindDataset(str(self.path), shuffle=True)
        if "points" in ds.get_col_names():  # variable shapes: padded, as bench_format does
            from benchmarks.bench_format import pad_points

            ds = ds.batch(BATCH, per_batch_map=pad_points, input_columns=["points", "label"])
        else:
            ds = ds.batch(BATCH)
        for item in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            yield len(item[0]) if isinstance(item[0], (list, np.ndarray)) else 1


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
    def write(self, name: str, chunks: list[W.Chunk], path: Path) -> None:
        import lance  # type: ignore[import-not-found,import-untyped,unused-ignore]
        import pyarrow as pa

        first = _arrow_table(name, chunks[0])
        batches = (b for c in chunks for b in _arrow_table(name, c).to_batches())
        reader = pa.RecordBatchReader.from_batches(first.schema, batches)
        lance.write_dataset(reader, str(path), mode="overwrite")
        fsync_tree(path)

    def open(self, path: Path) -> None:
        import lance  # type: ignore[import-not-found,import-untyped,unused-ignore]

        self.ds = lance.dataset(str(path))
        self.n = self.ds.count_rows()

    def seq(self, start: int, stop: int) -> int:
        return int(self.ds.take(np.arange(start, stop)).num_rows)

    def row(self, i: int) -> Any:
        return self.ds.take([i]).to_pydict()

    def batch(self, ids: np.ndarray) -> int:
        return int(self.ds.take(ids).num_rows)

    def epoch(self, seed: int) -> Iterator[int]:
        perm = np.random.default_rng(seed).permutation(self.n)
        for s in range(0, self.n, SEQ):
            yield int(self.ds.take(perm[s : s + SEQ]).num_rows)

    def scan(self) -> Iterator[int]:
        for b in self.ds.to_batches(batch_size=SEQ):
            yield b.num_rows


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
    def write(self, name: str, chunks: list[W.Chunk], path: Path) -> None:
        from array_record.python.array_record_module import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
            ArrayRecordWriter,
        )

        pack, _ = _record_codec(name)
        writer = ArrayRecordWriter(str(path), "group_size:1")
        for chunk in chunks:
            for i in range(len(next(iter(chunk.values())))):
                writer.write(pack(chunk, i))
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

    def _decode(self, recs: list[bytes]) -> int:
        for rec in recs:
            self.unpack(rec)
        return len(recs)

    def seq(self, start: int, stop: int) -> int:
        return self._decode(self.reader.read(list(range(start, stop))))

    def row(self, i: int) -> Any:
        return self.unpack(self.reader.read([i])[0])

    def batch(self, ids: np.ndarray) -> int:
        return self._decode(self.reader.read(ids.tolist()))

    def epoch(self, seed: int) -> Iterator[int]:
        perm = np.random.default_rng(seed).permutation(self.n)
        for s in range(0, self.n, SEQ):
            yield self.batch(perm[s : s + SEQ])


class _HF:
    def write(self, name: str, chunks: list[W.Chunk], path: Path) -> None:
        import datasets

        tables = [_arrow_table(name, c) for c in chunks]
        import pyarrow as pa

        ds = datasets.Dataset(pa.concat_tables(tables))
        ds.save_to_disk(str(path))
        fsync_tree(path)

    def open(self, path: Path) -> None:
        import datasets

        datasets.disable_progress_bars()
        self.ds = datasets.load_from_disk(str(path)).with_format("numpy")
        self.n = len(self.ds)

    def seq(self, start: int, stop: int) -> int:
        return len(next(iter(self.ds[start:stop].values())))

    def row(self, i: int) -> Any:
        return self.ds[i]

    def batch(self, ids: np.ndarray) -> int:
        return len(next(iter(self.ds[ids].values())))

    def epoch(self, seed: int) -> Iterator[int]:
        for b in self.ds.shuffle(seed=seed).iter(batch_size=BATCH):
            yield len(next(iter(b.values())))


class _Streaming:
    def write(self, name: str, chunks: list[W.Chunk], path: Path) -> None:
        from streaming import MDSWriter  # type: ignore[import-not-found,import-untyped,unused-ignore]

        spec = W.get(name).schema
        columns = {}
        for field, f in spec.items():
            if f["type"] == "bytes":
                columns[field] = "bytes"
            elif "shape" in f:
                columns[field] = "ndarray"
            else:
                columns[field] = "int"
        shutil.rmtree(path, ignore_errors=True)
        with MDSWriter(out=str(path), columns=columns, size_limit=1 << 27) as out:
            for chunk in chunks:
                for i in range(len(next(iter(chunk.values())))):
                    row = {}
                    for field, kind in columns.items():
                        v = chunk[field][i]
                        row[field] = int(v) if kind == "int" else (
                            bytes(v) if kind == "bytes" else np.asarray(v)
                        )
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

    def seq(self, start: int, stop: int) -> int:
        for i in range(start, stop):
            self.ds.get_item(i)
        return stop - start

    def row(self, i: int) -> Any:
        return self.ds.get_item(i)

    def batch(self, ids: np.ndarray) -> int:
        for i in ids.tolist():
            self.ds.get_item(i)
        return len(ids)

    def epoch(self, seed: int) -> Iterator[int]:
        from streaming import StreamingDataset  # type: ignore[import-not-found,import-untyped,unused-ignore]

        ds = StreamingDataset(local=str(self.path), shuffle=True, shuffle_seed=seed,
                              batch_size=BATCH)
        for _ in ds:
            yield 1


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
    "mrecord": ("mrecord",),
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

    def write() -> Measurement:
        m = Measurement("write")
        for module in _WRITE_IMPORTS[system]:  # a process's one-time cost, not the write's
            importlib.import_module(module)
        with PeakRss() as rss:
            t0 = time.perf_counter()
            impl.write(name, chunks, path)
            m.seconds = time.perf_counter() - t0
        m.record_memory(rss)
        m.rows, m.nbytes = n, int(n * bytes_per_row)
        return m

    results = [guarded("write", write)]
    if "error" in results[0].extra:
        return results
    impl.open(path)
    perm = np.random.default_rng([W.SEED, 99]).permutation(n).astype(np.int64)

    def seq_steps() -> Iterator[int]:
        if hasattr(impl, "scan"):
            yield from impl.scan()
            return
        for s in range(0, n, SEQ):
            yield impl.seq(s, min(n, s + SEQ))

    def row_steps() -> Iterator[int]:
        for i in perm.tolist():
            impl.row(i)
            yield 1

    def batch_steps() -> Iterator[int]:
        for s in range(0, n, BATCH):
            yield impl.batch(perm[s : s + BATCH])

    plans: list[tuple[str, Callable[[], Iterator[int]]]] = [
        ("read_seq", seq_steps),
        ("read_row", row_steps),
        ("read_batch256", batch_steps),
        ("read_epoch", lambda: impl.epoch(7)),
    ]
    for metric, steps in plans:

        def one(metric: str = metric, steps: Callable[[], Iterator[int]] = steps) -> Measurement:
            m = Measurement(metric)
            _loop(m, steps(), max_seconds)
            m.nbytes = int(m.rows * bytes_per_row)
            return m

        results.append(guarded(metric, one))
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
