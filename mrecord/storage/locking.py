"""Whole-file ``flock`` locks (exclusive or shared); ``fcntl`` imported only when one is taken.

``fcntl`` does not exist on every platform (Windows has none). Importing it here,
lazily, keeps ``import mrecord`` and read-only use working everywhere; only
writers (and the remote cache, which writes files) need it, and they get a clear
:class:`~mrecord.errors.UnsupportedPlatformError` instead of an ImportError at import.
"""

from __future__ import annotations

import errno
from types import ModuleType

from mrecord.errors import UnsupportedPlatformError

__all__ = ["lock", "try_lock", "unlock"]


def _fcntl(why: str) -> ModuleType:
    try:
        import fcntl
    except ImportError as exc:
        raise UnsupportedPlatformError(
            f"{why} needs fcntl file locks, which this platform does not have; read-only use "
            "works here, but write datasets (and cache remote ones) on Linux or macOS"
        ) from exc
    return fcntl


def try_lock(fd: int, why: str) -> bool:
    """Take an exclusive lock on ``fd`` without waiting; False when another holder has it."""
    fcntl = _fcntl(why)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def lock(fd: int, why: str, *, shared: bool = False) -> None:
    """Take an exclusive (or ``shared``) lock on ``fd``, waiting as long as it takes.

    On an ``fd`` that holds the other kind already, the lock is converted (not atomically:
    another process may take it in between).
    """
    fcntl = _fcntl(why)
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    """Drop the lock on ``fd`` (only ever called after a lock was taken)."""
    fcntl = _fcntl("unlocking")
    fcntl.flock(fd, fcntl.LOCK_UN)
