"""Write a sharded mrecord dataset: every kind of field, two write styles, an index.

Run: python examples/write_dataset.py [OUT_DIR]   (default: a temporary folder)

The other examples import :func:`write_dataset` to make their input.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from mrecord import DatasetReader, FileWriter

SCHEMA = {
    "image": {"type": "uint8", "shape": [32, 32, 3]},  # a fixed-shape array
    "label": {"type": "int32"},  # a scalar, indexed in the .db
    "boxes": {"type": "float32", "shape": [-1, 4], "compression": "zstd"},  # variable shape
    "caption": {"type": "string"},
    "jpeg": {"type": "bytes"},  # encoded bytes (any payload)
}


def write_dataset(path: Path, rows: int = 1000, shards: int = 4, seed: int = 0) -> Path:
    """Write ``rows`` rows into ``shards`` files named ``path0``..; return the first shard."""
    rng = np.random.default_rng(seed)
    half = rows // 2
    with FileWriter(path, shard_num=shards, overwrite=True) as writer:
        writer.add_schema(SCHEMA, desc="mrecord example dataset")
        writer.add_index(["label"])
        # Rows as dicts: the simple way.
        writer.write_raw_data(
            [
                {
                    "image": rng.integers(0, 256, (32, 32, 3), dtype=np.uint8),
                    "label": i % 10,
                    "boxes": rng.random((i % 3, 4), dtype=np.float32),
                    "caption": f"sample {i}",
                    "jpeg": bytes(rng.integers(0, 256, 16, dtype=np.uint8)),
                }
                for i in range(half)
            ]
        )
        # A dict of columns: the fast path for large writes (one array per fixed field).
        n = rows - half
        writer.write_raw_data(
            {
                "image": rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                "label": (np.arange(half, rows) % 10).astype(np.int32),
                "boxes": [rng.random((2, 4), dtype=np.float32) for _ in range(n)],
                "caption": [f"sample {i}" for i in range(half, rows)],
                "jpeg": [b"\xff\xd8" + bytes(8) for _ in range(n)],
            }
        )
    # Nothing was visible until the `with` block committed; now every shard and .db is.
    return path.with_name(path.name + "0") if shards > 1 else path


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    first = write_dataset(out / "example.mrecord")
    with DatasetReader.open(first) as reader:
        print(f"wrote {reader.num_rows} rows in {len(reader.files)} shards: {first}")
        print("rows per shard:", reader.file_row_counts)
        row = reader.read_row(7)
        print("row 7:", row["label"], row["caption"], row["image"].shape, row["boxes"].shape)


if __name__ == "__main__":
    main()
