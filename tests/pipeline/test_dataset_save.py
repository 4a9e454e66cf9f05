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


def test_saving_large_rows_holds_a_bounded_number_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema's first rows and each write are cut by bytes as well as rows: 1,024
    rows of 196 KB images were held twice over (as arrays and as bytes), and the first
    1,024 for the whole save: 4,000 such rows peaked at 842 MB resident."""
    from mrecord import config
    from mrecord.pipeline.ops import save
    from tests.tracing import traced_peak

    monkeypatch.setattr(save, "SCHEMA_BYTES", 8 << 20)
    monkeypatch.setattr(save, "WRITE_BYTES", 4 << 20)
    # the pipeline's own read-ahead (16 blocks within an eighth of the memory budget):
    # with two, it holds four blocks (16 MiB)
    monkeypatch.setattr(config, "get_prefetch_size", lambda: 2)
    row_bytes, count = 64 << 10, 1_600  # 100 MiB in all; 4 MiB blocks of 64 rows

    def images() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(count):
            yield np.full(row_bytes, i % 251, np.uint8), np.array(i, np.int32)

    path = tmp_path / "images.mrecord"
    dataset = GeneratorDataset(images, ["image", "label"], shuffle=False)
    _, peak = traced_peak(lambda: dataset.save(str(path)))
    assert peak < 48 << 20, f"the save held {peak >> 20} MB"
    with DatasetReader.open(path) as reader:
        block = reader.read_rows(np.arange(count, dtype=np.int64))
    for i, (image, label) in enumerate(
        zip(block.columns["image"], block.columns["label"], strict=True)
    ):
        assert (int(label), image) == (i, bytes([i % 251]) * row_bytes)
