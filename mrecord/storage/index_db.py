"""A shard's ``.db`` index (SQLite; tables in ``mrecord.format.index_layout``): write, open, check.

Writing: the ``.db`` is always built under its partial name and published by the
commit, so it is never seen half-written. SQLite's own journal is off while
building: the file is not visible until it is complete and fsync'ed.

Reading: :func:`open_index_db` opens it read-only, :func:`check_index_db` checks
that it belongs to its data file (dataset id, generation, shard, row count).

Every ``sqlite3.Error``, on write and on read, leaves as an mrecord error naming
the file (:class:`~mrecord.errors.IndexWriteError` or
:class:`~mrecord.errors.CorruptFileError`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import CorruptFileError, IndexMismatchError, IndexWriteError, MissingIndexError
from mrecord.format.index_layout import METADATA_TABLE, ROWS_TABLE, index_column
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import Field
from mrecord.storage.failures import sqlite_errno, unreadable_error
from mrecord.storage.naming import db_path
from mrecord.storage.value_spill import ValueSpill

__all__ = [
    "MAX_DB_VALUE",
    "check_index_db",
    "connect_foreign_db",
    "iter_index_db",
    "merge_index_db",
    "open_index_db",
    "query_index_db",
    "read_index_metadata",
    "write_index_db",
]

IndexValues = Sequence[Any] | np.ndarray | ValueSpill
"""One index field's values of a shard's new rows: in memory, or kept on disk by the
writer (:class:`~mrecord.storage.value_spill.ValueSpill`); read by slices of rows."""

_SQL_TYPES = {"string": "TEXT", "bytes": "BLOB"}


def _column_type(field: Field) -> str:
    if field.type in _SQL_TYPES:
        return _SQL_TYPES[field.type]
    return "FLOAT" if field.type.startswith("float") else "INTEGER"


def write_index_db(
    target: Path,
    meta: ShardMetadata,
    first_new_row: int,
    index_values: Mapping[str, IndexValues],
) -> None:
    """Write ``target``: metadata, plus rows ``first_new_row..meta.num_rows`` when indexed.

    A shard without index fields gets an empty ``rows`` table (format 1.2): a row's
    page and slot are in the data file's page directory, and nothing looks rows up
    by value there. When appending, ``target`` is the partial ``.db`` of the new rows
    only; the commit merges it into the committed ``.db`` (:func:`merge_index_db`).

    Built in bulk: SQLite's journal and syncs are off (the file is a partial, invisible
    until the commit renames or merges it, and fsync'ed here first), the rows go in
    with one ``executemany`` in one transaction, and the field indexes are built after
    the rows (one sort, not a B-tree insert per row).
    """
    if target.exists():
        target.unlink()
    try:
        conn = sqlite3.connect(target, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("BEGIN")
            for sql in _create_tables(meta):
                conn.execute(sql)
            if meta.index_fields:
                _insert_rows(conn, meta, first_new_row, index_values)
                for sql in _create_indexes(meta):
                    conn.execute(sql)
            conn.executemany(
                f"INSERT INTO {METADATA_TABLE} (key, value) VALUES (?, ?)",
                _metadata_rows(meta, target),
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise IndexWriteError(
            f"cannot write index {str(target)!r} ({exc}); check free disk space and "
            "permissions, then write again",
            path=str(target),
            errno=sqlite_errno(exc),
        ) from exc
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_tables(meta: ShardMetadata) -> list[str]:
    """The ``CREATE TABLE`` statements (docs/FORMAT.md, *The .db index*)."""
    columns = ["row_id INTEGER PRIMARY KEY", "page INTEGER NOT NULL", "slot INTEGER NOT NULL"]
    columns += [f"{index_column(n)} {_column_type(meta.schema[n])}" for n in meta.index_fields]
    return [
        f"CREATE TABLE {ROWS_TABLE} ({', '.join(columns)})",
        f"CREATE TABLE {METADATA_TABLE} (key TEXT PRIMARY KEY, value TEXT)",
    ]


def _create_indexes(meta: ShardMetadata) -> list[str]:
    """One index per index field, built after the rows are in."""
    return [
        f"CREATE INDEX idx_{name} ON {ROWS_TABLE} ({index_column(name)})"
        for name in meta.index_fields
    ]


_INSERT_ROWS = 1 << 14
"""Rows turned into Python values and inserted at a time (:func:`_insert_rows`)."""


def _insert_rows(
    conn: sqlite3.Connection,
    meta: ShardMetadata,
    first_new_row: int,
    index_values: Mapping[str, IndexValues],
) -> None:
    """Insert (row_id, page, slot, index values...) for rows from ``first_new_row``,
    ``_INSERT_ROWS`` at a time: each row's values are Python objects while SQLite takes
    them (~36 bytes a number), and all of them at once were 1.2 GB for a shard of 10M
    rows: the converter of 8M tabular rows with ``--index label`` peaked at 2.4 GB
    resident and was OOM-killed in a 200 MB memory group."""
    page_rows = meta.page_rows.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(page_rows)[:-1]]).astype(np.int64)
    quoted = ", ".join(["row_id", "page", "slot", *map(index_column, meta.index_fields)])
    marks = ", ".join("?" for _ in range(3 + len(meta.index_fields)))
    sql = f"INSERT INTO {ROWS_TABLE} ({quoted}) VALUES ({marks})"
    fields = [index_values.get(name, ()) for name in meta.index_fields]  # none: no new rows
    for lo in range(first_new_row, meta.num_rows, _INSERT_ROWS):
        hi = min(lo + _INSERT_ROWS, meta.num_rows)
        row_ids = np.arange(lo, hi, dtype=np.int64)
        pages = np.searchsorted(starts, row_ids, side="right") - 1
        cols: list[list[Any]] = [
            row_ids.tolist(),
            pages.tolist(),
            (row_ids - starts[pages]).tolist(),
        ]
        for values in fields:
            part = values[lo - first_new_row : hi - first_new_row]
            cols.append(part.tolist() if isinstance(part, np.ndarray) else list(part))
        conn.executemany(sql, zip(*cols, strict=True))


def _metadata_rows(meta: ShardMetadata, target: Path) -> list[tuple[str, str]]:
    data_file = (
        target.name[: -len(".db.mrecord-partial")]
        if target.name.endswith(".db.mrecord-partial")
        else target.name[: -len(".db")]
    )
    values = {
        "format_version": list(meta.format_version),
        "dataset_id": meta.dataset_id,
        "generation": meta.generation,
        "shard_index": meta.shard_index,
        "num_rows": meta.num_rows,
        "data_file": data_file,
        "schema": meta.schema.to_dict(),
        "index_fields": list(meta.index_fields),
    }
    return [(k, json.dumps(v)) for k, v in values.items()]


def merge_index_db(target: Path, staged: Path, generation: int) -> None:
    """Add the rows and metadata of ``staged`` (an append's new rows) to ``target``.

    One SQLite transaction (rollback journal, ``synchronous=FULL``): a crash leaves
    ``target`` as it was, and SQLite rolls its own journal back on the next open. A
    ``target`` already at ``generation`` was merged by an earlier roll-forward and is
    left alone, so this can run again after any crash.
    """
    try:
        conn = sqlite3.connect(target, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                f"SELECT value FROM {METADATA_TABLE} WHERE key = 'generation'"
            ).fetchone()
            if row is not None and json.loads(row[0]) == generation:
                conn.execute("ROLLBACK")
                return
            if not staged.is_file():
                raise IndexWriteError(
                    f"cannot finish the commit of {str(target)!r}: its new rows "
                    f"{str(staged)!r} are missing; rebuild it with `mrecord reindex`",
                    path=str(target),
                )
            conn.execute("ATTACH DATABASE ? AS staged", (f"{staged}",))
            columns = ", ".join(
                f'"{name}"' for _, name, *_ in conn.execute(f"PRAGMA main.table_info({ROWS_TABLE})")
            )
            conn.execute(
                f"INSERT INTO main.{ROWS_TABLE} ({columns}) "
                f"SELECT {columns} FROM staged.{ROWS_TABLE}"
            )
            conn.execute(
                f"INSERT OR REPLACE INTO main.{METADATA_TABLE} (key, value) "
                f"SELECT key, value FROM staged.{METADATA_TABLE} WHERE key != 'data_file'"
            )
            conn.execute("COMMIT")
            conn.execute("DETACH DATABASE staged")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise IndexWriteError(
            f"cannot add the new rows to index {str(target)!r} ({exc}); nothing of them is in "
            "it (SQLite rolled back); the next open of the dataset finishes the commit",
            path=str(target),
            errno=sqlite_errno(exc),
        ) from exc


# -- reading and checking ----------------------------------------------------------------

MAX_DB_VALUE = 64 << 20
"""Largest single value (string or blob) read from a ``.db``; a larger one is damage."""


def connect_foreign_db(
    path: Path, tables: Sequence[str], *, immutable: bool = False
) -> sqlite3.Connection:
    """Open a SQLite file read-only, refusing what no index writer puts there.

    A ``.db`` is foreign input: a view or trigger in it would run its SQL inside our
    queries (an endless recursive view hangs, ``randomblob`` exhausts memory), so a
    file with any view or trigger, or where one of ``tables`` is not a table, raises
    ``sqlite3.DatabaseError`` saying so (callers wrap ``sqlite3.Error`` in their own
    error type). Values longer than :data:`MAX_DB_VALUE` fail to read (Python >= 3.11).
    """
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    conn = sqlite3.connect(f"file:{path.as_posix()}?{flags}", uri=True, check_same_thread=False)
    try:
        setlimit = getattr(conn, "setlimit", None)  # Python >= 3.11
        if setlimit is not None:
            setlimit(getattr(sqlite3, "SQLITE_LIMIT_LENGTH", 0), MAX_DB_VALUE)
        kinds = conn.execute(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view', 'trigger')"
        ).fetchall()
    except UnicodeDecodeError as exc:
        # SQLite's message about a damaged schema quotes the damaged bytes, and Python
        # fails to decode that message before it can raise the sqlite3 error.
        conn.close()
        raise sqlite3.DatabaseError(
            f"its schema is damaged (bytes that are not UTF-8: {exc.reason})"
        ) from None
    except BaseException:
        conn.close()
        raise
    found = {str(name): str(kind) for name, kind in kinds}
    odd = sorted(f"{kind} {name!r}" for name, kind in found.items() if kind != "table")
    missing = [t for t in tables if found.get(t) != "table"]
    if odd or missing:
        conn.close()
        what = f"it has {', '.join(odd)}" if odd else f"table {missing[0]!r} is missing"
        raise sqlite3.DatabaseError(f"not an index this software writes: {what}")
    return conn


def _rebuild_hint(data_file: Path) -> str:
    return f"rebuild it with `mrecord reindex {data_file}`"


def _check_readable(path: Path) -> None:
    """UnreadableFileError when ``path`` may not be read (SQLite would only say "unable to
    open database file", which reads as damage)."""
    try:
        os.close(os.open(path, os.O_RDONLY))
    except PermissionError as exc:
        raise unreadable_error(exc, "index", path) from None


def open_index_db(data_file: Path) -> sqlite3.Connection:
    """Open a shard's ``.db`` read-only; MissingIndexError when it is not there."""
    path = db_path(data_file)
    if not path.is_file():
        raise MissingIndexError(f"index {str(path)!r} is missing; {_rebuild_hint(data_file)}")
    _check_readable(path)
    try:
        return connect_foreign_db(path, (ROWS_TABLE, METADATA_TABLE))
    except sqlite3.Error as exc:
        raise CorruptFileError(
            f"index {str(path)!r} cannot be opened ({exc}); {_rebuild_hint(data_file)}",
            path=str(path),
        ) from exc


def read_index_metadata(data_file: Path) -> dict[str, Any]:
    """The metadata table of a shard's ``.db`` as a dict."""
    conn = open_index_db(data_file)
    path = db_path(data_file)
    try:
        rows = conn.execute(f"SELECT key, value FROM {METADATA_TABLE}").fetchall()
        return {str(k): json.loads(v) for k, v in rows}
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise CorruptFileError(
            f"index {str(path)!r} is damaged ({exc}); {_rebuild_hint(data_file)}", path=str(path)
        ) from exc
    finally:
        conn.close()


def check_index_db(data_file: Path, meta: ShardMetadata) -> None:
    """Raise unless the ``.db`` matches the data file's dataset id, generation and row count."""
    found = read_index_metadata(data_file)
    expected = {
        "dataset_id": meta.dataset_id,
        "generation": meta.generation,
        "shard_index": meta.shard_index,
        "num_rows": meta.num_rows,
    }
    for key, value in expected.items():
        if found.get(key) != value:
            raise IndexMismatchError(
                f"index {str(db_path(data_file))!r} does not match {str(data_file)!r}: "
                f"{key} is {found.get(key)!r} in the .db but {value!r} in the data file; "
                f"{_rebuild_hint(data_file)}"
            )


def _query_error(data_file: Path, exc: sqlite3.Error) -> CorruptFileError:
    """A failed query of ``data_file``'s ``.db``: the index named, and how to rebuild it."""
    return CorruptFileError(
        f"index of {str(data_file)!r} cannot be queried ({exc}); {_rebuild_hint(data_file)}",
        path=str(db_path(data_file)),
    )


def iter_index_db(
    data_file: Path, sql: str, params: tuple[Any, ...] = (), rows: int = _INSERT_ROWS
) -> Iterator[list[tuple[Any, ...]]]:
    """:func:`query_index_db`'s rows ``rows`` at a time (``fetchmany``), for a query whose
    answer is a row of the ``.db`` per row of the shard: all of them at once, as Python
    tuples, were ~1.5 GB for a shard of 10M indexed rows (``mrecord verify`` was killed in
    a 200 MB memory group)."""
    conn = open_index_db(data_file)
    try:
        cursor = conn.execute(sql, params)
        while True:
            got: list[tuple[Any, ...]] = cursor.fetchmany(rows)
            if not got:
                return
            yield got
    except sqlite3.Error as exc:
        raise _query_error(data_file, exc) from exc
    finally:
        conn.close()


def query_index_db(
    data_file: Path, sql: str, params: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """Run one read-only query on ``data_file``'s ``.db``; sqlite errors become
    :class:`CorruptFileError` naming the index (MissingIndexError when it is missing)."""
    conn = open_index_db(data_file)
    try:
        rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
        return rows
    except sqlite3.Error as exc:
        raise _query_error(data_file, exc) from exc
    finally:
        conn.close()
