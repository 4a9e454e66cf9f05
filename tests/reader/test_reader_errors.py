"""Reader errors: missing or foreign .db files, damaged and truncated data files."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mrecord.errors import (
    ChecksumError,
    CorruptFileError,
    DatasetNotFoundError,
    ForeignShardError,
    IndexMismatchError,
    MissingIndexError,
)
from mrecord.format.metadata import CHUNK_DTYPE
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import ShardFile
from mrecord.writer.file_writer import FileWriter

SCHEMA = {"x": {"type": "int64"}, "s": {"type": "string", "compression": "zstd"}}


def _write(path: Path, n: int = 300, shard_num: int = 2) -> None:
    writer = FileWriter(path, shard_num=shard_num, overwrite=True)
    writer.add_schema(SCHEMA)
    writer.set_page_size(1024)
    writer.write_raw_data([{"x": i, "s": f"value {i} " * 3} for i in range(n)])
    writer.commit()


def _append(path: Path, n: int = 10) -> None:
    writer = FileWriter.open_for_append(path)
    writer.write_raw_data([{"x": -i, "s": "appended"} for i in range(n)])
    writer.commit()


def test_missing_db_says_how_to_rebuild(tmp_path: Path) -> None:
    """A shard without its .db: MissingIndexError naming the .db and `mrecord reindex FILE`."""
    _write(tmp_path / "d")
    (tmp_path / "d1.db").unlink()
    with pytest.raises(MissingIndexError) as info:
        DatasetReader.open(tmp_path / "d0")
    message = str(info.value)
    assert "d1.db" in message and f"mrecord reindex {tmp_path / 'd1'}" in message
    assert isinstance(info.value, FileNotFoundError)


def test_db_of_another_generation_is_refused(tmp_path: Path) -> None:
    """The .db of generation 1 next to a generation-2 data file: IndexMismatchError."""
    _write(tmp_path / "d")
    shutil.copyfile(tmp_path / "d0.db", tmp_path / "old.db")
    _append(tmp_path / "d0")
    shutil.copyfile(tmp_path / "old.db", tmp_path / "d0.db")
    with pytest.raises(IndexMismatchError) as info:
        DatasetReader.open(tmp_path / "d1")
    message = str(info.value)
    assert "d0.db" in message and "generation" in message and "mrecord reindex" in message


def test_db_of_another_dataset_is_refused(tmp_path: Path) -> None:
    """A .db copied from another dataset with the same layout: IndexMismatchError."""
    _write(tmp_path / "d")
    (tmp_path / "other").mkdir()
    _write(tmp_path / "other" / "d")
    shutil.copyfile(tmp_path / "other" / "d1.db", tmp_path / "d1.db")
    with pytest.raises(IndexMismatchError, match="dataset_id"):
        DatasetReader.open(tmp_path / "d0")


def test_shard_of_another_dataset_is_refused(tmp_path: Path) -> None:
    """A sibling replaced by the same-named shard of another dataset: ForeignShardError."""
    _write(tmp_path / "d")
    (tmp_path / "other").mkdir()
    _write(tmp_path / "other" / "d")
    for name in ("d1", "d1.db"):
        shutil.copyfile(tmp_path / "other" / name, tmp_path / name)
    with pytest.raises(ForeignShardError, match="d1"):
        DatasetReader.open(tmp_path / "d0")


def test_missing_sibling_is_named(tmp_path: Path) -> None:
    """A sibling data file that is gone: DatasetNotFoundError naming it."""
    _write(tmp_path / "d")
    (tmp_path / "d1").unlink()
    with pytest.raises(DatasetNotFoundError, match="d1"):
        DatasetReader.open(tmp_path / "d0")


def _chunk(path: Path, page: int, col: int) -> np.void:
    with ShardFile(path) as shard:
        entry = shard.meta.chunks[page, col].copy()
        assert isinstance(entry, np.void)
        return entry


def test_damaged_chunk_names_file_page_and_offset(tmp_path: Path) -> None:
    """A flipped byte in page 2's chunk: ChecksumError with the file, page and byte offset."""
    _write(tmp_path / "d", shard_num=1)
    rec = _chunk(tmp_path / "d", 2, 0)
    offset = int(rec["offset"]) + 3
    data = bytearray((tmp_path / "d").read_bytes())
    data[offset] ^= 0x40
    (tmp_path / "d").write_bytes(bytes(data))
    with DatasetReader.open(tmp_path / "d") as reader:
        reader.read_rows([0])  # page 0 is intact
        with pytest.raises(ChecksumError) as info:
            reader.read_rows(np.arange(reader.num_rows))
    err = info.value
    assert (err.page, err.offset, err.path) == (2, int(rec["offset"]), str(tmp_path / "d"))
    assert "page 2" in str(err) and str(int(rec["offset"])) in str(err)


@pytest.mark.parametrize("keep", [0, 10, 63, 64, 200, -1, -32, -33])
def test_truncated_data_file_is_corrupt(tmp_path: Path, keep: int) -> None:
    """A data file cut anywhere raises CorruptFileError naming the file, never a bare error."""
    _write(tmp_path / "d", shard_num=1)
    data = (tmp_path / "d").read_bytes()
    (tmp_path / "d").write_bytes(data[:keep])
    with pytest.raises(CorruptFileError) as info:
        DatasetReader.open(tmp_path / "d")
    assert str(tmp_path / "d") in str(info.value)


def test_chunk_record_layout_is_32_bytes() -> None:
    """The page directory record documented in metadata.py is 32 bytes."""
    assert CHUNK_DTYPE.itemsize == 32
