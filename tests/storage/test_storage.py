"""storage/: one place for on-disk names, the .db module's error wrapping, one open procedure."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrecord import DatasetReader, FileWriter
from mrecord.errors import (
    ChunkFormatError,
    CorruptFileError,
    DecompressionError,
    FormatError,
    IndexWriteError,
    LayoutError,
    MetadataError,
    MrecordError,
)
from mrecord.storage.index_db import write_index_db
from mrecord.storage.naming import db_path, partial_path, shard_file_names, sibling_paths
from mrecord.storage.shard import read_shard_metadata
from tests.factory import MakeDataset


def _write(make: MakeDataset, path: Path, shards: int, rows: int) -> None:
    make(rows, shards=shards, folder=path.parent, name=path.name)


def test_the_writer_names_its_files_as_naming_says(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    path = tmp_path / "d.mrecord"
    _write(make_dataset, path, 3, 10)
    names = shard_file_names(path, 3)
    assert [p.name for p in names] == ["d.mrecord0", "d.mrecord1", "d.mrecord2"]
    assert all(p.is_file() and db_path(p).is_file() for p in names)
    meta = read_shard_metadata(names[1])
    assert sibling_paths(names[1], meta.shard_names) == names
    assert not any(partial_path(p).exists() for p in names)


def test_a_sqlite_failure_on_write_is_an_mrecord_error_naming_the_file(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    path = tmp_path / "d.mrecord"
    _write(make_dataset, path, 1, 5)
    meta = read_shard_metadata(path)
    not_a_folder = tmp_path / "plain_file"
    not_a_folder.write_bytes(b"a file where the .db's folder should be")
    target = not_a_folder / "out.db"  # SQLite cannot open it
    with pytest.raises(IndexWriteError) as info:
        write_index_db(target, meta, 0, {})
    assert str(target) in str(info.value)
    assert isinstance(info.value, OSError)


@pytest.mark.parametrize(
    "error", [FormatError, LayoutError, MetadataError, ChunkFormatError, DecompressionError]
)
def test_format_errors_are_in_the_tree_and_keep_their_builtin(error: type[Exception]) -> None:
    assert issubclass(error, MrecordError)
    assert issubclass(error, ValueError)


def test_append_and_read_refuse_the_same_foreign_sibling(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """One open procedure: a sibling from another dataset stops both reader and appender."""
    _write(make_dataset, tmp_path / "a.mrecord", 2, 6)
    _write(make_dataset, tmp_path / "b.mrecord", 2, 6)
    (tmp_path / "b.mrecord1").replace(tmp_path / "a.mrecord1")
    (tmp_path / "b.mrecord1.db").replace(tmp_path / "a.mrecord1.db")
    with pytest.raises(MrecordError) as read_error:
        DatasetReader.open(tmp_path / "a.mrecord0")
    with pytest.raises(MrecordError) as append_error:
        FileWriter.open_for_append(tmp_path / "a.mrecord0")
    assert type(read_error.value) is type(append_error.value)
    assert not isinstance(read_error.value, CorruptFileError)


def test_a_damaged_index_query_is_a_corrupt_file_error_naming_it(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    from mrecord.storage.index_db import query_index_db

    path = tmp_path / "d.mrecord"
    _write(make_dataset, path, 1, 5)
    assert query_index_db(path, "SELECT value FROM metadata WHERE key = 'num_rows'") == [("5",)]
    with pytest.raises(CorruptFileError, match=r"d\.mrecord"):
        query_index_db(path, "SELECT no_such_column FROM rows")
