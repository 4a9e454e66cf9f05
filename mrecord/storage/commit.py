"""Atomic, crash-safe commits of a multi-file dataset.

Every file of a commit (each shard's data file and its ``.db``) is first written
under ``<final>.mrecord-partial`` and fsync'ed. Then the commit becomes durable
in one step: the journal ``<dataset>.mrecord-journal`` (MessagePack: dataset id,
generation, final basenames) is written under a partial name, fsync'ed and
renamed into place. Only then are the partial files renamed over the finals, and
the journal removed.

A process killed at any instant therefore leaves either

- no journal: the finals are the last committed generation; partial files are
  litter, removed by the next writer or recovery; or
- a journal: every partial it names is complete, and :func:`recover` finishes
  the renames (roll forward), after which the new generation is whole.

Writers hold an exclusive ``flock`` on ``<dataset>.mrecord-lock`` for their whole
life; the kernel drops it when the process dies, so a crashed writer never blocks
the next one. Readers take the same lock only to roll a journal forward.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import msgpack

from mrecord.errors import CorruptFileError, DatasetLockedError, MetadataError
from mrecord.storage.locking import try_lock, unlock
from mrecord.storage.naming import journal_path, lock_path, partial_path

__all__ = [
    "DatasetLock",
    "fsync_dir",
    "recover",
    "recover_locked",
    "remove_partials",
    "write_journal_and_publish",
]

_MAX_JOURNAL_BYTES = 1 << 20


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DatasetLock:
    """An exclusive, process-owned lock on a dataset (``flock``; released on exit or death)."""

    def __init__(self, directory: Path, dataset_name: str):
        self.path = lock_path(directory, dataset_name)
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock, waiting up to ``wait`` seconds; raise DatasetLockedError otherwise."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                locked = try_lock(fd, "writing a dataset")
            except BaseException:
                os.close(fd)
                raise
            if locked:
                self._fd = fd
                return
            if time.monotonic() >= deadline:
                os.close(fd)
                raise DatasetLockedError(
                    "dataset is locked: another process is writing it (lock file "
                    f"{str(self.path)!r}); "
                    "wait for it to commit, or stop it"
                )
            time.sleep(0.01)

    def release(self) -> None:
        """Drop the lock (idempotent). The lock file stays: removing it would race."""
        if self._fd is not None:
            unlock(self._fd)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None


def _no_crash(step: str) -> None:
    """The default :data:`crash_hook`: do nothing."""


crash_hook: Callable[[str], None] = _no_crash
"""Called at each inner step of publishing a commit; a no-op unless a harness replaces it.

The steps are ``journal`` (journal durable, nothing renamed), ``renamed_one`` (after
each file renamed) and ``renamed_all`` (all renamed, journal still there). The crash
harness (``reliability/crash.py``, not shipped) installs a hook that SIGKILLs the
process at a chosen step; product code never sets it.
"""


def _crash_point(step: str) -> None:
    crash_hook(step)


def write_journal_and_publish(
    directory: Path, dataset_name: str, dataset_id: str, generation: int, finals: list[Path]
) -> None:
    """Make a commit durable (journal), then move every partial onto its final name."""
    journal = journal_path(directory, dataset_name)
    staged = partial_path(journal)
    payload = msgpack.packb(
        {"dataset_id": dataset_id, "generation": generation, "files": [p.name for p in finals]},
        use_bin_type=True,
    )
    with open(staged, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(staged, journal)
    fsync_dir(directory)
    _crash_point("journal")
    _roll_forward(directory, [p.name for p in finals])
    _crash_point("renamed_all")
    journal.unlink()
    fsync_dir(directory)


def _roll_forward(directory: Path, names: Iterable[str]) -> None:
    for name in names:
        final = directory / name
        staged = partial_path(final)
        if staged.exists():
            os.replace(staged, final)
            _crash_point("renamed_one")
    fsync_dir(directory)


def read_journal(journal: Path) -> list[str]:
    """The final basenames a journal commits; refuses unsafe names."""
    from mrecord.format.metadata import check_basename

    try:
        data = journal.read_bytes()
        if len(data) > _MAX_JOURNAL_BYTES:
            raise ValueError("journal is too large")
        doc = msgpack.unpackb(data, raw=False, max_bin_len=len(data), max_str_len=len(data))
        names = [check_basename(n) for n in doc["files"]]
    except (ValueError, KeyError, TypeError, MetadataError) as exc:
        raise CorruptFileError(
            f"commit journal {str(journal)!r} is damaged ({exc}); the files it names are from an "
            "unfinished commit: delete the journal to keep the previous generation",
            path=str(journal),
        ) from exc
    return names


def recover(directory: Path, dataset_name: str, wait: float = 10.0) -> bool:
    """Finish an interrupted commit, if any; returns True when there was one.

    Waits (up to ``wait`` seconds) while a live writer holds the lock: it is in the
    middle of publishing and will finish by itself.
    """
    journal = journal_path(directory, dataset_name)
    if not journal.exists():
        return False
    lock = DatasetLock(directory, dataset_name)
    try:
        lock.acquire(wait=wait)
    except PermissionError:
        return False
    try:
        recover_locked(directory, dataset_name)  # the writer may have finished while we waited
    finally:
        lock.release()
    return True


def recover_locked(directory: Path, dataset_name: str) -> bool:
    """:func:`recover` for a caller that already holds the dataset lock (a new writer).

    Taking the lock again from the same process would fail: ``flock`` locks belong
    to the open file, not the process.
    """
    journal = journal_path(directory, dataset_name)
    if not journal.exists():
        return False
    _roll_forward(directory, read_journal(journal))
    journal.unlink()
    fsync_dir(directory)
    return True


def remove_partials(finals: Iterable[Path]) -> None:
    """Delete the partial files of ``finals`` left by an uncommitted writer.

    Call only while holding the dataset lock. Names are derived from the finals,
    never globbed, so another dataset's files in the same folder are never touched.
    """
    for final in finals:
        with contextlib.suppress(FileNotFoundError):
            partial_path(final).unlink()
