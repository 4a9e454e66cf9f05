"""Hostile files: lying metadata and chunks with valid checksums are refused, not obeyed."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard

from mrecord.errors import CorruptFileError, ForeignShardError, MrecordError, SchemaError
from mrecord.format.compression import CODEC_IDS
from mrecord.maintenance.verify import verify_dataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import ShardFile
from mrecord.writer.file_writer import FileWriter
from reliability.hostile import replace_chunk, rewrite_metadata

PACKAGE = Path(__file__).resolve().parents[2] / "mrecord"
SCHEMA = {
    "label": {"type": "int32"},
    "image": {"type": "uint8", "shape": [4, 4]},
    "blob": {"type": "bytes", "compression": "zstd"},
    "boxes": {"type": "float32", "shape": [-1, 4]},
}


def _dataset(tmp_path: Path, shard_num: int = 2) -> list[Path]:
    writer = FileWriter(tmp_path / "d", shard_num=shard_num)
    writer.add_schema(SCHEMA)
    writer.add_index(["label"])
    writer.write_raw_data(
        [
            {
                "label": i,
                "image": np.full((4, 4), i, dtype=np.uint8),
                "blob": b"abc" * 50,
                "boxes": np.ones((i % 3, 4), dtype=np.float32),
            }
            for i in range(6)
        ]
    )
    writer.commit()
    return writer.files


def _refused(first: Path) -> MrecordError:
    """Opening and reading everything must fail with an MrecordError; return it."""
    with pytest.raises(MrecordError) as info, DatasetReader.open(first, verify="always") as reader:
        reader.read_rows(np.arange(reader.num_rows))
    return info.value


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/etc/passwd", "..", ".", "", "a/b", "a\\b", "x\x00y", 7]
)
def test_sibling_names_must_be_basenames(tmp_path: Path, name: Any) -> None:
    """A shard naming a sibling by a path (or not a name at all) is refused on open."""
    files = _dataset(tmp_path)

    def change(doc: dict[str, Any]) -> None:
        doc["shard_names"][1] = name

    rewrite_metadata(files[0], change)
    err = _refused(files[0])
    assert isinstance(err, (CorruptFileError, ForeignShardError))
    assert str(files[0]) in str(err)
    assert not verify_dataset(files[0]).ok


def test_dataset_name_must_be_a_basename(tmp_path: Path) -> None:
    """The dataset name (which names the lock and journal files) cannot be a path."""
    files = _dataset(tmp_path, shard_num=1)
    rewrite_metadata(files[0], lambda doc: doc.update(dataset_name="../../tmp/evil"))
    assert isinstance(_refused(files[0]), CorruptFileError)


def test_huge_declared_decompressed_size_is_refused_before_allocating(tmp_path: Path) -> None:
    """A zstd chunk declaring 10**12 raw bytes is refused at once (no terabyte allocation)."""
    files = _dataset(tmp_path, shard_num=1)
    frame = zstandard.ZstdCompressor().compress(b"\0" * 1000)
    replace_chunk(files[0], 0, 2, frame, raw_length=10**12, codec=CODEC_IDS["zstd"])
    err = _refused(files[0])
    assert isinstance(err, CorruptFileError) and "page 0" in str(err)


def test_zstd_bomb_beyond_the_chunk_limit_is_refused(tmp_path: Path) -> None:
    """A small frame that inflates to 64 MiB, honestly declared, is refused when it exceeds
    the per-chunk limit; a frame whose content size disagrees with the metadata is refused."""
    files = _dataset(tmp_path, shard_num=1)
    bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * (64 << 20))
    assert len(bomb) < 64 << 10
    replace_chunk(files[0], 0, 2, bomb, raw_length=64 << 20, codec=CODEC_IDS["zstd"])
    with ShardFile(files[0], max_chunk_bytes=1 << 20) as shard, pytest.raises(CorruptFileError):
        shard.raw_chunk(0, 2)
    replace_chunk(files[0], 0, 2, bomb, raw_length=450, codec=CODEC_IDS["zstd"])
    assert isinstance(_refused(files[0]), CorruptFileError)
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * (1 << 20))
    replace_chunk(files[0], 0, 2, no_size, raw_length=450, codec=CODEC_IDS["zstd"])
    assert isinstance(_refused(files[0]), CorruptFileError)


@pytest.mark.parametrize("shape", [[10**6, 10**6], [10**12], [2**62, 4]])
def test_absurd_fixed_shape_is_refused(tmp_path: Path, shape: list[int]) -> None:
    """A schema in the metadata declaring 10**12 elements per row: an error, not an allocation."""
    files = _dataset(tmp_path, shard_num=1)

    def change(doc: dict[str, Any]) -> None:
        doc["schema"][1]["shape"] = shape

    rewrite_metadata(files[0], change)
    assert isinstance(_refused(files[0]), CorruptFileError)


def test_absurd_variable_shape_is_refused(tmp_path: Path) -> None:
    """A variable-shape chunk whose stored shapes claim 10**12 elements is refused."""
    files = _dataset(tmp_path, shard_num=1)
    n = 6
    offsets = np.zeros(n + 1, dtype="<u8")
    shapes = np.zeros((n, 2), dtype="<u8")
    shapes[:, 1] = 4
    shapes[0, 0] = 10**12 // 4
    raw = offsets.tobytes() + shapes.tobytes()
    replace_chunk(files[0], 0, 3, raw, raw_length=len(raw), codec=CODEC_IDS["none"])
    assert isinstance(_refused(files[0]), CorruptFileError)


def test_absurd_row_count_is_refused(tmp_path: Path) -> None:
    """num_rows and page_rows that disagree (or claim 2**32 rows) are refused on open."""
    files = _dataset(tmp_path, shard_num=1)
    rewrite_metadata(files[0], lambda doc: doc.update(num_rows=2**40))
    assert isinstance(_refused(files[0]), CorruptFileError)


@pytest.mark.parametrize(
    "field_name", ['x"; DROP TABLE rows; --', "label; DELETE FROM rows", "a b", "é"]
)
def test_field_names_reaching_sql_are_validated(tmp_path: Path, field_name: str) -> None:
    """Field names are checked before any SQL: in add_index, add_schema and stored metadata."""
    writer = FileWriter(tmp_path / "w")
    with pytest.raises(SchemaError):
        writer.add_schema({field_name: {"type": "int32"}})
    writer.add_schema({"label": {"type": "int32"}})
    with pytest.raises(SchemaError):
        writer.add_index([field_name])
    writer.abort()
    files = _dataset(tmp_path, shard_num=1)

    def rename(doc: dict[str, Any]) -> None:
        doc["schema"][0]["name"] = field_name
        doc["index_fields"] = [field_name]

    rewrite_metadata(files[0], rename)
    assert isinstance(_refused(files[0]), CorruptFileError)


def test_index_values_are_parameters_not_sql(tmp_path: Path) -> None:
    """String values full of SQL are stored as values; the .db stays whole."""
    evil = ["'); DROP TABLE rows; --", '"; DELETE FROM metadata; --', "normal"]
    writer = FileWriter(tmp_path / "d")
    writer.add_schema({"name": {"type": "string"}})
    writer.add_index(["name"])
    writer.write_raw_data([{"name": v} for v in evil])
    writer.commit()
    conn = sqlite3.connect(tmp_path / "d.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM rows").fetchone() == (3,)
        assert conn.execute("SELECT COUNT(*) FROM metadata").fetchone()[0] > 0
    finally:
        conn.close()
    assert verify_dataset(tmp_path / "d").ok


_STORAGE = ("format", "writer", "reader", "convert")


def test_no_pickle_in_storage_code() -> None:
    """Nothing that reads or writes files uses pickle; every np.load refuses pickles."""
    for sub in _STORAGE:
        for path in (PACKAGE / sub).rglob("*.py"):
            text = path.read_text()
            assert not re.search(r"^\s*(import|from)\s+(c?pickle|dill|shelve)\b", text, re.M), path
            assert "pickle.load" not in text and "marshal.load" not in text, path
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for call in re.findall(r"np\.load\([^)]*\)", text):
            assert "allow_pickle=False" in call, (path, call)
        assert "allow_pickle=True" not in text, path
