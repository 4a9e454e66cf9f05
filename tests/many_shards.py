"""A dataset of many small shards, for the tests of what each shard costs a process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mrecord import FileWriter


def write_many_shards(folder: Path, shards: int) -> Path:
    """``shards`` shards of two ``int64`` rows each (``id``) in ``folder``: the dataset's
    base path (its shards are the path with a three-digit number after it)."""
    path = folder / "d.mrecord"
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(2 * shards, dtype=np.int64)})
    return path
