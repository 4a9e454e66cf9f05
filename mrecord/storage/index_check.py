"""Checking that a shard's ``.db`` exists and belongs to its data file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mrecord.errors import CorruptFileError, IndexMismatchError, MissingIndexError
from mrecord.format.index_layout import DB_SUFFIX, METADATA_TABLE
from mrecord.format.metadata import ShardMetadata

__all__ = ["check_index_db", "db_path", "open_index_db", "read_index_metadata"]


def db_path(data_file: Path) -> Path:
    """The ``.db`` that belongs to ``data_file``."""
    return data_file.with_name(data_file.name + DB_SUFFIX)


def _rebuild_hint(data_file: Path) -> str:
    return f"rebuild it with `mrecord reindex {data_file}`"


def open_index_db(data_file: Path) -> sqlite3.Connection:
    """Open a shard's ``.db`` read-only; MissingIndexError when it is not there."""
    path = db_path(data_file)
    if not path.is_file():
        raise MissingIndexError(f"index {str(path)!r} is missing; {_rebuild_hint(data_file)}")
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
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
