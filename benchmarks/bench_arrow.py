"""Arrow/Parquet interchange speed: Parquet → mrecord, mrecord → Parquet, and pyarrow's own
Parquet rewrite on the same rows as the yardstick.

Usage::

    python -m benchmarks.bench_arrow --rows 200000

Rows: ``label`` int64, ``vec`` float32[16] (a fixed-size list), ``tokens`` list<int32>
(0..15 per row), ``text`` string. Each step runs once; rows/s and the ratio to pyarrow's
``read_table`` + ``write_table`` of the same file are printed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mrecord import Block, DatasetReader
from mrecord.cli.cat import write_arrow
from mrecord.convert import convert_parquet
from mrecord.reader.passes import iter_dataset_blocks


def make_table(rows: int) -> pa.Table:
    """The benchmark rows as an Arrow table."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 16, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tokens = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32))
    )
    return pa.table(
        {
            "label": pa.array(rng.integers(0, 1000, rows)),
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(rows * 16, dtype=np.float32)), 16
            ),
            "tokens": tokens,
            "text": pa.array([f"document number {i}" for i in range(rows)]),
        }
    )


def timed(label: str, rows: int, fn: object) -> float:
    """Run ``fn`` once; print and return its rows/s."""
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    seconds = time.perf_counter() - started
    rate = rows / seconds
    print(f"  {label:<42} {seconds:8.2f} s {rate:>12,.0f} rows/s")
    return rate


def main() -> None:
    """Run every step once and print rows/s and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    rows = args.rows
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        table = make_table(rows)
        pq.write_table(table, out / "in.parquet")
        print(f"{rows:,} rows: label int64, vec float32[16], tokens list<int32>, text string")

        def pyarrow_rewrite() -> None:
            pq.write_table(pq.read_table(out / "in.parquet"), out / "copy.parquet")

        def to_mrecord() -> None:
            convert_parquet(out / "in.parquet", out / "d.mrecord", overwrite=True)

        def to_parquet() -> None:
            target = out / "o.parquet"
            with DatasetReader.open(out / "d.mrecord") as reader, open(target, "wb") as fh:
                fields = list(reader.schema.fields)
                write_arrow(iter_dataset_blocks(reader, 4096), fields, "parquet", fh)

        def from_arrow_only() -> None:
            for batch in table.to_batches(max_chunksize=4096):
                Block.from_arrow(batch)

        base = timed("pyarrow read_table + write_table (yardstick)", rows, pyarrow_rewrite)
        into = timed("mrecord convert parquet (write, fsync, .db)", rows, to_mrecord)
        back = timed("mrecord cat --format parquet", rows, to_parquet)
        conv = timed("Block.from_arrow alone (in memory)", rows, from_arrow_only)
        print(f"ratios to the yardstick: convert {into / base:.2f}, export {back / base:.2f}, "
              f"from_arrow {conv / base:.2f}")


if __name__ == "__main__":
    main()
