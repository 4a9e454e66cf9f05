"""Opening a MindRecord shard of many rows for ``mrecord convert mindrecord`` holds its
record locations as arrays, not as Python objects.

The importer located every record as Python lists of ints (six per row, ~240 bytes a row)
and checked MindSpore's ``.db`` with one ``fetchall`` (seven ints and a tuple a row,
~330 bytes): a shard of 10M tabular rows, as MindSpore writes them, needed ~6 GB just to be
opened. Now pages are located one at a time into arrays and the ``.db`` is compared a
block of rows at a time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mrecord.convert.mindrecord.reader import MindRecordDataset
from mrecord.errors import IndexMismatchError
from tests.format.test_mindrecord_import import build_mindrecord
from tests.tracing import traced_peak

ROWS = 200_000

_COLUMNS = (
    "ROW_ID", "PAGE_ID_RAW", "PAGE_OFFSET_RAW", "PAGE_OFFSET_RAW_END", "ROW_GROUP_ID",
    "PAGE_ID_BLOB", "PAGE_OFFSET_BLOB", "PAGE_OFFSET_BLOB_END",
)  # fmt: skip


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, ...]]]:
    path = tmp_path_factory.mktemp("mindrecord") / "big.mindrecord"
    rows = [{"id": i, "name": f"n{i}", "arr": [i], "data": b"xy"} for i in range(ROWS)]
    places = build_mindrecord(path, rows, page_size=1 << 20)
    index: list[tuple[int, ...]] = [
        (i, rp, ro, re, 0, bp, bo, be) for i, (rp, ro, re, bp, bo, be) in enumerate(places)
    ]
    return path, index


def _write_db(path: Path, index: list[tuple[int, ...]]) -> None:
    db = Path(f"{path}.db")
    db.unlink(missing_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE INDEXES ({', '.join(c + ' INT NOT NULL' for c in _COLUMNS)})")
        conn.executemany(f"INSERT INTO INDEXES VALUES ({', '.join('?' * len(_COLUMNS))})", index)
    conn.close()


def test_opening_a_shard_of_many_rows_holds_arrays_not_objects(
    shard: tuple[Path, list[tuple[int, ...]]],
) -> None:
    path, index = shard
    _write_db(path, index)

    def open_and_close() -> int:
        with MindRecordDataset.open(path, check_index=True) as dataset:
            return dataset.indexed_shards

    indexed, peak = traced_peak(open_and_close)
    assert indexed == 1
    # the locations themselves are 48 bytes a row (9.6 MB); lists and fetchall held 110 MB
    assert peak < 32 << 20, f"opening {ROWS} rows held {peak >> 20} MB"


@pytest.mark.parametrize("damage", ["offset", "missing", "extra"])
def test_a_db_wrong_deep_in_its_rows_is_still_refused(
    shard: tuple[Path, list[tuple[int, ...]]], damage: str
) -> None:
    path, index = shard
    rows = list(index)
    if damage == "offset":
        row = list(rows[150_001])
        row[6] += 1
        rows[150_001] = tuple(row)
    elif damage == "missing":
        del rows[-1]
    else:
        rows.append((ROWS, *rows[-1][1:]))
    _write_db(path, rows)
    with pytest.raises(IndexMismatchError, match=r"big\.mindrecord\.db"):
        MindRecordDataset.open(path, check_index=True)
