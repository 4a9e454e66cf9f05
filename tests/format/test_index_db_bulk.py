"""The ``.db`` written in bulk (format 1.2): lookups answer as before, older ``.db`` files read.

Format 1.1 wrote a ``rows`` entry (row id, page, slot, index values) for every row; 1.2
writes the same entries with one ``executemany`` when the shard has index fields, and none
when it has not (nothing looks a row up there: its page and slot are in the data file).
``tests/fixtures/v1_1/`` holds unindexed datasets written and appended to by 1.1.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mrecord import FileWriter, MindPage
from mrecord.format.layout import FORMAT_MINOR, parse_header
from mrecord.maintenance.reindex import reindex
from mrecord.maintenance.verify import verify_dataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.testing import strategies as mst
from mrecord.testing.model import expected_order, write_dataset

FIXTURES = Path(__file__).parents[1] / "fixtures" / "v1_1"


def _db_rows(shard: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{shard}.db?mode=ro", uri=True)
    try:
        return conn.execute("SELECT * FROM rows ORDER BY row_id").fetchall()
    finally:
        conn.close()


def _format_1_1_rows(shard: Path) -> list[tuple[Any, ...]]:
    """The ``rows`` a 1.1 writer put in ``shard``'s ``.db``: a location per row + values."""
    with DatasetReader.open(shard) as whole:
        (piece,) = [s for s in whole.shards if s.path == shard]
        meta = piece.meta
        sub = DatasetReader([piece], columns=list(meta.index_fields) or None)
        block = sub.read_rows(np.arange(meta.num_rows))
        out = []
        row = 0
        for page, count in enumerate(meta.page_rows.tolist()):
            for slot in range(count):
                values = []
                for name in meta.index_fields:
                    values.append(_key(block.columns[name][row]))
                out.append((row, page, slot, *values))
                row += 1
        return out


def _key(value: Any) -> Any:
    """How SQLite hands a stored value back (NaN is stored as NULL)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, bool):
        return int(value)
    return value


@settings(max_examples=40, deadline=None)
@given(case=mst.datasets(max_shards=3), data=st.data())
def test_bulk_db_answers_lookups_as_format_1_1_did(case: mst.DatasetCase, data: Any) -> None:
    """Every shard's ``rows`` are 1.1's entries (indexed) or none; MindPage matches a model."""
    with tempfile.TemporaryDirectory() as tmp:
        files = write_dataset(
            Path(tmp) / "d", case.schema, case.calls, case.shard_num, case.page_size,
            case.index_fields,
        )
        for shard in files:
            got = _db_rows(shard)
            assert got == (_format_1_1_rows(shard) if case.index_fields else [])
        assert verify_dataset(files[0]).ok
        if not case.index_fields:
            return
        field = data.draw(st.sampled_from(case.index_fields))
        order = expected_order([len(c) for c in case.calls], case.shard_num)
        values = [_key(case.rows[p][field]) for p in order]  # in global row order
        assume(None not in values)  # NaN: categories sort None last, covered elsewhere
        page = MindPage(files[0])
        page.set_category_field(field)
        info = json.loads(page.read_category_info())
        counts = {c["name"]: c["count"] for c in info["categories"]}
        want = Counter(values)
        assert counts == dict(want)
        for value in set(values):
            ids = page.read_ids_at_page_by_name(value, 0, len(values))
            assert ids.tolist() == [i for i, v in enumerate(values) if v == value]


def test_new_files_say_format_1_4() -> None:
    """1.4 (head index) keeps 1.2's empty rows table for shards without index fields."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d"
        with FileWriter(path) as w:
            w.add_schema({"x": {"type": "int32"}})
            w.write_raw_data({"x": np.arange(5, dtype=np.int32)})
        assert parse_header(path.read_bytes()[:64]) == (1, FORMAT_MINOR)
        assert FORMAT_MINOR == 4
        assert _db_rows(path) == []


def _fixture_row(i: int) -> dict[str, Any]:
    return {"id": i, "vec": np.arange(3, dtype=np.float32) + i, "blob": bytes([i % 256]) * (i % 7)}


@pytest.mark.parametrize(("first", "rows"), [("plain", 39), ("plain_sharded0", 21)])
def test_format_1_1_unindexed_datasets_read_verify_append_and_reindex(
    tmp_path: Path, first: str, rows: int
) -> None:
    folder = tmp_path / "v1_1"
    shutil.copytree(FIXTURES, folder, ignore=shutil.ignore_patterns("*.py"))
    path = folder / first
    assert len(_db_rows(path)) > 0  # 1.1 kept a row per row
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == rows
        got = sorted(int(r["id"]) for r in reader.iter_rows())
    assert got == list(range(rows))
    assert verify_dataset(path).ok
    appender = FileWriter.open_for_append(path)
    appender.write_raw_data([_fixture_row(i) for i in range(rows, rows + 7)])
    appender.commit()
    with DatasetReader.open(path) as reader:
        assert sorted(int(r["id"]) for r in reader.iter_rows()) == list(range(rows + 7))
        for i in range(reader.num_rows):
            row = reader.read_row(i)
            want = _fixture_row(int(row["id"]))
            assert np.array_equal(row["vec"], want["vec"])
            assert bytes(row["blob"]) == want["blob"]
    assert verify_dataset(path).ok
    reindex(path)
    assert _db_rows(path) == []
    assert verify_dataset(path).ok
