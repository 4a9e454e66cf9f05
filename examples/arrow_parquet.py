"""mrecord ⇄ Parquet, Arrow and Hugging Face datasets (needs pip install 'mrecord[arrow]').

Run: python examples/arrow_parquet.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import mrecord
from mrecord import Block, DatasetReader
from mrecord.convert import convert_parquet


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)

    # A Parquet file as data people already have: a fixed-size list becomes a shaped
    # array, a list a variable-shape array, strings stay strings.
    table = pa.table(
        {
            "label": pa.array(np.arange(100) % 10, pa.int32()),
            "embedding": pa.FixedSizeListArray.from_arrays(
                pa.array(np.random.default_rng(0).random(100 * 8, dtype=np.float32)), 8
            ),
            "tokens": pa.array([list(range(i % 7)) for i in range(100)], pa.list_(pa.int64())),
            "text": [f"document {i}" for i in range(100)],
        }
    )
    pq.write_table(table, out / "docs.parquet")
    summary = convert_parquet(out / "docs.parquet", out / "docs.mrecord", shard_num=2)
    print(f"parquet -> mrecord: {summary.rows} rows in {summary.shards} shards")
    with DatasetReader.open(out / "docs.mrecord0") as reader:
        print("schema:", reader.schema.to_dict())
        block = reader.read_rows(np.arange(3))
        print("embedding batch:", block.columns["embedding"].shape)

        # A block of rows back to Arrow (the same types), e.g. for pandas or DuckDB.
        arrow = block.to_arrow(reader.schema)
        print("to_arrow:", arrow.schema.field("embedding").type)
        assert Block.from_arrow(arrow).columns["text"] == block.columns["text"]

    # Hugging Face: built in memory here (nothing is downloaded), written as mrecord,
    # read back as a datasets.Dataset.
    hf = datasets.Dataset.from_dict(
        {"x": np.arange(12, dtype=np.float32).reshape(6, 2).tolist(), "y": [0, 1, 0, 1, 1, 0]},
        features=datasets.Features(
            {
                "x": datasets.Sequence(datasets.Value("float32"), length=2),
                "y": datasets.ClassLabel(names=["cat", "dog"]),
            }
        ),
    )
    mrecord.from_hf(hf, out / "hf.mrecord")
    back = mrecord.to_hf(out / "hf.mrecord")
    print("from_hf -> to_hf:", back.num_rows, "rows,", back.features)
    print("x as numpy:", back.with_format("numpy")["x"][:2].tolist())


if __name__ == "__main__":
    main()
