"""Files that are each intact but do not belong where they lie (issue 27, D4-D7): the reader
refuses them with a typed error, and ``verify_dataset`` reports what the reader refuses.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, verify_dataset
from mrecord.errors import (
    ChunkFormatError,
    DatasetNotFoundError,
    ForeignShardError,
    MrecordError,
    NotAnMrecordFileError,
    UnreadableFileError,
)
from mrecord.format.chunks import decode_var
from mrecord.format.compression import checksum
from mrecord.format.layout import TRAILER_SIZE, Trailer
from mrecord.format.schema import parse_schema
from mrecord.storage.shard import ShardFile

SCHEMA = {"id": {"type": "int64"}, "payload": {"type": "bytes"}}


def _create(folder: Path, shards: int = 3, schema: dict[str, Any] | None = None,
            rows: list[dict[str, Any]] | None = None) -> list[Path]:
    with FileWriter(folder / "ds", shard_num=shards) as writer:
        writer.add_schema(schema or SCHEMA)
        writer.add_index(["id"])
        writer.write_raw_data(rows or [{"id": i, "payload": b"p%d" % i} for i in range(30)])
    return [folder / f"ds{i}" for i in range(shards)] if shards > 1 else [folder / "ds"]


def _rewrite_metadata(path: Path, **changes: Any) -> None:
    """Give ``path`` new metadata (a new trailer after it, checksums right): the file is
    intact to every check of one file alone."""
    with ShardFile(path, verify="never") as shard:
        meta = dataclasses.replace(shard.meta, **changes)
    body = meta.encode()
    with open(path, "ab") as fh:
        offset = fh.tell()
        fh.write(body)
        fh.write(Trailer(offset, len(body), checksum(body)).encode())
    assert path.stat().st_size == offset + len(body) + TRAILER_SIZE


# -- D4: a shard copied over its sibling ----------------------------------------------------


def test_a_shard_copied_over_its_sibling_is_refused(tmp_path: Path) -> None:
    files = _create(tmp_path)
    shutil.copyfile(files[0], files[1])
    shutil.copyfile(f"{files[0]}.db", f"{files[1]}.db")
    for name in files:
        with pytest.raises(ForeignShardError, match="ds1"):
            DatasetReader.open(name)
    with pytest.raises(ForeignShardError):
        MindPage(str(files[2]))
    report = verify_dataset(files[0])
    assert not report.ok and any("ds1" in p and "shard" in p for p in report.problems)


def test_the_same_shard_twice_in_a_list_is_refused(tmp_path: Path) -> None:
    files = _create(tmp_path)
    shutil.copyfile(files[0], tmp_path / "copy")
    shutil.copyfile(f"{files[0]}.db", tmp_path / "copy.db")
    with pytest.raises(ForeignShardError, match="copy"):
        DatasetReader.open([files[0], tmp_path / "copy"])
    assert not verify_dataset([files[0], tmp_path / "copy"]).ok


# -- D5: verify checks what the reader checks -----------------------------------------------


def test_verify_reports_a_sibling_with_another_schema(tmp_path: Path) -> None:
    files = _create(tmp_path)
    with ShardFile(files[1], verify="never") as shard:
        schema = shard.meta.schema
    _rewrite_metadata(files[1], schema=schema.with_compression("zstd", ["payload"]))
    with pytest.raises(ForeignShardError, match="schema"):
        DatasetReader.open(files[0])
    report = verify_dataset(files[0])
    assert not report.ok and any("schema" in p for p in report.problems), report.problems


def test_verify_reports_a_sibling_that_names_other_siblings(tmp_path: Path) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[2], shard_names=("ds0", "ds1", "dsX"))
    with pytest.raises(ForeignShardError):
        DatasetReader.open(files[0])
    assert not verify_dataset(files[0]).ok


# -- D6: a zero dimension does not hide an absurd one ---------------------------------------


def _var_chunk(shape: tuple[int, ...]) -> bytes:
    """One row of an int16 [-1, -1] value with ``shape`` and no data bytes."""
    return np.array([0, 0, *shape], dtype="<u8").tobytes()


@pytest.mark.parametrize("shape", [(0, 2**64 - 1), (2**63, 0), (0, 2**40, 2**40)])
def test_an_absurd_dimension_beside_a_zero_is_a_format_error(shape: tuple[int, ...]) -> None:
    field = parse_schema({"v": {"type": "int16", "shape": [-1] * len(shape)}})["v"]
    with pytest.raises(ChunkFormatError, match="absurdly large"):
        decode_var(field, _var_chunk(shape), 1)


def test_an_empty_value_with_small_dimensions_is_fine() -> None:
    field = parse_schema({"v": {"type": "int16", "shape": [-1, -1]}})["v"]
    head = decode_var(field, _var_chunk((0, 7)), 1)
    assert head.shapes_list == [(0, 7)]


def test_a_file_with_an_absurd_zero_size_shape_is_refused(tmp_path: Path) -> None:
    schema = {"id": {"type": "int64"}, "v": {"type": "int16", "shape": [-1, -1]}}
    files = _create(tmp_path, 1, schema, [{"id": 0, "v": np.zeros((0, 5), dtype=np.int16)}])
    with ShardFile(files[0], verify="never") as shard:
        chunks = shard.meta.chunks.copy()
        col = shard.field_index("v")
    entry = chunks[0, col]
    start = int(entry["offset"])
    data = bytearray(files[0].read_bytes())
    data[start + 24 : start + 32] = (2**64 - 1).to_bytes(8, "little")  # shape (0, 5) -> (0, big)
    chunks[0, col]["crc32"] = checksum(bytes(data[start : start + int(entry["length"])]))
    files[0].write_bytes(bytes(data))
    _rewrite_metadata(files[0], chunks=chunks)
    with (
        DatasetReader.open(files[0], verify="always") as reader,
        pytest.raises(MrecordError, match="absurdly large"),
    ):
        reader.read_rows([0])
    report = verify_dataset(files[0])
    assert not report.ok and any("absurdly large" in p for p in report.problems)


# -- D7: what stands where a shard belongs is checked before it is opened -------------------

_OPEN_IN_CHILD = """
import sys
from mrecord import DatasetReader
from mrecord.errors import MrecordError
try:
    DatasetReader.open(sys.argv[1])
except MrecordError as exc:
    print(type(exc).__name__, exc)
"""


def test_a_fifo_where_a_sibling_belongs_is_refused(tmp_path: Path) -> None:
    files = _create(tmp_path)
    files[1].unlink()
    os.mkfifo(files[1])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_IN_CHILD, str(files[0])],
            capture_output=True, text=True, timeout=60, env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("DatasetReader.open blocked on a FIFO")
    assert out.stdout.startswith("NotAnMrecordFileError") and "ds1" in out.stdout, out
    assert not verify_dataset(files[0]).ok


def test_a_symlink_loop_where_a_sibling_belongs_is_refused(tmp_path: Path) -> None:
    files = _create(tmp_path)
    files[1].unlink()
    os.symlink(files[1].name, files[1])
    with pytest.raises(DatasetNotFoundError, match="ds1") as info:
        DatasetReader.open(files[0])
    assert "symbolic link" in str(info.value)
    assert not verify_dataset(files[0]).ok


def test_an_unreadable_shard_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path)
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == files[1]:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    # Reading (not writing) is refused: UnreadableFileError (issue 26.10), a PermissionError
    # that says to check the permissions and is never reported as damage.
    with pytest.raises(UnreadableFileError, match="ds1") as info:
        DatasetReader.open(files[0])
    assert info.value.errno == errno.EACCES and "permissions" in str(info.value)
    assert not verify_dataset(files[0]).ok


def test_a_folder_where_a_shard_belongs_is_not_found(tmp_path: Path) -> None:
    files = _create(tmp_path)
    files[1].unlink()
    files[1].mkdir()
    with pytest.raises(DatasetNotFoundError, match="folder"):
        DatasetReader.open(files[0])
    with pytest.raises(NotAnMrecordFileError):
        ShardFile(tmp_path / "ds0.db")
