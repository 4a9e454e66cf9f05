"""Read a dataset as rank 1 of 4: shuffled, transformed, batched; and random access by id.

Run: python examples/read_sharded.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from mrecord import DatasetReader, MindDataset, MindPage, Shuffle, config, vision

from write_dataset import write_dataset


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    first = write_dataset(out / "example.mrecord")

    # Every rank computes the same global permutation and takes its own slice of it:
    # the four ranks together see every row exactly once per epoch.
    config.set_seed(1)
    seen = []
    for rank in range(4):
        ds = MindDataset(
            str(first),
            columns_list=["image", "label"],
            shuffle=Shuffle.GLOBAL,
            num_shards=4,
            shard_id=rank,
        )
        ds = ds.map([vision.Rescale(1 / 255, 0), vision.HWC2CHW()], input_columns="image")
        ds = ds.batch(50, drop_remainder=False)
        batches = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
        rows = sum(len(b["label"]) for b in batches)
        print(f"rank {rank}: {len(batches)} batches, {rows} rows, image batch "
              f"{batches[0]['image'].shape} {batches[0]['image'].dtype}")
        seen.append(rows)
    print("rows over all ranks:", sum(seen))

    # Random access: any ids, any order, one vectorized read. Global ids number shard 0's
    # rows first, then shard 1's, ... (each write call is cut into one run per shard).
    with DatasetReader.open(first, columns=["label", "caption"]) as reader:
        block = reader.read_rows(np.array([999, 3, 500]))
        print("read_rows:", block.columns["label"].tolist(), block.columns["caption"])

    # Lookups by the indexed field, through the .db.
    page = MindPage(str(first))
    page.set_category_field("label")
    print("label 7, first 3 rows:", [r["caption"] for r in page.read_at_page_by_name("7", 0, 3)])


if __name__ == "__main__":
    main()
