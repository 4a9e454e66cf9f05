"""``DatasetReader.read_ragged``: a variable-shape column as one buffer, offsets and
shapes; the same values ``read_rows`` gives, for any ids (repeats, any order, file order
over pages), plain and compressed chunks, several shards; typed errors for a column that
is not variable-shape and ids out of range; a damaged chunk raises, never wrong data."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.errors import (
    ArgumentError,
    ChecksumError,
    RowIndexError,
    SchemaError,
    WrongTypeError,
)
from mrecord.format.ragged_column import RaggedColumn
from mrecord.reader import dataset_reader
from mrecord.reader.dataset_reader import DatasetReader

shapes = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([0, 1, 3, 700])), min_size=1, max_size=60
)


def _write(
    path: Path, values: list[np.ndarray], dtype: str, compression: str | None, shards: int
) -> None:
    field: dict[str, object] = {"type": dtype, "shape": [-1, -1]}
    if compression:
        field["compression"] = compression
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema({"a": field, "i": {"type": "int32"}})
        writer.set_page_size(2048)  # several pages, some rows bigger than a page
        writer.write_raw_data({"a": values, "i": np.arange(len(values), dtype=np.int32)})


@settings(max_examples=40, deadline=None)
@given(
    row_shapes=shapes,
    dtype=st.sampled_from(["float32", "int64", "uint8", "float64"]),
    compression=st.sampled_from([None, "zstd"]),
    shards=st.sampled_from([1, 2]),
    page_rows=st.sampled_from([0, 1 << 30]),
    data=st.data(),
)
def test_read_ragged_gives_the_values_read_rows_gives(
    tmp_path_factory: pytest.TempPathFactory,
    row_shapes: list[tuple[int, int]],
    dtype: str,
    compression: str | None,
    shards: int,
    page_rows: int,
    data: st.DataObject,
) -> None:
    """``page_rows`` 0 cuts every read page by page, a huge one joins read_rows' arrays
    (a real reader picks by the rows it takes of each page)."""
    path = tmp_path_factory.mktemp("ragged") / "ds"
    rng = np.random.default_rng(len(row_shapes))
    values = [(rng.random(s) * 100).astype(dtype) for s in row_shapes]
    _write(path, values, dtype, compression, shards)
    n = len(values)
    ids = data.draw(
        st.one_of(
            st.lists(st.integers(0, n - 1), max_size=80),  # any order, repeats
            st.integers(0, n - 1).flatmap(lambda a: st.just(list(range(a, n)))),  # file order
        )
    )
    with (
        mock.patch.object(dataset_reader, "_RAGGED_PAGE_ROWS", page_rows),
        DatasetReader.open(path) as reader,
    ):
        got = reader.read_ragged(ids, "a")
        assert isinstance(got, RaggedColumn) and len(got) == len(ids)
        assert got.values.dtype == np.dtype(dtype) and got.values.ndim == 1
        assert got.offsets[0] == 0 and got.offsets[-1] == got.values.size
        assert not np.shares_memory(got.values, reader.shards[0].file_bytes)
        for k, i in enumerate(ids):
            np.testing.assert_array_equal(got[k], values[i])
            assert got[k].shape == values[i].shape
            assert tuple(got.shapes[k]) == values[i].shape
        for value, i in zip(got.arrays(), ids, strict=True):
            np.testing.assert_array_equal(value, values[i])
        # the buffer is the values one after another, in the read's order
        expected = [values[i].reshape(-1) for i in ids]
        flat = np.concatenate(expected) if expected else np.zeros(0, dtype=dtype)
        np.testing.assert_array_equal(got.values, flat)


def test_read_ragged_names_a_column_that_is_not_variable_shape(tmp_path: Path) -> None:
    _write(tmp_path / "ds", [np.zeros((2, 3), "float32")], "float32", None, 1)
    with DatasetReader.open(tmp_path / "ds") as reader:
        with pytest.raises(ArgumentError, match=r"'i' is not a variable-shape array.*read_rows"):
            reader.read_ragged([0], "i")
        with pytest.raises(SchemaError, match=r"'nope'.* not in the schema"):
            reader.read_ragged([0], "nope")
        with pytest.raises(WrongTypeError, match="one column name"):
            reader.read_ragged([0], ["a"])  # type: ignore[arg-type]
        with pytest.raises(RowIndexError, match="row id 5 is out of range: the dataset has 1 rows"):
            reader.read_ragged([0, 5], "a")


def test_ragged_column_indexing(tmp_path: Path) -> None:
    values = [np.full((k, 2), k, "int64") for k in range(5)]
    _write(tmp_path / "ds", values, "int64", None, 1)
    with DatasetReader.open(tmp_path / "ds") as reader:
        got = reader.read_ragged([4, 0, 2], "a")
    np.testing.assert_array_equal(got[-1], values[2])
    assert got[1].shape == (0, 2)
    assert [v.shape for v in got] == [(4, 2), (0, 2), (2, 2)]
    assert got.nbytes == (4 + 0 + 2) * 2 * 8
    with pytest.raises(RowIndexError, match="value 3 is out of range: the column has 3 values"):
        got[3]
    with pytest.raises(WrongTypeError, match="must be ints"):
        got["x"]  # type: ignore[index]


def test_read_ragged_raises_for_a_damaged_chunk(tmp_path: Path) -> None:
    """A flipped byte inside the values: ChecksumError naming the file, never the values."""
    values = [np.arange(k * 3, dtype="float32").reshape(k, 3) + 0.5 for k in range(1, 40)]
    _write(tmp_path / "ds", values, "float32", None, 1)
    shard = next(p for p in tmp_path.iterdir() if p.name == "ds")
    data = bytearray(shard.read_bytes())
    needle = np.float32(20.5).tobytes()  # inside row 6's values
    at = data.find(needle)
    assert at > 0
    data[at] ^= 0xFF
    shard.write_bytes(bytes(data))
    with DatasetReader.open(tmp_path / "ds") as reader, pytest.raises(ChecksumError, match="ds"):
        reader.read_ragged(list(range(len(values))), "a")
