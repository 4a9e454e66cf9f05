"""Tests written for mutants of mrecord/storage/failures.py and mrecord/storage/locking.py that
survived the storage tests (docs/RELIABILITY.md, "Mutation testing"): the whole message a
failed write gives (file, errno's name, the dataset's state, what to do), the error type a
user catches for each errno, SQLite's codes, the free-space boundary, and what the lock
helpers do when the lock is taken or the platform has no ``fcntl``."""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from mrecord.errors import (
    DiskFullError,
    MrecordError,
    StorageError,
    StoragePermissionError,
    UnreadableFileError,
    UnsupportedPlatformError,
)
from mrecord.storage import locking
from mrecord.storage.failures import (
    advice_for,
    check_free_space,
    found_failure,
    sqlite_errno,
    storage_error,
    unreadable_error,
)

STATE = "nothing of this commit is visible; the last committed generation 3 is intact"


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        (errno.ENOSPC, "free space on the device and retry"),
        (errno.EDQUOT, "free space within your disk quota (or raise it) and retry"),
        (errno.EACCES, "check the permissions of the folder and its files, then retry"),
        (errno.EPERM, "check the permissions of the folder and its files, then retry"),
        (errno.EROFS, "the file system is read-only: remount it read-write or write elsewhere"),
        (errno.EIO, "the device reported an I/O error: check it (dmesg, SMART) before retrying"),
        (errno.ENOENT, "a folder or file vanished while writing: recreate the folder and retry"),
        (errno.EISDIR, "a folder stands where a data file belongs: move it away and retry"),
        (errno.ENOTDIR, "a file stands where a folder belongs: move it away and retry"),
        (errno.EBADF, "fix the cause and retry"),
        (None, "fix the cause and retry"),
    ],
)
def test_each_errno_gets_its_advice(code: int | None, advice: str) -> None:
    assert advice_for(code) == advice


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (errno.ENOSPC, DiskFullError),
        (errno.EDQUOT, DiskFullError),
        (errno.EACCES, StoragePermissionError),
        (errno.EPERM, StoragePermissionError),
        (errno.EROFS, StoragePermissionError),
        (errno.EIO, StorageError),
        (errno.ENOENT, StorageError),
    ],
)
def test_storage_error_names_file_errno_state_and_advice(
    code: int, kind: type[StorageError]
) -> None:
    exc = storage_error(
        OSError(code, os.strerror(code), "/data/ds.mrecord-partial"),
        operation="write data file",
        path="/elsewhere",
        state=STATE,
    )
    assert type(exc) is kind
    assert str(exc) == (
        f"cannot write data file '/data/ds.mrecord-partial': {os.strerror(code)} "
        f"({errno.errorcode[code]}); {STATE}; {advice_for(code)}"
    )
    assert exc.errno == code
    assert exc.path == exc.filename == "/data/ds.mrecord-partial"
    assert exc.operation == "write data file"


def test_storage_error_without_a_file_name_names_the_path_given() -> None:
    exc = storage_error(
        OSError(errno.EIO, "Input/output error"),
        operation="publish",
        path=Path("/data/ds"),
        state=STATE,
    )
    assert str(exc) == (
        f"cannot publish '/data/ds': Input/output error (EIO); {STATE}; "
        "the device reported an I/O error: check it (dmesg, SMART) before retrying"
    )
    assert exc.path == "/data/ds"


def test_storage_error_without_errno_or_strerror_says_what_it_has() -> None:
    exc = storage_error(OSError("lost the device"), operation="commit", path="/d", state=STATE)
    assert type(exc) is StorageError and exc.errno is None
    assert str(exc) == f"cannot commit '/d': lost the device; {STATE}; fix the cause and retry"


def test_storage_error_of_an_errno_without_a_name_has_no_parenthesis() -> None:
    exc = storage_error(OSError(100000, "odd"), operation="commit", path="/d", state=STATE)
    assert str(exc) == f"cannot commit '/d': odd; {STATE}; fix the cause and retry"
    assert exc.errno == 100000


def test_a_found_failure_reads_like_the_call_that_would_have_failed() -> None:
    found = found_failure(errno.EISDIR, Path("/data/d1"))
    assert isinstance(found, StorageError) and isinstance(found, OSError)
    assert (found.errno, found.strerror, found.filename) == (
        errno.EISDIR, os.strerror(errno.EISDIR), "/data/d1"
    )
    assert str(found) == os.strerror(errno.EISDIR) and found.operation is None
    typed = storage_error(found, operation="create dataset", path="/other", state=STATE)
    assert str(typed) == (
        f"cannot create dataset '/data/d1': {os.strerror(errno.EISDIR)} (EISDIR); {STATE}; "
        "a folder stands where a data file belongs: move it away and retry"
    )
    detailed = found_failure(errno.ENOSPC, "/data", "only 3 bytes free")
    assert str(detailed) == detailed.strerror == "only 3 bytes free"


def test_storage_error_of_a_storage_error_keeps_its_path() -> None:
    inner = StorageError("gone", errno=errno.ENOENT, path="/data/d0")
    exc = storage_error(inner, operation="commit", path="/data", state=STATE)
    assert exc.path == "/data/d0" and "'/data/d0'" in str(exc)


def test_a_typed_error_wrapped_again_says_cannot_once() -> None:
    """A StorageError already naming its operation, wrapped by a caller that knows the
    dataset's state (FileWriter.write_raw_data, commit): one sentence, with the inner
    operation and errno, the outer state and one piece of advice (it read "cannot ...:
    cannot ...; inner state; advice (EIO); outer state; advice")."""
    inner = storage_error(
        OSError(errno.EIO, os.strerror(errno.EIO)),
        operation="write data file",
        path="/data/d.mrecord-partial",
        state="inner state",
    )
    outer = storage_error(inner, operation="commit dataset 'd': failed on", path="/data",
                          state=STATE)  # fmt: skip
    assert str(outer) == (
        f"cannot commit dataset 'd': failed on '/data/d.mrecord-partial': write data file: "
        f"{os.strerror(errno.EIO)} (EIO); {STATE}; "
        "the device reported an I/O error: check it (dmesg, SMART) before retrying"
    )
    assert outer.errno == errno.EIO and outer.path == "/data/d.mrecord-partial"


def test_an_unreadable_file_says_it_is_not_damaged() -> None:
    exc = unreadable_error(
        PermissionError(errno.EACCES, "Permission denied"), "data file", Path("/data/d0")
    )
    assert isinstance(exc, UnreadableFileError) and isinstance(exc, PermissionError)
    assert isinstance(exc, MrecordError)
    assert str(exc) == (
        "cannot read data file '/data/d0': Permission denied (EACCES); check the permissions "
        "of the file and its folder (ls -l '/data/d0'); the file itself is not damaged"
    )
    assert exc.errno == errno.EACCES and exc.filename is None
    bare = unreadable_error(PermissionError("no"), "index", "/data/d0.db")
    assert str(bare) == (
        "cannot read index '/data/d0.db': no; check the permissions of the file and its "
        "folder (ls -l '/data/d0.db'); the file itself is not damaged"
    )
    assert bare.errno is None


def _sqlite_error(code: int | None, message: str = "failed") -> sqlite3.Error:
    exc = sqlite3.OperationalError(message)
    if code is not None:
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (13, errno.ENOSPC),  # SQLITE_FULL
        (10, errno.EIO),  # SQLITE_IOERR
        (10 | (13 << 8), errno.EIO),  # SQLITE_IOERR_FSYNC: extended codes keep the low byte
        (8, errno.EROFS),  # SQLITE_READONLY
        (3, errno.EACCES),  # SQLITE_PERM
        (23, errno.EACCES),  # SQLITE_AUTH
        (14, errno.ENOENT),  # SQLITE_CANTOPEN
        (1, None),  # SQLITE_ERROR
        (5, None),  # SQLITE_BUSY
    ],
)
def test_sqlite_codes_become_errnos(code: int, expected: int | None) -> None:
    assert sqlite_errno(_sqlite_error(code)) == expected


def test_sqlite_errors_without_a_code_are_read_from_the_message() -> None:
    assert sqlite_errno(_sqlite_error(None, "database or disk is full")) == errno.ENOSPC
    assert sqlite_errno(_sqlite_error(None, "disk I/O error")) is None


def test_the_real_sqlite_full_error_is_enospc(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.db")
    try:
        db.execute("PRAGMA max_page_count = 2")
        db.execute("CREATE TABLE t (v BLOB)")
        with pytest.raises(sqlite3.Error) as info:
            db.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    finally:
        db.close()
    assert sqlite_errno(info.value) == errno.ENOSPC


def _statvfs(free_blocks: int, frsize: int) -> object:
    return SimpleNamespace(f_bavail=free_blocks, f_frsize=frsize, f_bsize=frsize * 4)


def test_free_space_is_enough_at_exactly_what_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "statvfs", lambda d: _statvfs(10, 512))
    check_free_space(tmp_path, 5120)  # no error
    with pytest.raises(StorageError) as info:
        check_free_space(tmp_path, 5121)
    exc = info.value
    assert exc.errno == errno.ENOSPC and exc.filename == str(tmp_path)
    assert str(exc) == "No space left on device (5120 bytes free, publishing needs 5121)"
    typed = storage_error(exc, operation="commit", path=None, state=STATE)
    assert isinstance(typed, DiskFullError) and str(tmp_path) in str(typed)


def test_free_space_unknown_lets_the_writes_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_answer(directory: Path) -> object:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "statvfs", no_answer)
    check_free_space(tmp_path, 1 << 60)  # no error


def test_free_space_of_a_real_folder(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    check_free_space(tmp_path, st.f_bavail * st.f_frsize // 2)
    with pytest.raises(StorageError, match="No space left on device"):
        check_free_space(tmp_path, 1 << 62)


# -- locking -----------------------------------------------------------------------------------


def _fd(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def test_try_lock_is_exclusive_and_unlock_frees_it(tmp_path: Path) -> None:
    a, b = _fd(tmp_path / "l"), _fd(tmp_path / "l")
    try:
        assert locking.try_lock(a, "writing") is True
        assert locking.try_lock(b, "writing") is False
        with pytest.raises(BlockingIOError):  # exclusive: not even a shared lock beside it
            fcntl.flock(b, fcntl.LOCK_SH | fcntl.LOCK_NB)
        locking.unlock(a)
        assert locking.try_lock(b, "writing") is True
    finally:
        os.close(a)
        os.close(b)


def test_try_lock_raises_other_failures(tmp_path: Path) -> None:
    fd = _fd(tmp_path / "l")
    os.close(fd)
    with pytest.raises(OSError) as info:
        locking.try_lock(fd, "writing")
    assert info.value.errno == errno.EBADF


def _free_for(fd: int, kind: int) -> bool:
    """Whether ``fd`` could take a lock of ``kind`` now (probed without waiting, then
    dropped): the probes never block, whatever a broken ``lock`` took."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_lock_is_exclusive_unless_shared(tmp_path: Path) -> None:
    a, b = (_fd(tmp_path / "l") for _ in range(2))
    try:
        locking.lock(a, "reading", shared=True)
        assert _free_for(b, fcntl.LOCK_SH) and not _free_for(b, fcntl.LOCK_EX)
        assert locking.try_lock(b, "writing") is False
        locking.unlock(a)
        assert _free_for(b, fcntl.LOCK_EX)
        locking.lock(a, "writing")
        assert not _free_for(b, fcntl.LOCK_SH)
        locking.unlock(a)
        assert locking.try_lock(b, "writing") is True
    finally:
        os.close(a)
        os.close(b)


def test_no_fcntl_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl now raises ImportError
    message = (
        "{} needs fcntl file locks, which this platform does not have; read-only use works "
        "here, but write datasets (and cache remote ones) on Linux or macOS"
    )
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda: locking.try_lock(0, "writing a dataset"), "writing a dataset"),
        (lambda: locking.lock(0, "caching"), "caching"),
        (lambda: locking.unlock(0), "unlocking"),
    ]
    for call, why in calls:
        with pytest.raises(UnsupportedPlatformError) as info:
            call()
        assert str(info.value) == message.format(why)
        assert isinstance(info.value.__cause__, ImportError)
