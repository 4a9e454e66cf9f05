"""Write -> read round trips over generated schemas, rows, shard counts and page sizes."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.format.layout import TRAILER_SIZE, Trailer
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.testing import strategies as mst
from mrecord.testing.model import (
    assert_rows_equal,
    expected_order,
    shard_sizes,
    write_dataset,
)
from mrecord.writer.file_writer import FileWriter

CASES = Path(__file__).parents[1] / "cases"


def _read_all(reader: DatasetReader, seed: int) -> list[dict[str, Any]]:
    """Every row by global id, fetched in a shuffled order and put back in id order."""
    ids = np.random.default_rng(seed).permutation(reader.num_rows)
    block = reader.read_rows(ids)
    rows: list[dict[str, Any]] = [{}] * reader.num_rows
    for row_id, row in zip(ids.tolist(), block.iter_rows(), strict=True):
        rows[row_id] = row
    return rows


@given(case=mst.datasets(), appends=st.integers(0, 2), seed=st.integers(0, 2**32 - 1))
def test_roundtrip_rows_in_documented_order(case: mst.DatasetCase, appends: int, seed: int) -> None:
    """Every written row comes back, bit for bit, at the global id the distribution gives it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.mrecord"
        split = max(1, len(case.calls) - appends)
        files = write_dataset(
            path, case.schema, case.calls[:split], case.shard_num, case.page_size, case.index_fields
        )
        for rows in case.calls[split:]:
            writer = FileWriter.open_for_append(files[-1])
            writer.write_raw_data(rows)
            writer.commit()
        written = case.rows
        order = expected_order([len(c) for c in case.calls], case.shard_num)
        want = [written[p] for p in order]
        with DatasetReader.open(files[0], verify="always") as reader:
            assert reader.num_rows == len(written)
            assert reader.file_row_counts == shard_sizes(
                [len(c) for c in case.calls], case.shard_num
            )
            assert [p.name for p in reader.files] == [p.name for p in files]
            assert_rows_equal(case.schema, _read_all(reader, seed), want)
            assert_rows_equal(case.schema, list(reader.iter_rows(chunk_size=7)), want)
            if want:
                last = len(want) - 1
                assert_rows_equal(case.schema, [reader.read_row(last)], [want[last]])


@given(case=mst.datasets(max_shards=3))
def test_column_subset_reads_only_those_columns(case: mst.DatasetCase) -> None:
    """Choosing columns returns exactly those columns with the same values."""
    with tempfile.TemporaryDirectory() as tmp:
        files = write_dataset(
            Path(tmp) / "d", case.schema, case.calls, case.shard_num, case.page_size
        )
        first = next(iter(case.schema))
        order = expected_order([len(c) for c in case.calls], case.shard_num)
        want = [{first: case.rows[p][first]} for p in order]
        with DatasetReader.open(files, columns=[first]) as reader:
            got = list(reader.iter_rows())
        assert_rows_equal({first: case.schema[first]}, got, want)


def _content(files: list[Path]) -> list[Any]:
    """What a dataset holds apart from its random dataset id: page bytes, metadata, .db rows."""
    out: list[Any] = []
    for f in files:
        data = f.read_bytes()
        trailer = Trailer.parse(data[-TRAILER_SIZE:], len(data))
        meta = msgpack.unpackb(
            data[trailer.metadata_offset : trailer.metadata_offset + trailer.metadata_length]
        )
        meta.pop("dataset_id")
        conn = sqlite3.connect(f"file:{f}.db?mode=ro", uri=True)
        try:
            db_rows = conn.execute("SELECT * FROM rows ORDER BY row_id").fetchall()
            db_meta = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
        finally:
            conn.close()
        db_meta.pop("dataset_id")
        out.append((f.name, data[: trailer.metadata_offset], meta, db_rows, db_meta))
    return out


@given(case=mst.datasets(max_shards=3))
def test_columnar_fast_path_writes_the_same_files(case: mst.DatasetCase) -> None:
    """A dict of columns and a list of row dicts give the same pages, metadata and index."""
    with tempfile.TemporaryDirectory() as tmp:
        args = (case.schema, case.calls, case.shard_num, case.page_size, case.index_fields)
        by_rows = write_dataset(Path(tmp) / "a", *args)
        (Path(tmp) / "b").mkdir()
        by_cols = write_dataset(Path(tmp) / "b" / "a", *args, columnar=True)
        assert _content(by_rows) == _content(by_cols)


@pytest.mark.parametrize(
    "case", json.loads((CASES / "shard_naming.json").read_text())["cases"], ids=str
)
def test_shard_names_are_mindspores(tmp_path: Path, case: dict[str, Any]) -> None:
    """NAME alone for one shard, else NAME + index zero-padded to the width of shard_num-1."""
    writer = FileWriter(tmp_path / "NAME", shard_num=case["shard_num"])
    writer.add_schema({"x": {"type": "int32"}})
    writer.write_raw_data([{"x": i} for i in range(case["shard_num"])])
    writer.commit()
    expected = {*case["files"], *(f + ".db" for f in case["files"])}
    visible = {p.name for p in tmp_path.iterdir() if not p.name.endswith(".mrecord-lock")}
    assert visible == expected
    assert [p.name for p in writer.files] == case["files"]


def test_one_row_per_call_is_round_robin(tmp_path: Path) -> None:
    """Seven single-row calls into three shards: rows 0,3,6 / 1,4 / 2,5."""
    writer = FileWriter(tmp_path / "d", shard_num=3)
    writer.add_schema({"x": {"type": "int64"}})
    for i in range(7):
        writer.write_raw_data([{"x": i}])
    writer.commit()
    with DatasetReader.open(tmp_path / "d0") as reader:
        assert reader.file_row_counts == [3, 2, 2]
        x = reader.read_rows(np.arange(7)).columns["x"]
        assert isinstance(x, np.ndarray)
        assert x.tolist() == [0, 3, 6, 1, 4, 2, 5]


def test_calls_are_cut_into_contiguous_balanced_runs(tmp_path: Path) -> None:
    """10 rows into 4 shards: runs of 3,3,2,2; then 3 rows go to shards 2, 3 and 0."""
    writer = FileWriter(tmp_path / "d", shard_num=4)
    writer.add_schema({"x": {"type": "int64"}})
    writer.write_raw_data({"x": np.arange(10)})
    writer.commit()
    appender = FileWriter.open_for_append(tmp_path / "d2")
    appender.write_raw_data({"x": np.arange(10, 13)})
    appender.commit()
    with DatasetReader.open(tmp_path / "d0") as reader:
        assert reader.file_row_counts == [4, 3, 3, 3]
        x = reader.read_rows(np.arange(13)).columns["x"]
        assert isinstance(x, np.ndarray)
        got = x.tolist()
    assert got == [0, 1, 2, 10, 3, 4, 5, 6, 7, 11, 8, 9, 12]


def test_empty_dataset_round_trips(tmp_path: Path) -> None:
    """A committed dataset with no rows opens with zero rows in every shard."""
    writer = FileWriter(tmp_path / "e", shard_num=2)
    writer.add_schema({"s": {"type": "string"}, "a": {"type": "float16", "shape": [-1]}})
    writer.write_raw_data([])
    writer.commit()
    with DatasetReader.open(tmp_path / "e1") as reader:
        assert reader.num_rows == 0
        assert reader.file_row_counts == [0, 0]
        assert len(reader.read_rows(np.zeros(0, dtype=np.int64))) == 0


@given(
    layout=st.sampled_from(["plain", "strided", "fortran", "subclass", "mixed"]),
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=40),
)
def test_variable_shape_values_of_any_layout_round_trip(layout: str, sizes: list[int]) -> None:
    """Variable-shape values checked and joined as they are when they are plain arrays of
    the field's dtype (``columnize.arrays_match``, ``chunks._plain_arrays``), one by one
    otherwise: strided views, Fortran order, numpy subclasses, a mix. Same rows back."""
    rng = np.random.default_rng(len(sizes))
    base = [rng.random((k, 6)).astype(np.float32) for k in sizes]
    if layout == "strided":
        values = [v[:, ::2] for v in base]  # (k, 3), not contiguous
    elif layout == "fortran":
        values = [np.asfortranarray(v[:, :3]) for v in base]
    elif layout == "subclass":
        values = [np.ascontiguousarray(v[:, :3]).view(np.memmap) for v in base]
    elif layout == "mixed":
        values = [v[:, :3] if i % 2 else np.ascontiguousarray(v[:, :3]) for i, v in enumerate(base)]
    else:
        values = [np.ascontiguousarray(v[:, :3]) for v in base]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds"
        with FileWriter(path) as writer:
            writer.add_schema({"a": {"type": "float32", "shape": [-1, 3]}})
            writer.set_page_size(1024)
            writer.write_raw_data({"a": values})
        with DatasetReader.open(path) as reader:
            got = reader.read_rows(np.arange(len(values))).columns["a"]
    for value, want in zip(got, values, strict=True):
        assert value.shape == want.shape
        np.testing.assert_array_equal(value, np.asarray(want))
