"""mrecord.ray.write_mrecord on the datasets users build with Ray's own readers.

``ray.data.read_parquet`` is the most common way into a cluster conversion. When Ray fuses
the read with the write, the schema it hands the datasink's ``on_write_start`` is its
*file listing* (``__path``, ``__file_size``, ``__file_chunk_metadata``), not the data's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from mrecord import DatasetReader
from mrecord.ray import write_mrecord

pytestmark = pytest.mark.usefixtures("ray_cluster")


def parquet_folder(directory: Path, files: int = 3, rows: int = 10) -> Path:
    directory.mkdir()
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "name": [f"row-{i}" for i in ids],
                "score": pa.array([i / 4 for i in ids], pa.float32()),
            }
        )
        pq.write_table(table, directory / f"part-{f}.parquet")
    return directory


def _same(ds: ray.data.Dataset) -> ray.data.Dataset:
    return ds


def _selected(ds: ray.data.Dataset) -> ray.data.Dataset:
    return ds.select_columns(["id", "name"])


def _mapped(ds: ray.data.Dataset) -> ray.data.Dataset:
    return ds.map_batches(lambda batch: batch, batch_format="pyarrow")


@pytest.mark.parametrize(
    ("step", "columns"),
    [
        (_same, ["id", "name", "score"]),
        (_selected, ["id", "name"]),
        (_mapped, ["id", "name", "score"]),
    ],
    ids=["read_parquet", "select_columns", "map_batches"],
)
def test_write_mrecord_from_read_parquet(
    tmp_path: Path,
    step: Callable[[ray.data.Dataset], ray.data.Dataset],
    columns: list[str],
) -> None:
    src = parquet_folder(tmp_path / "parquet")
    ds = step(ray.data.read_parquet(str(src)))
    files = write_mrecord(ds, tmp_path / "out.mrecord")
    with DatasetReader.open(files[0]) as reader:
        assert reader.column_names == columns
        rows: list[dict[str, Any]] = sorted(reader.iter_rows(), key=lambda r: int(r["id"]))
    assert [int(r["id"]) for r in rows] == list(range(30))
    assert [r["name"] for r in rows] == [f"row-{i}" for i in range(30)]


def test_small_data_is_one_shard_by_default(tmp_path: Path) -> None:
    ds = ray.data.from_items([{"id": i, "name": f"n{i}"} for i in range(1000)])
    assert ds.num_blocks() > 1  # Ray cut it into many blocks: the old one-per-task count
    files = write_mrecord(ds, tmp_path / "small.mrecord")
    assert [f.name for f in files] == ["small.mrecord"]
    assert sorted(p.name for p in tmp_path.glob("small.mrecord*.db")) == ["small.mrecord.db"]
    with DatasetReader.open(files[0]) as reader:
        assert reader.num_rows == 1000


def test_shard_size_sets_the_count_and_per_task_keeps_one_per_task(tmp_path: Path) -> None:
    blob = b"x" * 1000
    rows = [{"id": i, "blob": blob} for i in range(400)]  # about 400 kB of pages
    ds = ray.data.from_items(rows, override_num_blocks=4)
    sized = write_mrecord(ds, tmp_path / "sized.mrecord", shard_size=100_000)
    assert 3 <= len(sized) <= 6  # about 400 kB / 100 kB (page and metadata overhead aside)
    per_task = write_mrecord(ds, tmp_path / "tasks.mrecord", shard_num="per_task")
    assert len(per_task) == 4
    exact = write_mrecord(ds, tmp_path / "exact.mrecord", shard_num=2)
    assert len(exact) == 2
    for files in (sized, per_task, exact):
        with DatasetReader.open(files[0]) as reader:
            ids = reader.read_rows(np.arange(400)).columns["id"]
            assert isinstance(ids, np.ndarray)
            assert sorted(ids.tolist()) == list(range(400))
