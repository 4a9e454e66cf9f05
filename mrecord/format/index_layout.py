"""The tables of a shard's ``.db`` index (SQLite). Names only; SQL lives in writer/reader.

::

    rows(row_id INTEGER PRIMARY KEY,   -- row number inside this shard, from 0
         page INTEGER NOT NULL,         -- page holding the row
         slot INTEGER NOT NULL,         -- position of the row inside its page
         f_<index field> ...)           -- one column per add_index field, each indexed
    metadata(key TEXT PRIMARY KEY, value TEXT)   -- JSON-encoded values, keys below

The ``.db`` belongs to its data file when ``dataset_id``, ``generation``,
``shard_index`` and ``num_rows`` agree with the data file's metadata.
"""

from __future__ import annotations

__all__ = ["DB_SUFFIX", "METADATA_KEYS", "METADATA_TABLE", "ROWS_TABLE", "index_column"]

DB_SUFFIX = ".db"
ROWS_TABLE = "rows"
METADATA_TABLE = "metadata"
METADATA_KEYS = (
    "format_version",
    "dataset_id",
    "generation",
    "shard_index",
    "num_rows",
    "data_file",
    "schema",
    "index_fields",
)


def index_column(field: str) -> str:
    """The ``rows`` column holding index field ``field``, quoted for SQL.

    The ``f_`` prefix keeps a field named ``row_id``, ``page`` or ``slot`` from colliding
    with the table's own columns; field names are ``[0-9A-Za-z_]+``, so quoting is safe.
    """
    return f'"f_{field}"'
