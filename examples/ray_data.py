"""Read and write mrecord datasets with Ray Data (needs pip install 'mrecord[ray]').

Run: python examples/ray_data.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import ray

from mrecord import DatasetReader
from mrecord.ray import read_mrecord, write_mrecord

from write_dataset import SCHEMA, write_dataset


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    first = write_dataset(out / "example.mrecord", rows=400)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # Read tasks are planned from the shards' metadata; columns are pruned in the tasks.
        ds = read_mrecord(str(first), columns=["image", "label"])
        print("ray rows:", ds.count())
        batch = next(iter(ds.iter_batches(batch_size=32, batch_format="numpy")))
        print("numpy batch:", batch["image"].shape, batch["image"].dtype)

        # A transformation on the cluster, written back as one atomically published dataset.
        flipped = ds.map_batches(
            lambda b: {"image": b["image"][:, :, ::-1].copy(), "label": b["label"]},
            batch_format="numpy",
        )
        schema = {"image": SCHEMA["image"], "label": SCHEMA["label"]}
        files = write_mrecord(flipped, out / "flipped.mrecord", shard_num=2, schema=schema)
        with DatasetReader.open(files[0]) as reader:
            labels = np.sort(reader.read_rows(np.arange(reader.num_rows)).columns["label"])
            print("written:", reader.num_rows, "rows in", len(reader.files), "shards;",
                  "label counts", np.bincount(labels).tolist())
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
