"""The demo behind ``make demo``: write a sample dataset, read it back shuffled and sharded.

Run ``python -m mrecord.demo [--rows N] [--out DIR]``. It prints what it did and
how fast, and checks the promise of sharding: the ranks' rows are disjoint and
together cover the dataset.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import mrecord
import mrecord.maintenance.inspect
from mrecord import FileWriter, MindDataset, Shuffle, vision


def _write(path: Path, rows: int, shards: int) -> float:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(rows, 32, 32, 3), dtype=np.uint8)
    start = time.perf_counter()
    with FileWriter(path, shard_num=shards, overwrite=True) as writer:
        writer.add_schema(
            {
                "image": {"type": "uint8", "shape": [32, 32, 3]},
                "label": {"type": "int32"},
                "name": {"type": "string"},
            },
            desc="mrecord demo: random 32x32 RGB images",
        )
        writer.add_index(["label"])
        writer.write_raw_data(
            {
                "image": images,
                "label": (np.arange(rows) % 10).astype(np.int32),
                "name": [f"img_{i:06d}.png" for i in range(rows)],
            }
        )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows to write (default 20000)")
    parser.add_argument("--ranks", type=int, default=4, help="simulated training ranks (default 4)")
    parser.add_argument("--out", type=Path, default=None, help="folder to keep the dataset in")
    args = parser.parse_args(argv)

    folder = args.out or Path(tempfile.mkdtemp(prefix="mrecord-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo.mrecord"
    print(f"mrecord {mrecord.__version__} demo")
    seconds = _write(path, args.rows, shards=4)
    info = mrecord.maintenance.inspect.dataset_info(str(path) + "0")
    print(
        f"wrote {info['rows']:,} rows into {info['shards']} shards ({info['pages']} pages, "
        f"{info['bytes'] / 1e6:.1f} MB) in {seconds:.2f} s = {args.rows / seconds:,.0f} rows/s"
    )

    mrecord.config.set_seed(42)
    seen: list[np.ndarray] = []
    start = time.perf_counter()
    for rank in range(args.ranks):
        ds: mrecord.Dataset = MindDataset(
            str(path) + "0", shuffle=Shuffle.GLOBAL, num_shards=args.ranks, shard_id=rank
        )
        ds = ds.map(vision.Rescale(1 / 255, 0.0), input_columns="image")
        ds = ds.map(vision.HWC2CHW(), input_columns="image").batch(256)
        ids = []
        for batch in ds.create_dict_iterator(num_epochs=1):
            ids.append(batch["label"])  # labels stand in for the training step
        rank_rows = MindDataset(
            str(path) + "0",
            shuffle=True,
            num_shards=args.ranks,
            shard_id=rank,
            columns_list=["name"],
        )
        names = [str(row["name"]) for row in rank_rows.create_dict_iterator(num_epochs=1)]
        seen.append(np.array(names))
        first = ", ".join(names[:3])
        print(f"  rank {rank}: {len(names):,} rows, {len(ids)} batches, first rows {first} ...")
    seconds = time.perf_counter() - start
    everything = np.concatenate(seen)
    unique = len(np.unique(everything))
    print(
        f"read every rank (GLOBAL shuffle, map Rescale + HWC2CHW, batch 256) in {seconds:.2f} s; "
        f"{unique:,} distinct rows of {args.rows:,} "
        f"({'disjoint and covering' if unique == args.rows == len(everything) else 'CHECK FAILED'})"
    )
    report = mrecord.verify_dataset(str(path) + "0")
    print(f"verify: {'OK' if report.ok else 'DAMAGED'} ({report.pages_checked} pages checked)")
    if args.out is None:
        shutil.rmtree(folder)
    return 0 if report.ok and unique == args.rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
