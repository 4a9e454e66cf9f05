"""Tests written for mutants of mrecord/storage/index_db.py that survived the storage tests
(docs/RELIABILITY.md, "Mutation testing"): the ``.db`` exactly as docs/FORMAT.md (*The .db
index*) gives it to another implementation (tables, columns and their SQL types, the field
indexes, every row's page and slot, the JSON metadata), an append's merge and its re-run, and
every refusal whole (the file it names, the SQLite error, what to do)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.errors import (
    CorruptFileError,
    IndexMismatchError,
    IndexWriteError,
    MissingIndexError,
    UnreadableFileError,
)
from mrecord.format.layout import FORMAT_MAJOR, FORMAT_MINOR
from mrecord.format.metadata import ShardMetadata
from mrecord.storage import index_db
from mrecord.storage.index_db import (
    check_index_db,
    connect_foreign_db,
    merge_index_db,
    open_index_db,
    query_index_db,
    read_index_metadata,
    write_index_db,
)
from mrecord.storage.naming import db_path, partial_path
from mrecord.storage.shard import read_shard_metadata

SCHEMA = {
    "id": {"type": "int64"},
    "score": {"type": "float32"},
    "label": {"type": "string"},
    "weight": {"type": "float64"},
    "small": {"type": "int32"},
    "raw": {"type": "bytes"},
}
INDEXED = ["id", "score", "label", "weight", "small"]


def _rows(first: int, count: int) -> dict[str, Any]:
    ids = np.arange(first, first + count, dtype=np.int64)
    return {
        "id": ids,
        "score": (ids * 0.5).astype(np.float32),
        "label": [f"l{i % 3}" for i in ids.tolist()],
        "weight": ids * 0.25,
        "small": (ids % 4).astype(np.int32),
        "raw": [bytes([i % 256]) * 300 for i in ids.tolist()],
    }


def _write(path: Path, count: int, index: list[str] | None = INDEXED) -> Path:
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA)
        if index:
            writer.add_index(index)
        writer.set_page_size(1024)  # a few rows per page: pages and slots that differ
        writer.write_raw_data(_rows(0, count))
    return path


def _sql(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def _locations(page_rows: list[int]) -> list[tuple[int, int, int]]:
    """(row_id, page, slot) of every row, pages holding ``page_rows`` rows each."""
    out: list[tuple[int, int, int]] = []
    for page, count in enumerate(page_rows):
        out += [(len(out) + slot, page, slot) for slot in range(count)]
    return out


def _metadata(meta: ShardMetadata, data_file: str) -> dict[str, str]:
    """The metadata table as FORMAT.md gives it: each value JSON text."""
    return {
        "format_version": json.dumps([FORMAT_MAJOR, FORMAT_MINOR]),
        "dataset_id": json.dumps(meta.dataset_id),
        "generation": json.dumps(meta.generation),
        "shard_index": json.dumps(meta.shard_index),
        "num_rows": json.dumps(meta.num_rows),
        "data_file": json.dumps(data_file),
        "schema": json.dumps(
            {
                "id": {"type": "int64"},
                "score": {"type": "float32"},
                "label": {"type": "string"},
                "weight": {"type": "float64"},
                "small": {"type": "int32"},
                "raw": {"type": "bytes"},
            }
        ),
        "index_fields": json.dumps(list(meta.index_fields)),
    }


ROWS_COLUMNS = [
    # (cid, name, declared type, notnull, default, pk): PRAGMA table_info
    (0, "row_id", "INTEGER", 0, None, 1),
    (1, "page", "INTEGER", 1, None, 0),
    (2, "slot", "INTEGER", 1, None, 0),
]


def test_a_commit_writes_the_tables_columns_and_indexes_format_md_gives(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 9)
    db = db_path(path)
    assert _sql(db, "PRAGMA table_info(rows)") == [
        *ROWS_COLUMNS,
        (3, "f_id", "INTEGER", 0, None, 0),
        (4, "f_score", "FLOAT", 0, None, 0),
        (5, "f_label", "TEXT", 0, None, 0),
        (6, "f_weight", "FLOAT", 0, None, 0),
        (7, "f_small", "INTEGER", 0, None, 0),
    ]
    assert _sql(db, "PRAGMA table_info(metadata)") == [
        (0, "key", "TEXT", 0, None, 1),
        (1, "value", "TEXT", 0, None, 0),
    ]
    objects = "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    assert sorted(_sql(db, objects)) == [
        ("index", "idx_id"),
        ("index", "idx_label"),
        ("index", "idx_score"),
        ("index", "idx_small"),
        ("index", "idx_weight"),
        ("table", "metadata"),
        ("table", "rows"),
    ]
    for name in INDEXED:  # each index is on its field's column, and only on it
        assert [r[2] for r in _sql(db, f"PRAGMA index_info(idx_{name})")] == [f"f_{name}"]


def test_every_row_has_its_page_slot_and_values(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 9)
    meta = read_shard_metadata(path)
    page_rows = meta.page_rows.tolist()
    assert len(page_rows) >= 3  # rows on pages other than the first
    want = [
        (row, page, slot, row, row * 0.5, f"l{row % 3}", row * 0.25, row % 4)
        for row, page, slot in _locations(page_rows)
    ]
    got = _sql(db_path(path), "SELECT * FROM rows ORDER BY row_id")
    assert got == want
    # the stored SQL types: another reader compares them as numbers and text
    kinds = _sql(
        db_path(path),
        "SELECT DISTINCT typeof(row_id), typeof(page), typeof(slot), typeof(f_id), "
        "typeof(f_score), typeof(f_label), typeof(f_weight), typeof(f_small) FROM rows",
    )
    assert kinds == [("integer",) * 4 + ("real", "text", "real", "integer")]


def test_the_metadata_table_holds_json_values_of_every_key(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 9)
    meta = read_shard_metadata(path)
    got = dict(_sql(db_path(path), "SELECT key, value FROM metadata"))
    assert got == _metadata(meta, "d")
    assert read_index_metadata(path) == {k: json.loads(v) for k, v in got.items()}


def _meta(path: Path, page_rows: list[int], **changes: Any) -> ShardMetadata:
    meta = read_shard_metadata(path)
    return replace(
        meta,
        page_rows=np.array(page_rows, dtype="<u4"),
        num_rows=sum(page_rows),
        **changes,
    )


@pytest.mark.parametrize("as_array", [True, False])
def test_written_from_a_row_on_the_rows_keep_their_pages_and_slots(
    tmp_path: Path, as_array: bool
) -> None:
    """An append's partial ``.db``: rows ``first_new_row..`` only, located in the whole shard;
    the values may come as numpy arrays or as lists."""
    path = _write(tmp_path / "d", 4, index=["id", "small"])
    meta = _meta(path, [3, 1, 2, 4])
    ids = np.arange(4, 10, dtype=np.int64)
    small = (ids % 4).astype(np.int32)
    values: dict[str, Any] = (
        {"id": ids, "small": small} if as_array else {"id": ids.tolist(), "small": small.tolist()}
    )
    target = tmp_path / "d.db.mrecord-partial"
    write_index_db(target, meta, 4, values)
    assert _sql(target, "SELECT * FROM rows ORDER BY row_id") == [
        (4, 2, 0, 4, 0),
        (5, 2, 1, 5, 1),
        (6, 3, 0, 6, 2),
        (7, 3, 1, 7, 3),
        (8, 3, 2, 8, 0),
        (9, 3, 3, 9, 1),
    ]
    assert dict(_sql(target, "SELECT key, value FROM metadata"))["data_file"] == '"d"'


def test_every_page_and_slot_from_the_first_row(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 4, index=["id"])
    meta = _meta(path, [2, 3, 1])
    target = tmp_path / "x.db"
    write_index_db(target, meta, 0, {"id": np.arange(6, dtype=np.int64)})
    assert _sql(target, "SELECT * FROM rows ORDER BY row_id") == [
        (0, 0, 0, 0),
        (1, 0, 1, 1),
        (2, 1, 0, 2),
        (3, 1, 1, 3),
        (4, 1, 2, 4),
        (5, 2, 0, 5),
    ]
    meta_rows = dict(_sql(target, "SELECT key, value FROM metadata"))
    assert meta_rows["data_file"] == '"x"'  # the .db's own name less ".db"
    assert meta_rows["num_rows"] == "6"


def test_a_shard_without_new_rows_gets_an_index_without_rows(tmp_path: Path) -> None:
    """An append that gave this shard nothing: no values at all for its index fields."""
    path = _write(tmp_path / "d", 4, index=["id", "label"])
    meta = _meta(path, [4])
    target = tmp_path / "d.db.mrecord-partial"
    write_index_db(target, meta, 4, {})
    assert _sql(target, "SELECT count(*) FROM rows") == [(0,)]
    assert dict(_sql(target, "SELECT key, value FROM metadata"))["num_rows"] == "4"


def test_fewer_values_than_rows_are_refused_not_written_short(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 4, index=["id"])
    meta = _meta(path, [4])
    with pytest.raises(ValueError, match="zip"):
        write_index_db(tmp_path / "x.db", meta, 0, {"id": [0, 1, 2]})


def test_a_leftover_file_is_replaced_whole(tmp_path: Path) -> None:
    """A partial ``.db`` from a killed writer is rebuilt, not added to."""
    path = _write(tmp_path / "d", 4, index=["id"])
    meta = _meta(path, [4])
    target = tmp_path / "d.db.mrecord-partial"
    write_index_db(target, meta, 0, {"id": [0, 1, 2, 3]})
    write_index_db(target, meta, 0, {"id": [0, 1, 2, 3]})
    assert _sql(target, "SELECT row_id FROM rows") == [(0,), (1,), (2,), (3,)]


def test_an_unindexed_shard_gets_empty_rows_with_the_three_columns(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 5, index=None)
    db = db_path(path)
    assert _sql(db, "PRAGMA table_info(rows)") == ROWS_COLUMNS
    assert _sql(db, "SELECT count(*) FROM rows") == [(0,)]
    assert _sql(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL") == []
    meta = read_shard_metadata(path)
    assert dict(_sql(db, "SELECT key, value FROM metadata")) == _metadata(meta, "d")


def test_a_sqlite_failure_on_write_names_the_file_errno_and_what_to_do(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 4, index=["id"])
    target = tmp_path / "no_such_folder" / "d.db"
    with pytest.raises(IndexWriteError) as info:
        write_index_db(target, read_shard_metadata(path), 0, {"id": [0, 1, 2, 3]})
    assert str(info.value) == (
        f"cannot write index {str(target)!r} (unable to open database file); check free disk "
        "space and permissions, then write again"
    )
    assert info.value.path == str(target)
    assert info.value.errno == errno.ENOENT  # SQLITE_CANTOPEN
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


# -- an append's merge ------------------------------------------------------------------


def _append(path: Path, first: int, count: int) -> None:
    writer = FileWriter.open_for_append(path)
    writer.write_raw_data(_rows(first, count))
    writer.commit()


def test_an_append_adds_its_rows_and_new_metadata_to_the_db(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", 5)
    _append(path, 5, 4)
    meta = read_shard_metadata(path)
    assert meta.generation == 2 and meta.num_rows == 9
    db = db_path(path)
    want = [
        (row, page, slot, row, row * 0.5, f"l{row % 3}", row * 0.25, row % 4)
        for row, page, slot in _locations(meta.page_rows.tolist())
    ]
    assert _sql(db, "SELECT * FROM rows ORDER BY row_id") == want
    assert dict(_sql(db, "SELECT key, value FROM metadata")) == _metadata(meta, "d")
    assert not partial_path(db).exists()
    check_index_db(path, meta)


def _staged(tmp_path: Path) -> tuple[Path, Path, ShardMetadata]:
    """A committed ``.db`` of 4 rows and a staged one with rows 4..5 at generation 2."""
    path = _write(tmp_path / "d", 4, index=["id"])
    old = read_shard_metadata(path)
    pages = [*old.page_rows.tolist(), 2]
    meta = replace(old, generation=2, page_rows=np.array(pages, "<u4"), num_rows=6)
    staged = partial_path(db_path(path))
    write_index_db(staged, meta, 4, {"id": [4, 5]})
    return db_path(path), staged, meta


def test_a_merge_run_again_after_it_finished_changes_nothing(tmp_path: Path) -> None:
    """Roll-forward after a crash past the merge: the ``.db`` at the new generation is kept."""
    target, staged, meta = _staged(tmp_path)
    before = _sql(target, "SELECT * FROM rows ORDER BY row_id")
    last_page = meta.num_pages - 1
    merge_index_db(target, staged, 2)
    rows = _sql(target, "SELECT * FROM rows ORDER BY row_id")
    assert rows == [*before, (4, last_page, 0, 4), (5, last_page, 1, 5)]
    assert [r[:3] for r in rows] == _locations(meta.page_rows.tolist())
    assert dict(_sql(target, "SELECT key, value FROM metadata")) == _metadata(meta, "d")
    merge_index_db(target, staged, 2)  # again: already at generation 2
    staged.unlink()
    merge_index_db(target, staged, 2)  # and with the staged rows gone
    assert _sql(target, "SELECT * FROM rows ORDER BY row_id") == rows
    assert not Path(f"{target}-journal").exists()


def test_a_merge_whose_staged_rows_are_missing_says_to_reindex(tmp_path: Path) -> None:
    target, staged, _ = _staged(tmp_path)
    staged.unlink()
    before = _sql(target, "SELECT * FROM rows")
    with pytest.raises(IndexWriteError) as info:
        merge_index_db(target, staged, 2)
    assert str(info.value) == (
        f"cannot finish the commit of {str(target)!r}: its new rows {str(staged)!r} are "
        "missing; rebuild it with `mrecord reindex`"
    )
    assert info.value.path == str(target)
    assert _sql(target, "SELECT * FROM rows") == before
    assert json.loads(dict(_sql(target, "SELECT key, value FROM metadata"))["generation"]) == 1


def test_a_merge_sqlite_cannot_do_names_the_index_and_leaves_it_whole(tmp_path: Path) -> None:
    target, staged, _ = _staged(tmp_path)
    staged.write_bytes(b"not a SQLite file" * 100)
    before = _sql(target, "SELECT * FROM rows")
    with pytest.raises(IndexWriteError) as info:
        merge_index_db(target, staged, 2)
    assert str(info.value) == (
        f"cannot add the new rows to index {str(target)!r} (file is not a database); nothing "
        "of them is in it (SQLite rolled back); the next open of the dataset finishes the commit"
    )
    assert info.value.path == str(target)
    assert _sql(target, "SELECT * FROM rows") == before
    assert not Path(f"{target}-journal").exists()
    missing = tmp_path / "gone" / "d.db"
    with pytest.raises(IndexWriteError) as cant_open:
        merge_index_db(missing, staged, 2)
    assert cant_open.value.errno == errno.ENOENT  # SQLITE_CANTOPEN
    assert cant_open.value.path == str(missing)


# -- reading and checking ---------------------------------------------------------------


@pytest.fixture
def shard(tmp_path: Path) -> Path:
    return _write(tmp_path / "d", 6, index=["id"])


def _hint(path: Path) -> str:
    return f"rebuild it with `mrecord reindex {path}`"


def test_a_missing_index_says_which_and_how_to_rebuild_it(shard: Path) -> None:
    db_path(shard).unlink()
    with pytest.raises(MissingIndexError) as info:
        open_index_db(shard)
    assert str(info.value) == f"index {str(db_path(shard))!r} is missing; {_hint(shard)}"


def _execute(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("statements", "what"),
    [
        (["CREATE VIEW v AS SELECT 1"], "it has view 'v'"),
        (
            [
                "CREATE VIEW v AS SELECT 1",
                "CREATE TRIGGER t AFTER INSERT ON rows BEGIN SELECT 1; END",
            ],
            "it has trigger 't', view 'v'",
        ),
        (["DROP TABLE metadata"], "table 'metadata' is missing"),
        (["DROP TABLE rows", "DROP TABLE metadata"], "table 'rows' is missing"),
        (["DROP TABLE rows", "CREATE VIEW rows AS SELECT 1"], "it has view 'rows'"),
    ],
)
def test_an_index_with_what_no_writer_puts_there_is_refused_whole(
    shard: Path, statements: list[str], what: str
) -> None:
    db = db_path(shard)
    _execute(db, *statements)
    with pytest.raises(CorruptFileError) as info:
        open_index_db(shard)
    assert str(info.value) == (
        f"index {str(db)!r} cannot be opened (not an index this software writes: {what}); "
        f"{_hint(shard)}"
    )
    assert info.value.path == str(db)


def test_an_unreadable_index_is_not_called_damaged(
    shard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = db_path(shard)
    real_open = os.open

    def refuse(path: Any, flags: int, *args: Any) -> int:
        if Path(path) == db:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(UnreadableFileError) as info:
        open_index_db(shard)
    assert str(info.value) == (
        f"cannot read index {str(db)!r}: Permission denied (EACCES); check the permissions of "
        f"the file and its folder (ls -l {str(db)!r}); the file itself is not damaged"
    )
    assert info.value.errno == errno.EACCES


def test_index_connections_are_read_only(shard: Path) -> None:
    for immutable in (False, True):
        conn = connect_foreign_db(db_path(shard), ("rows",), immutable=immutable)
        try:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                conn.execute("DELETE FROM rows")
        finally:
            conn.close()
    for immutable in (False, True):  # nor does it create a missing file
        with pytest.raises(sqlite3.OperationalError, match="unable to open"):
            connect_foreign_db(shard.parent / "absent.db", ("rows",), immutable=immutable)
        assert not (shard.parent / "absent.db").exists()


def test_a_value_over_the_limit_is_refused(shard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap on one value (MAX_DB_VALUE) is read when a connection opens."""
    _execute(
        db_path(shard),
        "INSERT INTO metadata VALUES ('big', '\"' || printf('%.2000c', 'x') || '\"')",
    )
    monkeypatch.setattr(index_db, "MAX_DB_VALUE", 1000)
    with pytest.raises(CorruptFileError, match="too big"):
        read_index_metadata(shard)
    monkeypatch.setattr(index_db, "MAX_DB_VALUE", 4000)
    assert read_index_metadata(shard)["big"] == "x" * 2000


@pytest.fixture
def hot_journal(shard: Path) -> Iterator[Path]:
    """``shard``'s ``.db`` as a crash in the middle of a merge leaves it: some changed pages
    written to the file, the originals in its hot ``-journal``."""
    db = db_path(shard)
    _execute(
        db, "CREATE TABLE filler (v BLOB)", "INSERT INTO filler SELECT zeroblob(3000) FROM rows"
    )
    copy = shard.parent / "crashed"
    copy.mkdir()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA cache_size=1")  # changed pages spill into the file
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE rows SET page = 999")
        conn.execute("INSERT INTO filler SELECT zeroblob(3000) FROM filler")
        conn.execute("INSERT INTO filler SELECT zeroblob(3000) FROM filler")
        shutil.copy(db, copy / db.name)
        shutil.copy(f"{db}-journal", copy / f"{db.name}-journal")
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    shutil.copy(copy / db.name, db)
    shutil.copy(copy / f"{db.name}-journal", f"{db}-journal")
    yield db


def test_a_reader_never_reads_a_half_merged_index(shard: Path, hot_journal: Path) -> None:
    """A reader does not look past a hot journal (the next writer's open rolls it back):
    it fails, naming the index, rather than return rows of an unfinished merge."""
    raw = sqlite3.connect(f"file:{hot_journal}?mode=ro&immutable=1", uri=True)
    try:  # the file itself holds changed rows
        assert raw.execute("SELECT count(*) FROM rows WHERE page = 999").fetchone() != (0,)
    finally:
        raw.close()
    with pytest.raises(CorruptFileError, match="readonly"):
        query_index_db(shard, "SELECT page FROM rows")
    # (compared after the roll-back below: the pages the rows had before the merge began)
    writer = sqlite3.connect(hot_journal)  # a writer's open rolls the journal back
    writer.execute("SELECT count(*) FROM rows").fetchall()
    writer.close()
    got = query_index_db(shard, "SELECT row_id, page, slot FROM rows ORDER BY row_id")
    assert got == _locations(read_shard_metadata(shard).page_rows.tolist())


def test_damaged_metadata_is_a_corrupt_file_error_naming_the_index(shard: Path) -> None:
    db = db_path(shard)
    _execute(db, "UPDATE metadata SET value = 'not json' WHERE key = 'num_rows'")
    with pytest.raises(CorruptFileError) as info:
        read_index_metadata(shard)
    assert str(info.value) == (
        f"index {str(db)!r} is damaged (Expecting value: line 1 column 1 (char 0)); "
        f"{_hint(shard)}"
    )
    assert info.value.path == str(db)


@pytest.mark.parametrize(
    ("key", "stored"),
    [("dataset_id", '"other"'), ("generation", "7"), ("shard_index", "3"), ("num_rows", "5")],
)
def test_an_index_of_another_shard_or_generation_is_named_with_both_values(
    shard: Path, key: str, stored: str
) -> None:
    meta = read_shard_metadata(shard)
    check_index_db(shard, meta)
    _execute(db_path(shard), f"UPDATE metadata SET value = '{stored}' WHERE key = '{key}'")
    with pytest.raises(IndexMismatchError) as info:
        check_index_db(shard, meta)
    assert str(info.value) == (
        f"index {str(db_path(shard))!r} does not match {str(shard)!r}: {key} is "
        f"{json.loads(stored)!r} in the .db but {getattr(meta, key)!r} in the data file; "
        f"{_hint(shard)}"
    )


def test_a_key_missing_from_the_index_is_a_mismatch(shard: Path) -> None:
    meta = read_shard_metadata(shard)
    _execute(db_path(shard), "DELETE FROM metadata WHERE key = 'generation'")
    with pytest.raises(IndexMismatchError, match=r"generation is None in the \.db but 1 in"):
        check_index_db(shard, meta)


def test_a_query_takes_its_parameters_and_a_failed_one_names_the_index(shard: Path) -> None:
    between = "SELECT row_id FROM rows WHERE f_id >= ? AND f_id < ?"
    assert query_index_db(shard, between, (2, 4)) == [(2,), (3,)]
    with pytest.raises(CorruptFileError) as info:
        query_index_db(shard, "SELECT no_column FROM rows")
    assert str(info.value) == (
        f"index of {str(shard)!r} cannot be queried (no such column: no_column); {_hint(shard)}"
    )
    assert info.value.path == str(db_path(shard))


def test_the_importer_reads_a_foreign_db_as_it_is_on_disk(hot_journal: Path) -> None:
    """``immutable=True`` (MindSpore's ``.db`` files, which the importer only reads): no lock
    taken and no journal rolled back, so the file is read, and neither file changes."""
    journal = Path(f"{hot_journal}-journal")
    before = (hot_journal.read_bytes(), journal.read_bytes())
    conn = connect_foreign_db(hot_journal, ("rows", "metadata"), immutable=True)
    try:
        assert conn.execute("SELECT count(*) FROM rows").fetchone() == (6,)
    finally:
        conn.close()
    assert (hot_journal.read_bytes(), journal.read_bytes()) == before


def test_an_index_whose_schema_is_not_utf8_is_refused_naming_it(shard: Path) -> None:
    """SQLite quotes the damaged bytes in its message, which Python cannot decode."""
    db = db_path(shard)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema=ON")
        damaged = b"CREATE TABLE rows (row_id, '\xff"
        conn.execute(
            "UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = 'rows'", (damaged,)
        )
    finally:
        conn.close()
    with pytest.raises(CorruptFileError) as info:
        open_index_db(shard)
    assert str(info.value) == (
        f"index {str(db)!r} cannot be opened (its schema is damaged (bytes that are not UTF-8: "
        f"invalid start byte)); {_hint(shard)}"
    )
