"""Benchmark remote reads: a cold epoch (download into the cache), a warm one, and range reads.

Run: ``python -m benchmarks.bench_remote [--rows 20000] [--value-bytes 3072] [--store http|s3]``.

A dataset of ``--rows`` rows (``--value-bytes`` random bytes and an int label, 4 shards)
is served by a local HTTP server (``harness.servers.http_server``) or moto's S3
(``--store s3``), on 127.0.0.1. One epoch of ``MindDataset(..., shuffle=GLOBAL)`` is
timed (the median of ``--repeats``; each repeat with an empty cache):

1. ``local``: the files on disk (the baseline);
2. ``cold``: an empty cache: open (download, verify every checksum) plus the epoch;
3. ``warm``: the same cache, a new open (one HEAD and one trailer read per file) plus the epoch;
4. ``range``: a cache too small for any shard: every chunk by range requests.

``--larger`` measures a dataset larger than the cache instead: ``--larger-rows`` rows of
``--larger-value-bytes`` (default 3,000 x 100 KB "images", 4 shards) on the ``--store``
behind a counting proxy (``harness.servers.counting_proxy``), ``MRECORD_CACHE_BYTES`` a
third of the shards, one ``MindDataset(shuffle=GLOBAL)`` iterated for 3 epochs; it prints
the bytes the store sent at the open and in each epoch (headers included) against
``dataset - cache``, the most an order-aware cache should need per epoch.

With ``--store s3 --mosaic-python PATH`` (an interpreter with ``mosaicml-streaming``),
the same rows as Mosaic Streaming MDS shards go to the same moto server, and
``benchmarks/mosaic_side.py`` times its cold and warm epochs (``StreamingDataset``
with a local cache, shuffled, iterated in one process) for comparison.

Loopback hides network latency and bandwidth: ``cold`` and ``range`` here are lower bounds
of what a real store costs; ``warm`` against ``local`` is the number this shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from harness.servers import counting_proxy, http_server, s3_server, upload_folder
from mrecord import FileWriter, MindDataset, Shuffle, config
from mrecord.remote.cache import DEFAULT_CACHE_BYTES

MB = 1 << 20


def write(folder: Path, rows: int, value_bytes: int) -> Path:
    folder.mkdir(parents=True)
    writer = FileWriter(folder / "bench.mrecord", shard_num=4)
    writer.add_schema({"data": {"type": "bytes"}, "label": {"type": "int32"}})
    rng = np.random.default_rng(0)
    for start in range(0, rows, 1000):
        n = min(1000, rows - start)
        writer.write_raw_data(
            [{"data": rng.bytes(value_bytes), "label": i % 10} for i in range(start, start + n)]
        )
    writer.commit()
    return folder / "bench.mrecord0"


def epoch(ds: MindDataset) -> int:
    rows = 0
    for batch in ds.batch(256).create_tuple_iterator(num_epochs=1, output_numpy=True):
        rows += len(batch[1])
    return rows


def timed(run: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    rows = run()
    return time.perf_counter() - start, rows


@contextmanager
def serve(store: str, folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(base URL, storage options) of ``folder`` on a local store."""
    if store == "http":
        with http_server(folder) as server:
            yield server.url, {}
    else:
        with s3_server("bench") as options:
            upload_folder(folder, "s3://bench/d", options)
            yield "s3://bench/d", options


def mosaic_epochs(
    args: argparse.Namespace, root: Path, options: dict[str, Any], rows: int
) -> dict[str, float]:
    """Mosaic Streaming's cold and warm epochs of the same rows on the same S3 server."""
    side = str(Path(__file__).with_name("mosaic_side.py"))
    mds = root / "mds"
    subprocess.run(
        [args.mosaic_python, side, "write", str(mds), str(args.rows), str(args.value_bytes)],
        check=True,
    )
    upload_folder(mds, "s3://bench/mds", options)
    env = {
        **os.environ,
        "S3_ENDPOINT_URL": options["client_kwargs"]["endpoint_url"],
        "AWS_ACCESS_KEY_ID": options["key"],
        "AWS_SECRET_ACCESS_KEY": options["secret"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    out = subprocess.run(
        [args.mosaic_python, side, "epochs", "s3://bench/mds", str(root / "mds-cache")],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["rows"] != rows:
        raise SystemExit(f"mosaic read {got['rows']} rows, expected {rows}")
    return {"mosaic cold": got["cold"], "mosaic warm": got["warm"]}


def larger_than_cache(store: str, rows: int, value_bytes: int, epochs: int = 3) -> dict[str, Any]:
    """Bytes the store sends for the open and each epoch of a GLOBAL shuffle over a dataset
    three times ``MRECORD_CACHE_BYTES`` (counted by a proxy in front of it)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = write(root / "data", rows, value_bytes)
        dataset = sum(p.stat().st_size for p in first.parent.glob("bench.mrecord?"))
        cache = dataset // 3
        os.environ["MRECORD_CACHE_DIR"] = str(root / "cache")
        os.environ["MRECORD_CACHE_BYTES"] = str(cache)
        with serve(store, first.parent) as (base, options):
            endpoint = options["client_kwargs"]["endpoint_url"] if options else base
            with counting_proxy(int(endpoint.rsplit(":", 1)[1])) as proxy:
                through = f"http://127.0.0.1:{proxy.port}"
                if options:
                    client = {**options["client_kwargs"], "endpoint_url": through}
                    options, url = {**options, "client_kwargs": client}, f"{base}/{first.name}"
                else:
                    url = f"{through}/{first.name}"
                start = time.perf_counter()
                ds = MindDataset(url, shuffle=Shuffle.GLOBAL, storage_options=options)
                result: dict[str, Any] = {
                    "store": store,
                    "dataset": dataset,
                    "cache": cache,
                    "open": {"sent": proxy.sent, "seconds": time.perf_counter() - start},
                    "epochs": [],
                }
                it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
                for _ in range(epochs):
                    before, start = proxy.sent, time.perf_counter()
                    got = sum(1 for _ in it)
                    if got != rows:
                        raise SystemExit(f"larger than the cache: read {got} rows, expected {rows}")
                    result["epochs"].append(
                        {"sent": proxy.sent - before, "seconds": time.perf_counter() - start}
                    )
        return result


def print_larger(result: dict[str, Any]) -> None:
    """The table of :func:`larger_than_cache`."""
    dataset, cache = result["dataset"], result["cache"]
    print(
        f"dataset {dataset / MB:.1f} MB in 4 shards on {result['store']}, MRECORD_CACHE_BYTES "
        f"{cache / MB:.1f} MB, dataset - cache {(dataset - cache) / MB:.1f} MB"
    )
    print(f"{'':8} {'MB sent':>9} {'/ dataset':>10} {'/ (dataset - cache)':>20} {'seconds':>8}")
    rows = [("open", result["open"])] + [
        (f"epoch {i}", e) for i, e in enumerate(result["epochs"])
    ]
    for name, r in rows:
        print(
            f"{name:8} {r['sent'] / MB:9.1f} {r['sent'] / dataset:10.2f} "
            f"{r['sent'] / (dataset - cache):20.2f} {r['seconds']:8.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=3072)
    parser.add_argument("--store", choices=["http", "s3"], default="http")
    parser.add_argument("--repeats", type=int, default=3, help="median of this many epochs")
    parser.add_argument("--mosaic-python", default=None, help="compare Mosaic Streaming (s3)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--larger", action="store_true", help="dataset 3x the cache")
    parser.add_argument("--larger-rows", type=int, default=3000)
    parser.add_argument("--larger-value-bytes", type=int, default=100_000)
    args = parser.parse_args(argv)
    config.set_seed(1)
    if args.larger:
        larger = larger_than_cache(args.store, args.larger_rows, args.larger_value_bytes)
        if args.json:
            print(json.dumps(larger, indent=2))
        else:
            print_larger(larger)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = write(root / "data", args.rows, args.value_bytes)
        data_bytes = sum(p.stat().st_size for p in first.parent.iterdir())
        runs: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            seconds, rows = timed(lambda: epoch(MindDataset(str(first), shuffle=Shuffle.GLOBAL)))
            runs.setdefault("local", []).append(seconds)
        with serve(args.store, first.parent) as (base, options):
            url = f"{base}/{first.name}"
            for repeat in range(args.repeats):
                for name, cache_dir, limit in [
                    ("cold", root / f"cache{repeat}", DEFAULT_CACHE_BYTES),
                    ("warm", root / f"cache{repeat}", DEFAULT_CACHE_BYTES),
                    ("range", root / f"tiny{repeat}", 2 * MB),
                ]:
                    os.environ["MRECORD_CACHE_DIR"] = str(cache_dir)
                    os.environ["MRECORD_CACHE_BYTES"] = str(limit)
                    seconds, got = timed(
                        lambda: epoch(
                            MindDataset(url, shuffle=Shuffle.GLOBAL, storage_options=options)
                        )
                    )
                    if got != rows:
                        raise SystemExit(f"{name}: read {got} rows, expected {rows}")
                    runs.setdefault(name, []).append(seconds)
            if args.mosaic_python and args.store == "s3":
                for name, seconds in mosaic_epochs(args, root, options, rows).items():
                    runs[name] = [seconds]
        results = {
            name: {"seconds": statistics.median(times), "rows": rows}
            for name, times in runs.items()
        }
    for r in results.values():
        r["rows_per_s"] = r["rows"] / r["seconds"]
        r["mb_per_s"] = data_bytes / MB / r["seconds"]
    if args.json:
        print(json.dumps({"store": args.store, "bytes": data_bytes, "results": results}, indent=2))
        return
    print(f"{args.rows:,} rows, {data_bytes / MB:.1f} MB in 4 shards, store {args.store}")
    print(f"{'epoch':12} {'seconds':>9} {'rows/s':>10} {'MB/s':>8} {'vs local':>9}")
    for name, r in results.items():
        ratio = results["local"]["seconds"] / r["seconds"]
        print(
            f"{name:12} {r['seconds']:9.2f} {r['rows_per_s']:10,.0f} {r['mb_per_s']:8.1f} "
            f"{ratio:9.2f}"
        )


if __name__ == "__main__":
    main()
