"""mrecord.ray.write_mrecord on the datasets users build with Ray's own readers.

``ray.data.read_parquet`` is the most common way into a cluster conversion. When Ray fuses
the read with the write, the schema it hands the datasink's ``on_write_start`` is its
*file listing* (``__path``, ``__file_size``, ``__file_chunk_metadata``), not the data's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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
