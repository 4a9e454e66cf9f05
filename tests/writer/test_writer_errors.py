"""Every writer error: bad schemas, bad rows (nothing of the call written), bad call order."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import (
    DatasetExistsError,
    RowValidationError,
    SchemaError,
    WriterStateError,
)
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.testing import strategies as mst
from mrecord.testing.bad_inputs import bad_fields, bad_value_for
from mrecord.testing.model import assert_rows_equal, expected_order, rows_to_columns
from mrecord.writer.file_writer import FileWriter


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    ("schema", "names"),
    [
        ({"a": {"type": "int128"}}, ["'a'", "'int128'"]),
        ({"a": {"type": "int32", "shape": [2, -3]}}, ["'a'", "-3"]),
        ({"a": {"type": "int32", "shape": "2"}}, ["'a'", "'2'"]),
        ({"a": {"type": "int32", "shape": []}}, ["'a'", "[]"]),
        ({"a": {"type": "float32", "shape": [1.5]}}, ["'a'", "1.5"]),
        ({"s": {"type": "string", "shape": [2]}}, ["'s'", "'string'", "[2]"]),
        ({"b": {"type": "bytes", "shape": [-1]}}, ["'b'", "'bytes'", "[-1]"]),
        ({}, ["empty"]),
        ({"bad name": {"type": "int32"}}, ["'bad name'"]),
        ({"a-b": {"type": "int32"}}, ["'a-b'"]),
        ({"": {"type": "int32"}}, ["''"]),
        ({"a": "int32"}, ["'a'", "'int32'"]),
        ({"a": {"type": "int32", "compression": "lz4"}}, ["'a'", "'lz4'"]),
    ],
)
def test_bad_schema_names_field_and_value(tmp_path: Path, schema: Any, names: list[str]) -> None:
    """Each bad schema raises SchemaError whose message quotes the field and the bad value."""
    writer = FileWriter(tmp_path / "d")
    with pytest.raises(SchemaError) as info:
        writer.add_schema(schema)
    for name in names:
        assert name in str(info.value)
    writer.abort()


@given(
    good=mst.schemas(max_fields=3),
    bad=bad_fields(),
    position=st.integers(0, 3),
)
def test_generated_bad_schemas_are_refused(
    good: dict[str, Any], bad: tuple[Any, Any], position: int
) -> None:
    """A schema with one invalid field anywhere raises SchemaError naming that field."""
    name, spec = bad
    items = [(k, v) for k, v in good.items() if k != name]
    items.insert(min(position, len(items)), (name, spec))
    with tempfile.TemporaryDirectory() as tmp:
        writer = FileWriter(Path(tmp) / "d")
        try:
            with pytest.raises(SchemaError) as info:
                writer.add_schema(dict(items))
            assert repr(name) in str(info.value)
        finally:
            writer.abort()


ROW_SCHEMA: dict[str, dict[str, Any]] = {
    "i32": {"type": "int32"},
    "u8": {"type": "uint8"},
    "f64": {"type": "float64"},
    "f16": {"type": "float16"},
    "arr": {"type": "float64", "shape": [2]},
    "var": {"type": "int16", "shape": [-1, 3]},
    "s": {"type": "string"},
    "b": {"type": "bytes"},
}


def _good_row(i: int) -> dict[str, Any]:
    return {
        "i32": i,
        "u8": i % 256,
        "f64": i / 3,
        "f16": 0.5,
        "arr": np.array([i, -i], dtype=np.float64),
        "var": np.full((i % 3, 3), i, dtype=np.int16),
        "s": f"row {i} ✓",
        "b": bytes([i % 256]) * i,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("i32", 2**40),
        ("i32", "7"),
        ("i32", 1.0),
        ("i32", True),
        ("u8", -1),
        ("u8", 256),
        ("f64", "1.0"),
        ("f16", 1e10),
        ("arr", np.array([1, 2], dtype=np.int8)),
        ("arr", np.zeros(3, dtype=np.float64)),
        ("arr", [1.0, 2.0]),
        ("var", np.zeros((2, 4), dtype=np.int16)),
        ("var", np.zeros((2, 3), dtype=np.int32)),
        ("s", b"bytes"),
        ("s", "lone \ud800 surrogate"),
        ("b", "text"),
        ("b", None),
    ],
)
def test_bad_row_names_row_and_field_and_writes_nothing(
    tmp_path: Path, field: str, value: Any
) -> None:
    """A bad value in row 2 of a call: RowValidationError(row=2, field), the call writes nothing,
    and the committed dataset holds exactly the other calls' rows."""
    writer = FileWriter(tmp_path / "d", shard_num=2)
    writer.add_schema(ROW_SCHEMA)
    writer.set_page_size(1024)
    first = [_good_row(i) for i in range(5)]
    writer.write_raw_data(first)
    before = _snapshot(tmp_path)
    bad = [_good_row(i) for i in range(100, 104)]
    bad[2][field] = value
    with pytest.raises(RowValidationError) as info:
        writer.write_raw_data(bad)
    assert (info.value.row, info.value.field) == (2, field)
    assert "row 2" in str(info.value) and repr(field) in str(info.value)
    assert _snapshot(tmp_path) == before
    last = [_good_row(i) for i in range(200, 203)]
    writer.write_raw_data(last)
    writer.commit()
    written = first + last
    with DatasetReader.open(tmp_path / "d0") as reader:
        got = list(reader.iter_rows())
    assert_rows_equal(ROW_SCHEMA, got, [written[p] for p in expected_order([5, 3], 2)])


@pytest.mark.parametrize("change", ["missing", "extra"])
def test_missing_or_extra_field_is_refused(tmp_path: Path, change: str) -> None:
    """A row lacking a field, or with a field not in the schema, names row and field."""
    writer = FileWriter(tmp_path / "d")
    writer.add_schema(ROW_SCHEMA)
    rows = [_good_row(i) for i in range(4)]
    if change == "missing":
        del rows[3]["s"]
    else:
        rows[3]["zzz"] = 1
    with pytest.raises(RowValidationError) as info:
        writer.write_raw_data(rows)
    assert (info.value.row, info.value.field) == (3, "s" if change == "missing" else "zzz")
    writer.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["d.mrecord-lock"]


@given(
    schema=mst.schemas(max_fields=3),
    data=st.data(),
)
def test_generated_bad_values_are_refused(schema: dict[str, Any], data: st.DataObject) -> None:
    """Any value that does not fit its field is refused, naming row and field, on both paths."""
    rows = data.draw(mst.rows_for(schema, min_size=1, max_size=5), label="rows")
    row = data.draw(st.integers(0, len(rows) - 1), label="row")
    field = data.draw(st.sampled_from(sorted(schema)), label="field")
    rows[row] = {**rows[row], field: data.draw(bad_value_for(schema[field]), label="bad")}
    with tempfile.TemporaryDirectory() as tmp:
        writer = FileWriter(Path(tmp) / "d")
        try:
            writer.add_schema(schema)
            before = _snapshot(Path(tmp))
            with pytest.raises(RowValidationError) as info:
                writer.write_raw_data(rows)
            assert (info.value.row, info.value.field) == (row, field)
            assert _snapshot(Path(tmp)) == before
        finally:
            writer.abort()


def test_columnar_path_refuses_reinterpretation(tmp_path: Path) -> None:
    """Columns: an int8 array for a float64 array field, or 2**40 for int32, are errors."""
    writer = FileWriter(tmp_path / "d")
    writer.add_schema({"x": {"type": "int32"}, "v": {"type": "float64", "shape": [2]}})
    good = {"x": np.arange(4, dtype=np.int64), "v": np.zeros((4, 2))}
    with pytest.raises(RowValidationError) as info:
        writer.write_raw_data({**good, "v": np.zeros((4, 2), dtype=np.int8)})
    assert info.value.field == "v" and "int8" in str(info.value)
    with pytest.raises(RowValidationError) as info:
        writer.write_raw_data({**good, "x": np.array([0, 1, 2**40, 3])})
    assert (info.value.row, info.value.field) == (2, "x")
    with pytest.raises(RowValidationError):
        writer.write_raw_data({"x": np.arange(4)})
    writer.write_raw_data(good)
    writer.commit()
    with DatasetReader.open(tmp_path / "d") as reader:
        assert reader.num_rows == 4


def test_existing_files_need_overwrite(tmp_path: Path) -> None:
    """An existing dataset is refused without overwrite=True and replaced with it."""
    rows = [{"x": 1}]
    for _ in range(2):
        w = FileWriter(tmp_path / "d", shard_num=2, overwrite=True)
        w.add_schema({"x": {"type": "int32"}})
        w.write_raw_data(rows)
        w.commit()
    with pytest.raises(DatasetExistsError) as info:
        FileWriter(tmp_path / "d", shard_num=2)
    assert "d0" in str(info.value) and "overwrite" in str(info.value)
    (tmp_path / "e.db").write_bytes(b"")
    with pytest.raises(DatasetExistsError):
        FileWriter(tmp_path / "e")
    with DatasetReader.open(tmp_path / "d0") as reader:
        assert reader.num_rows == 1


@pytest.mark.parametrize("fields", [["arr"], ["var"], ["b"], ["nope"], "i32", []])
def test_add_index_refuses_non_scalar_fields(tmp_path: Path, fields: Any) -> None:
    """Only scalar numbers and strings can be indexed; the message names the field."""
    writer = FileWriter(tmp_path / "d")
    writer.add_schema(ROW_SCHEMA)
    with pytest.raises(SchemaError) as info:
        writer.add_index(fields)
    if isinstance(fields, list) and fields:
        assert repr(fields[0]) in str(info.value)
    writer.add_index(["i32", "s"])
    writer.abort()


def test_calls_out_of_order(tmp_path: Path) -> None:
    """Writing before a schema, adding a schema or index after writing, committing twice."""
    writer = FileWriter(tmp_path / "d")
    with pytest.raises(WriterStateError, match="add_schema"):
        writer.write_raw_data([{"x": 1}])
    with pytest.raises(WriterStateError):
        writer.commit()
    writer.add_schema({"x": {"type": "int32"}})
    with pytest.raises(WriterStateError):
        writer.add_schema({"x": {"type": "int32"}})
    writer.write_raw_data([{"x": 1}])
    with pytest.raises(WriterStateError):
        writer.add_index(["x"])
    with pytest.raises(WriterStateError):
        writer.set_page_size(4096)
    writer.commit()
    with pytest.raises(WriterStateError, match="open_for_append"):
        writer.commit()
    with pytest.raises(WriterStateError):
        writer.write_raw_data([{"x": 2}])


def test_context_manager_leaves_nothing_on_error(tmp_path: Path) -> None:
    """An exception inside ``with FileWriter`` commits nothing and leaves only the lock file."""
    with pytest.raises(KeyError), FileWriter(tmp_path / "d", shard_num=3) as writer:
        writer.add_schema({"x": {"type": "int32"}})
        writer.write_raw_data({"x": np.arange(5000)})
        raise KeyError("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["d.mrecord-lock"]
    with FileWriter(tmp_path / "d", shard_num=3) as writer:
        writer.add_schema({"x": {"type": "int32"}})
        writer.write_raw_data(rows_to_columns({"x": {"type": "int32"}}, [{"x": 1}]))
    with DatasetReader.open(tmp_path / "d1") as reader:
        assert reader.num_rows == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("u8", -1, "-1 is out of range for uint8 [0, 255]"),
        ("u8", np.int64(-3), "-3 is out of range for uint8 [0, 255]"),
        ("u8", 256, "256 is out of range for uint8 [0, 255]"),
        ("i32", 2**40, f"{2**40} is out of range for int32"),
        ("f16", 1e10, "10000000000.0 is out of range for float16"),
    ],
)
def test_out_of_range_message_shows_the_value_given(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    """The user's number, never its wrapped uint64 form (numpy 1.24) or a numpy repr."""
    with FileWriter(tmp_path / "d") as writer:
        writer.add_schema(ROW_SCHEMA)
        rows = [_good_row(i) for i in range(3)]
        rows[1][field] = value
        with pytest.raises(RowValidationError) as info:
            writer.write_raw_data(rows)
        writer.write_raw_data([_good_row(0)])
    assert message in str(info.value)
    assert "18446744073709551" not in str(info.value) and "np." not in str(info.value)
