"""Fixed-width columns of several items a row read straight from the file's map (the
reader's ``_FixedPlan``): the values as written for any ids, whatever each page's chunk
offset is modulo the value's size (the plan takes rows from one view of the file for
each such residue)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.format.schema import Field
from mrecord.reader.dataset_reader import DatasetReader


def _write(
    path: str, shape: list[int], dtype: str, blob_sizes: list[int], page_size: int
) -> tuple[np.ndarray, list[bytes]]:
    """Rows of a ``dtype`` column of ``shape`` beside a bytes column whose sizes move
    the next chunk's offset by amounts that are no multiple of a value's size."""
    rng = np.random.default_rng(len(blob_sizes))
    n = len(blob_sizes)
    values = (rng.random((n, *shape)) * 1000).astype(dtype)
    blobs = [bytes([k % 251]) * size for k, size in enumerate(blob_sizes)]
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}, "v": {"type": dtype, "shape": shape}})
        writer.set_page_size(page_size)
        writer.write_raw_data({"blob": blobs, "v": values})
    return values, blobs


def _plan_residues(reader: DatasetReader) -> list[int]:
    field = next(f for f in reader.schema.fields if f.name == "v")
    assert isinstance(field, Field)
    plan = reader._fixed_plan(0, field)
    assert plan is not None, "the column should be read from the map, not page by page"
    return list(plan.residues)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.sampled_from([[2], [3], [5], [16], [2, 3], [3, 1, 2]]),
    dtype=st.sampled_from(["float32", "int64", "uint8", "int16", "float64"]),
    blob_sizes=st.lists(st.integers(0, 97), min_size=1, max_size=300),
    page_size=st.sampled_from([1024, 4096]),
    data=st.data(),
)
def test_random_reads_give_the_values_written(
    tmp_path_factory: pytest.TempPathFactory,
    shape: list[int],
    dtype: str,
    blob_sizes: list[int],
    page_size: int,
    data: st.DataObject,
) -> None:
    """Any ids (repeats, any order, empty) of every page, the values as written."""
    path = str(tmp_path_factory.mktemp("fixed") / "ds")
    values, _ = _write(path, shape, dtype, blob_sizes, page_size)
    n = len(values)
    ids = data.draw(st.lists(st.integers(0, n - 1), max_size=400))
    with DatasetReader.open(path) as reader:
        _plan_residues(reader)
        got = reader.read_rows(ids).columns["v"]
        assert isinstance(got, np.ndarray)
        assert got.shape == (len(ids), *shape) and got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, values[ids])
        assert got.flags.writeable


def test_pages_of_different_residues_are_each_taken_from_their_own_view(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Pages whose value chunks start at different element offsets modulo a value's
    three items: a read across them puts every value in its place."""
    path = str(tmp_path_factory.mktemp("fixed") / "ds")
    sizes = [(7 * k) % 61 for k in range(2_000)]
    values, blobs = _write(path, [3], "float32", sizes, 1024)
    with DatasetReader.open(path) as reader:
        residues = _plan_residues(reader)
        assert len(residues) > 1, residues  # the layout this test is about
        ids = np.random.default_rng(0).permutation(len(values))
        got = reader.read_rows(ids).columns
        np.testing.assert_array_equal(got["v"], values[ids])
        assert got["blob"] == [blobs[i] for i in ids.tolist()]
        one = reader.read_rows([1_999, 0]).columns["v"]
        np.testing.assert_array_equal(one, values[[1_999, 0]])


@pytest.mark.parametrize("shape", [[0], [3, 0]])
def test_a_column_of_zero_items_a_row_reads_as_empty_values(
    tmp_path: object, shape: list[int]
) -> None:
    """A fixed-width column whose rows hold no item (shape ``[0]``): every read gives
    empty values of the right shape (found by the round-trip suite: the plan divided by
    the row's zero items)."""
    path = str(tmp_path) + "/z.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "v": {"type": "bool", "shape": shape}})
        writer.write_raw_data([{"id": i, "v": np.zeros(shape, dtype=bool)} for i in range(5)])
    with DatasetReader.open(path) as reader:
        row = reader.read_row(4)
        assert row["id"] == 4 and row["v"].shape == tuple(shape) and row["v"].dtype == bool
        block = reader.read_rows([3, 0, 3])
        assert np.asarray(block.columns["v"]).shape == (3, *shape)
        assert np.asarray(block.columns["id"]).tolist() == [3, 0, 3]
