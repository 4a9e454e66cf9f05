"""Reader access contract: ids in any order with repeats, value types, bad ids and columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord.errors import ArgumentError, SchemaError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.writer.file_writer import FileWriter


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Three shards of 10 rows: x = id, s = str(id), b = bytes, v = id repeated id % 3 times."""
    writer = FileWriter(tmp_path / "d", shard_num=3)
    writer.add_schema(
        {
            "x": {"type": "int64"},
            "s": {"type": "string"},
            "b": {"type": "bytes", "compression": "zstd"},
            "v": {"type": "float64", "shape": [-1]},
        }
    )
    writer.set_page_size(1024)
    # One row per call: round robin over the shards.
    for i in range(10):
        row = {"x": i, "s": str(i), "b": bytes([i]) * i, "v": np.full(i % 3, float(i))}
        writer.write_raw_data([row])
    writer.commit()
    return tmp_path / "d0"


def test_ids_any_order_with_repeats(dataset: Path) -> None:
    """read_rows returns rows in the order asked, repeats included."""
    with DatasetReader.open(dataset) as reader:
        x = reader.read_rows(np.arange(10)).columns["x"]
        assert isinstance(x, np.ndarray)
        all_x = x.tolist()
        assert sorted(all_x) == list(range(10))
        ids = [7, 0, 7, 3, 9, 0]
        block = reader.read_rows(ids)
        x = block.columns["x"]
        assert isinstance(x, np.ndarray)
        assert x.tolist() == [all_x[i] for i in ids]
        assert block.row_ids.tolist() == ids
        assert block.columns["s"] == [str(all_x[i]) for i in ids]


def test_value_types(dataset: Path) -> None:
    """Scalars are numpy scalars, bytes are bytes, strings str, variable arrays numpy arrays."""
    with DatasetReader.open(dataset) as reader:
        row = reader.read_row(4)
    x = int(row["x"])
    assert isinstance(row["x"], np.int64)
    assert type(row["s"]) is str and row["s"] == str(x)
    assert type(row["b"]) is bytes and row["b"] == bytes([x]) * x
    assert isinstance(row["v"], np.ndarray) and row["v"].dtype == np.float64
    assert row["v"].tolist() == [float(x)] * (x % 3)


@pytest.mark.parametrize("bad", [-1, 10, 2**40])
def test_out_of_range_ids(dataset: Path, bad: int) -> None:
    """An id outside 0..n-1 raises ArgumentError naming it and the row count."""
    with DatasetReader.open(dataset) as reader:
        with pytest.raises(ArgumentError, match=f"{bad}.*10 rows"):
            reader.read_rows([0, bad])
        with pytest.raises(ArgumentError):
            reader.read_row(bad)


def test_bad_columns(dataset: Path) -> None:
    """Unknown columns are a SchemaError naming them; a repeated column an ArgumentError."""
    with pytest.raises(SchemaError, match="'nope'"):
        DatasetReader.open(dataset, columns=["x", "nope"])
    with DatasetReader.open(dataset) as reader, pytest.raises(ArgumentError):
        reader.read_rows([0], columns=["x", "x"])


def test_open_a_list_of_files_in_the_given_order(dataset: Path) -> None:
    """A list of shard files is read in the order given, without sibling expansion."""
    d = dataset.parent
    with DatasetReader.open([d / "d2", d / "d0"]) as reader:
        assert [p.name for p in reader.files] == ["d2", "d0"]
        assert reader.file_row_counts == [3, 4]
    with pytest.raises(ArgumentError):
        DatasetReader.open([d / "d0", d / "d0"])
