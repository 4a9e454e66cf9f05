"""Operating-system failures while writing, turned into errors that say what to do.

:func:`storage_error` wraps an ``OSError`` (disk full, quota, permission, read-only
file system, I/O error, a vanished folder, a folder where a file belongs) in a
:class:`~mrecord.errors.StorageError` subclass that keeps its ``errno`` and names the
file, the operation and the dataset's state, e.g.::

    cannot write data file '/data/ds.mrecord-partial': No space left on device (ENOSPC);
    nothing of this commit is visible; the last committed generation 3 is intact;
    free space on the device and retry
"""

from __future__ import annotations

import errno as errno_mod
import os
import sqlite3
from pathlib import Path

from mrecord.errors import DiskFullError, StorageError, StoragePermissionError, UnreadableFileError

__all__ = [
    "advice_for",
    "check_free_space",
    "found_failure",
    "read_failure",
    "sqlite_errno",
    "storage_error",
    "unreadable_error",
]

_ADVICE = {
    errno_mod.ENOSPC: "free space on the device and retry",
    errno_mod.EDQUOT: "free space within your disk quota (or raise it) and retry",
    errno_mod.EACCES: "check the permissions of the folder and its files, then retry",
    errno_mod.EPERM: "check the permissions of the folder and its files, then retry",
    errno_mod.EROFS: "the file system is read-only: remount it read-write or write elsewhere",
    errno_mod.EIO: "the device reported an I/O error: check it (dmesg, SMART) before retrying",
    errno_mod.ENOENT: "a folder or file vanished while writing: recreate the folder and retry",
    errno_mod.EISDIR: "a folder stands where a data file belongs: move it away and retry",
    errno_mod.ENOTDIR: "a file stands where a folder belongs: move it away and retry",
}


def advice_for(code: int | None) -> str:
    """What a user should do about a failure with this ``errno``."""
    return _ADVICE.get(code or 0, "fix the cause and retry")


def storage_error(
    exc: OSError, *, operation: str, path: str | Path | None, state: str
) -> StorageError:
    """A typed error for ``exc``: DiskFullError, StoragePermissionError or StorageError.

    ``operation`` completes "cannot ..." ("write data file"); ``state`` is the dataset's
    state after the failure ("nothing of this commit is visible; ...").
    """
    code = exc.errno
    if isinstance(exc, StorageError) and exc.path:
        where = exc.path
    else:
        where = str(exc.filename) if exc.filename is not None else str(path)
    if isinstance(exc, StorageError) and exc.operation is not None and code:
        # Already typed further down: its message is a whole sentence of its own; keep what
        # it was doing and why, not the sentence (it said "cannot" and the advice already).
        reason = f"{exc.operation}: {os.strerror(code)}"
    else:
        reason = exc.strerror or str(exc)
    name = errno_mod.errorcode.get(code or 0, "")
    cls: type[StorageError] = StorageError
    if code in (errno_mod.ENOSPC, errno_mod.EDQUOT):
        cls = DiskFullError
    elif code in (errno_mod.EACCES, errno_mod.EPERM, errno_mod.EROFS):
        cls = StoragePermissionError
    message = (
        f"cannot {operation} {where!r}: {reason}{f' ({name})' if name else ''}; {state}; "
        f"{advice_for(code)}"
    )
    return cls(message, errno=code, path=where, operation=operation)


def found_failure(code: int, path: str | Path, detail: str | None = None) -> StorageError:
    """A failure a check found before any system call failed (a folder where a data file
    belongs, too little free space), shaped as the ``OSError`` the call would have raised
    (``errno``, ``strerror``, ``filename``), so :func:`storage_error` turns it into the
    typed error that names the operation and the dataset's state."""
    return StorageError(detail or os.strerror(code), errno=code, path=str(path))


def read_failure(exc: OSError, path: str | Path, offset: int, length: int) -> StorageError:
    """A read of bytes ``offset:offset + length`` of data file ``path`` that the system
    refused (``EIO`` from the device): a typed error naming the file and the bytes."""
    return storage_error(
        exc,
        operation=f"read bytes {offset}-{offset + length} of data file",
        path=path,
        state="nothing was changed",
    )


def unreadable_error(exc: PermissionError, what: str, path: str | Path) -> UnreadableFileError:
    """A file that exists but may not be read: ``what`` is "data file" or "index"."""
    name = errno_mod.errorcode.get(exc.errno or 0, "")
    error = UnreadableFileError(
        f"cannot read {what} {str(path)!r}: {exc.strerror or exc}{f' ({name})' if name else ''}; "
        f"check the permissions of the file and its folder (ls -l {str(path)!r}); "
        "the file itself is not damaged"
    )
    error.errno = exc.errno  # (not filename: OSError's str would print "[Errno 13] ...")
    return error


_SQLITE_ERRNO = {
    13: errno_mod.ENOSPC,  # SQLITE_FULL
    10: errno_mod.EIO,  # SQLITE_IOERR
    8: errno_mod.EROFS,  # SQLITE_READONLY
    3: errno_mod.EACCES,  # SQLITE_PERM
    23: errno_mod.EACCES,  # SQLITE_AUTH
    14: errno_mod.ENOENT,  # SQLITE_CANTOPEN
}


def sqlite_errno(exc: sqlite3.Error) -> int | None:
    """The ``errno`` that best describes a SQLite failure (``None`` when none does)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return errno_mod.ENOSPC if "full" in str(exc) else None
    return _SQLITE_ERRNO.get(int(code) & 0xFF)


def check_free_space(directory: Path, needed: int) -> None:
    """Raise a :class:`StorageError` with ``ENOSPC`` unless ``directory``'s file system has
    ``needed`` bytes free.

    Checked before a commit point, so a disk that is already too full fails the commit
    while nothing of it is visible rather than while it is being published.
    """
    try:
        st = os.statvfs(directory)
    except OSError:
        return  # no answer: the writes themselves will tell
    free = st.f_bavail * st.f_frsize
    if free < needed:
        raise found_failure(
            errno_mod.ENOSPC,
            directory,
            f"No space left on device ({free} bytes free, publishing needs {needed})",
        )
