"""``Dataset.save(file_name, num_files=1, file_type="mindrecord")``: a processed pipeline
materialized as a dataset through the writer and its commit, with MindSpore's arguments,
type conversions and errors (mindspore.dataset.Dataset.save):

- bool, int8, int16, int32, uint8, uint16 scalars → int32; int64, uint32 → int64;
  float16, float32 → float32; float64 → float64; uint64 is refused;
- a uint8 array (any number of dimensions) → bytes; other arrays keep their dtype (cast
  as above) and shape, with ``-1`` for the dimensions that vary between rows;
- strings → string; ``num_files`` in [1, 1000]; ``file_type`` only ``"mindrecord"``;
  an existing file is refused (RuntimeError).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, GeneratorDataset, MindDataset, NumpySlicesDataset
from mrecord.pipeline.dataset import Dataset


def rows() -> Iterator[tuple[np.ndarray, ...]]:
    for i in range(10):
        yield (
            np.array(i, np.int64),
            np.array(f"name-{i}"),
            np.full((2, 3), i, np.uint8),  # an image: stored as bytes, as MindSpore does
            np.full((i % 3 + 1, 2), i / 2, np.float16),  # varying first dimension
            np.array(i % 2 == 0),
            np.array(i, np.uint32),
        )


COLUMNS = ["id", "name", "image", "boxes", "flag", "big"]


def test_save_round_trip_of_a_processed_pipeline(tmp_path: Path) -> None:
    ds: Dataset = GeneratorDataset(rows, COLUMNS, shuffle=False)
    ds = ds.map(lambda x: x * 10, input_columns="id")
    out = tmp_path / "cache.mindrecord"
    ds.save(str(out))
    with DatasetReader.open(out) as reader:
        assert reader.num_rows == 10 and len(reader.files) == 1
        schema = reader.schema.to_dict()
    assert schema == {
        "id": {"type": "int64"},
        "name": {"type": "string"},
        "image": {"type": "bytes"},
        "boxes": {"type": "float32", "shape": [-1, 2]},
        "flag": {"type": "int32"},
        "big": {"type": "int64"},
    }
    got = list(MindDataset(str(out), shuffle=False).create_dict_iterator(output_numpy=True))
    assert [int(r["id"]) for r in got] == [10 * i for i in range(10)]
    assert [str(r["name"]) for r in got] == [f"name-{i}" for i in range(10)]
    assert got[3]["image"].tobytes() == np.full((2, 3), 3, np.uint8).tobytes()
    assert got[4]["boxes"].dtype == np.float32 and got[4]["boxes"].shape == (2, 2)
    assert [int(r["flag"]) for r in got] == [1, 0] * 5


def test_save_into_several_files_keeps_every_row(tmp_path: Path) -> None:
    ds = NumpySlicesDataset({"x": np.arange(100, dtype=np.int32)}, shuffle=False)
    ds.save(str(tmp_path / "n.mindrecord"), num_files=4)
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".db"))
    assert [n for n in names if "lock" not in n] == [f"n.mindrecord{i}" for i in range(4)]
    with DatasetReader.open(tmp_path / "n.mindrecord0") as reader:
        x = reader.read_rows(np.arange(100)).columns["x"]
        assert isinstance(x, np.ndarray)
        assert sorted(x.tolist()) == list(range(100))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_files": 0}, ValueError, "num_files"),
        ({"num_files": 1001}, ValueError, "num_files"),
        ({"num_files": "2"}, TypeError, "num_files"),
        ({"file_type": "tfrecord"}, ValueError, "tfrecord"),
        ({"file_name": ""}, ValueError, "file_name"),
        ({"file_name": 3}, TypeError, "file_name"),
    ],
)
def test_save_arguments_as_mindspore(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    ds = NumpySlicesDataset({"x": np.arange(4)}, shuffle=False)
    args: dict[str, Any] = {"file_name": str(tmp_path / "a.mindrecord"), **kwargs}
    with pytest.raises(error, match=match):
        ds.save(**args)
    assert not any(tmp_path.iterdir())


def test_save_refuses_an_existing_dataset_and_uint64(tmp_path: Path) -> None:
    out = str(tmp_path / "a.mindrecord")
    NumpySlicesDataset({"x": np.arange(4)}, shuffle=False).save(out)
    with pytest.raises(RuntimeError, match="exist"):
        NumpySlicesDataset({"x": np.arange(4)}, shuffle=False).save(out)
    with pytest.raises(RuntimeError, match="uint64"):
        NumpySlicesDataset({"u": np.arange(4, dtype=np.uint64)}, shuffle=False).save(
            str(tmp_path / "u.mindrecord")
        )
    assert not list(tmp_path.glob("u.mindrecord*"))
