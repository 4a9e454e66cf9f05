"""Failures of the machine (disk full, read-only, I/O error, folders that move): typed errors
that keep errno and name the file, the operation and the dataset's state; nothing left behind.

The disk-full and read-only tests mount a small tmpfs (root only: they are skipped, saying
so, for other users; CI runs as root).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mrecord import DatasetReader, FileWriter, reindex, verify_dataset
from mrecord.cli._errors import EXIT_STORAGE
from mrecord.cli.main import cli
from mrecord.errors import (
    DiskFullError,
    StorageError,
    StoragePermissionError,
    WriterStateError,
)
from mrecord.storage import shard_output
from mrecord.storage.failures import storage_error

ROW_BYTES = 10 * 1024
SCHEMA = {"id": {"type": "int64"}, "payload": {"type": "bytes"}}
TEMP_SUFFIXES = (".mrecord-partial", ".mrecord-journal", ".db-journal")


def _rows(start: int, n: int) -> dict[str, object]:
    rng = np.random.default_rng(start)  # incompressible, derived from the ids
    return {
        "id": np.arange(start, start + n),
        "payload": [rng.bytes(ROW_BYTES) for _ in range(n)],
    }


def _check(path: Path, n: int) -> None:
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == n
        ids = np.sort(np.asarray(reader.read_rows(np.arange(n)).columns["id"]))
    assert ids.tolist() == list(range(n))
    assert verify_dataset(path).ok


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIXES)]


def _fill(folder: Path, kib: int) -> Path:
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        fh.write(b"\xff" * (kib << 10))
    return filler


def _assert_disk_full(exc: DiskFullError, folder: Path, state: str) -> None:
    assert isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    text = str(exc)
    assert str(folder) in text and "ENOSPC" in text and "free space" in text, text
    assert state in text, text


# Pre-fill levels (KiB of the 8 MiB) so that the first commit (2 MiB in 2 shards) and the
# append (1.5 MiB) run out of space at many different points: while pages are written,
# at the last page and metadata, in the .db, at the journal, at the free-space check.
_LEVELS = [0, 1024, 2048, 3072, 3584, 4096, 4608, 5120, 5632, 6144, 6656, 7168, 7680]


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
@pytest.mark.parametrize("fill_kib", _LEVELS)
def test_disk_full_at_many_fill_levels(
    small_fs: Path, fill_kib: int, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at each fill level, pages written buffered (a small dataset's way) or
    with O_DIRECT from the first byte (a large one's): a typed error, nothing visible,
    the last commit intact."""
    if direct:
        monkeypatch.setattr(shard_output, "DIRECT_AFTER", 0)
    path = small_fs / "d"
    filler = _fill(small_fs, fill_kib)
    writer = FileWriter(path, shard_num=2)  # no with block: failures must clean up anyway
    writer.add_schema(SCHEMA)
    writer.add_index(["id"])
    writer.set_page_size(64 << 10)
    try:
        for start in range(0, 200, 50):
            writer.write_raw_data(_rows(start, 50))
        writer.commit()
        created = True
    except DiskFullError as exc:
        _assert_disk_full(exc, small_fs, "nothing of this commit is visible")
        assert sorted(p.name for p in small_fs.iterdir()) == ["d.mrecord-lock", "filler"]
        with pytest.raises(WriterStateError, match="aborted after DiskFullError"):
            writer.write_raw_data(_rows(0, 1))
        created = False
    if created:
        _check(small_fs / "d0", 200)
        appender = FileWriter.open_for_append(small_fs / "d0")
        try:
            appender.write_raw_data(_rows(200, 100))
            appender.write_raw_data(_rows(300, 50))
            appender.commit()
            total = 350
        except DiskFullError as exc:
            _assert_disk_full(exc, small_fs, "the last committed generation 1 is intact")
            assert not _temps(small_fs)
            with pytest.raises(WriterStateError, match="aborted"):
                appender.commit()
            total = 200
        _check(small_fs / "d0", total)
    filler.unlink()  # with space again, the dataset takes more rows
    if not created:
        return
    with FileWriter.open_for_append(small_fs / "d0") as again:
        again.write_raw_data(_rows(total, 10))
    _check(small_fs / "d0", total + 10)


def _remount_ro(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)


def test_read_only_file_system(small_fs: Path) -> None:
    path = small_fs / "d"
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA)
        writer.add_index(["id"])
        writer.write_raw_data(_rows(0, 20))
    _remount_ro(small_fs)
    with pytest.raises(StoragePermissionError) as info:
        FileWriter.open_for_append(path)
    assert info.value.errno == errno.EROFS and isinstance(info.value, PermissionError)
    assert "read-only" in str(info.value) and str(small_fs) in str(info.value)
    with pytest.raises(StoragePermissionError, match="read-only"):
        FileWriter(small_fs / "other")
    with pytest.raises(StoragePermissionError, match="EROFS"):
        reindex(path)
    _check(path, 20)  # reading is unaffected
    result = CliRunner().invoke(cli, ["reindex", str(path)], catch_exceptions=False)
    assert result.exit_code == EXIT_STORAGE, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "EROFS" in err and "read-only" in err, err


def test_cli_convert_to_a_full_disk(small_fs: Path, tmp_path: Path) -> None:
    src = tmp_path / "a.npz"
    np.savez(src, x=np.random.default_rng(0).integers(0, 255, (3000, 4096), dtype=np.uint8))
    result = CliRunner().invoke(
        cli, ["convert", "npz", str(src), str(small_fs / "c.mrecord")], catch_exceptions=False
    )
    assert result.exit_code == EXIT_STORAGE, result.output
    err = result.stderr.strip()
    assert "No space left on device" in err and "nothing of this commit is visible" in err, err
    assert sorted(p.name for p in small_fs.iterdir()) == ["c.mrecord.mrecord-lock"]


def _dataset(folder: Path, rows: int = 30) -> Path:
    with FileWriter(folder / "d", shard_num=2) as writer:
        writer.add_schema(SCHEMA)
        writer.write_raw_data(_rows(0, rows))
    return folder / "d0"


@pytest.mark.parametrize(
    ("code", "kind", "words"),
    [
        (errno.EIO, StorageError, "I/O error"),
        (errno.EDQUOT, DiskFullError, "quota"),
        (errno.EACCES, StoragePermissionError, "permissions"),
    ],
)
def test_a_failed_fsync_aborts_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, kind: type[StorageError], words: str
) -> None:
    """EIO, EDQUOT, EACCES from the kernel at the data fsync: typed, named, cleaned up."""
    first = _dataset(tmp_path)
    appender = FileWriter.open_for_append(first)
    appender.write_raw_data(_rows(30, 10))

    def failing_fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(kind) as info:
        appender.commit()
    monkeypatch.undo()
    assert info.value.errno == code and words in str(info.value)
    assert "the last committed generation 1 is intact" in str(info.value)
    assert info.value.operation is not None and "commit" in info.value.operation
    assert not _temps(tmp_path)
    _check(first, 30)


def test_a_folder_in_place_of_a_shard(tmp_path: Path) -> None:
    (tmp_path / "d1").mkdir()
    with pytest.raises(StorageError) as info:
        FileWriter(tmp_path / "d", shard_num=2, overwrite=True)
    assert info.value.errno == errno.EISDIR and "d1" in str(info.value)
    (tmp_path / "d1").rmdir()

    first = _dataset(tmp_path)
    appender = FileWriter.open_for_append(first)
    appender.write_raw_data(_rows(30, 10))
    moved = tmp_path / "moved"
    (tmp_path / "d1").rename(moved)
    (tmp_path / "d1").mkdir()  # replaced by a folder while the append was open
    with pytest.raises(StorageError) as info:
        appender.commit()
    assert info.value.errno == errno.EISDIR and "folder stands where" in str(info.value)
    assert not _temps(tmp_path) and not (tmp_path / "d.mrecord-journal").exists()
    (tmp_path / "d1").rmdir()
    moved.rename(tmp_path / "d1")
    _check(first, 30)


def test_a_vanished_folder(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    writer = FileWriter(folder / "d")
    writer.add_schema(SCHEMA)
    writer.add_index(["id"])
    writer.write_raw_data(_rows(0, 10))
    shutil.rmtree(folder)
    with pytest.raises(StorageError) as info:
        writer.commit()
    assert info.value.errno == errno.ENOENT and "vanished" in str(info.value)
    assert str(folder) in str(info.value)
    with pytest.raises(WriterStateError, match="aborted"):
        writer.write_raw_data(_rows(10, 1))


def test_storage_error_keeps_errno_and_pickles() -> None:
    import pickle

    exc = storage_error(
        OSError(errno.ENOSPC, "No space left on device", "/x/y"),
        operation="write",
        path=None,
        state="nothing is visible",
    )
    assert isinstance(exc, DiskFullError) and isinstance(exc, OSError)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is DiskFullError and again.errno == errno.ENOSPC
    assert str(again) == str(exc) and again.path == "/x/y"
