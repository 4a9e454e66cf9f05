"""Atomic, crash-safe commits of a multi-file dataset.

Every file of a commit (each shard's data file and its ``.db``) is first written
under ``<final>.mrecord-partial`` and fsync'ed. Then the commit becomes durable
in one step: the journal ``<dataset>.mrecord-journal`` (MessagePack: dataset id,
generation, final basenames) is written under a partial name, fsync'ed and
renamed into place. Only then are the partial files renamed over the finals, and
the journal removed.

An append is journaled the same way but publishes in place: each shard's partial is
a *tail* (new pages, metadata, trailer) that goes after the shard's committed
length, and each ``.db``'s partial holds only the new rows, merged in one SQLite
transaction. The journal records every shard's committed length and tail length,
so the roll-forward can run again after any crash; bytes before a committed
length are never written (docs/FORMAT.md, *Commit*).

A process killed at any instant therefore leaves either

- no journal: the finals are the last committed generation; partial files are
  litter, removed by the next writer or recovery; or
- a journal: every partial it names is complete, and :func:`recover` finishes
  the renames, tails and merges (roll forward), after which the new generation is whole.

Writers hold an exclusive ``flock`` on ``<dataset>.mrecord-lock`` for their whole
life; the kernel drops it when the process dies, so a crashed writer never blocks
the next one. Readers take the same lock only to roll a journal forward.

Writers do not call this module directly: :mod:`mrecord.storage.transaction` drives the
protocol (lock, recovery, the ``.db`` partials, the checks before the commit point, the
journal, publishing) for every one of them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from mrecord.errors import (
    CorruptFileError,
    DatasetLockedError,
    FormatError,
    MetadataError,
    MrecordError,
)
from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE, Trailer
from mrecord.format.metadata import ShardMetadata
from mrecord.storage.failures import storage_error
from mrecord.storage.locking import try_lock, unlock
from mrecord.storage.naming import DB_SUFFIX, journal_path, lock_path, partial_path
from mrecord.storage.shard import read_shard_metadata

__all__ = [
    "DatasetLock",
    "TailAppend",
    "apply_tail",
    "check_journal",
    "committed_dataset_id",
    "copy_range",
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
each file renamed, each tail applied and each ``.db`` merged), ``tail_part`` (part of
an append's tail written into a data file, not yet fsync'ed) and ``renamed_all`` (all
published, journal still there). The crash
harness (``reliability/crash.py``, not shipped) installs a hook that SIGKILLs the
process at a chosen step; product code never sets it.
"""


def _crash_point(step: str) -> None:
    crash_hook(step)


@dataclass(frozen=True)
class TailAppend:
    """One data file grown in place by a commit: its partial holds the bytes to add.

    ``base_length`` is the file's committed length (the previous generation ends
    there); the partial's ``tail_length`` bytes go at that offset.
    """

    name: str
    base_length: int
    tail_length: int


def write_journal_and_publish(
    directory: Path,
    dataset_name: str,
    dataset_id: str,
    generation: int,
    finals: list[Path],
    appends: Sequence[TailAppend] = (),
    db_appends: Sequence[Path] = (),
) -> None:
    """Make a commit durable (journal), then publish it.

    ``finals`` are whole files whose partials are renamed over them; ``appends`` are
    data files whose partial tails are written after their committed end; each of
    ``db_appends`` is a ``.db`` whose partial (the new rows only) is merged into it
    in one SQLite transaction.
    """
    journal = journal_path(directory, dataset_name)
    staged = partial_path(journal)
    doc: dict[str, Any] = {
        "dataset_id": dataset_id,
        "generation": generation,
        "files": [p.name for p in finals],
    }
    if appends or db_appends:
        doc["appends"] = [[a.name, a.base_length, a.tail_length] for a in appends]
        doc["db_appends"] = [p.name for p in db_appends]
    payload = msgpack.packb(doc, use_bin_type=True)
    with open(staged, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    # The names the journal points to (partials, staged tails, the staged journal itself)
    # must be durable before the journal is: a file system may persist renames out of
    # order, and a journal naming a lost partial cannot be rolled forward.
    fsync_dir(directory)
    os.replace(staged, journal)
    fsync_dir(directory)
    _crash_point("journal")
    _roll_forward(directory, _Journal.from_doc(doc, journal))
    _crash_point("renamed_all")
    journal.unlink()
    fsync_dir(directory)
    # Tails and staged rows are spent once the journal is gone (litter until then).
    remove_partials(_spent(directory, _Journal.from_doc(doc, journal)))


def _spent(directory: Path, journal: _Journal) -> list[Path]:
    """Finals whose partials a published append no longer needs (its tails, its new rows)."""
    tails = [directory / a.name for a in journal.appends]
    return [*tails, *(directory / name for name in journal.db_appends)]


@dataclass(frozen=True)
class _Journal:
    """What a journal commits: files to rename, tails to apply, .db files to merge."""

    generation: int
    files: list[str]
    appends: list[TailAppend]
    db_appends: list[str]
    dataset_id: str = ""

    @classmethod
    def from_doc(cls, doc: Any, journal: Path) -> _Journal:
        from mrecord.format.metadata import check_basename

        if not isinstance(doc, dict):
            raise MetadataError("journal is not a map")
        generation = doc.get("generation")
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise MetadataError("journal generation is not an int")
        dataset_id = doc.get("dataset_id")
        if not isinstance(dataset_id, str):
            raise MetadataError("journal dataset_id is not a str")
        appends = []
        for entry in doc.get("appends", []):
            name, base, length = entry
            if not (isinstance(base, int) and isinstance(length, int) and base >= 0 < length):
                raise MetadataError(f"journal append entry {entry!r} is malformed")
            appends.append(TailAppend(check_basename(name), base, length))
        return cls(
            generation,
            [check_basename(n) for n in doc["files"]],
            appends,
            [check_basename(n) for n in doc.get("db_appends", [])],
            dataset_id,
        )


def _roll_forward(directory: Path, journal: _Journal) -> None:
    for name in journal.files:
        final = directory / name
        staged = partial_path(final)
        if staged.exists():
            os.replace(staged, final)
            _crash_point("renamed_one")
    for append in journal.appends:
        apply_tail(directory / append.name, append)
        _crash_point("renamed_one")
    if journal.db_appends:
        from mrecord.storage.index_db import merge_index_db

        for name in journal.db_appends:
            merge_index_db(directory / name, partial_path(directory / name), journal.generation)
            _crash_point("renamed_one")
    fsync_dir(directory)


_COPY_BLOCK = 8 << 20


def apply_tail(final: Path, append: TailAppend) -> None:
    """Write ``final``'s partial tail at its committed end, cut anything beyond, fsync.

    Idempotent: after a crash it runs again from the start, rewriting the same bytes
    (bytes before ``base_length`` are never touched, so readers mapping the previous
    generation are unaffected; the file is never cut below its new length).
    """
    staged = partial_path(final)
    end = append.base_length + append.tail_length
    try:
        src = open(staged, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        if final.stat().st_size == end:
            return  # applied by an earlier roll-forward that stopped before its cleanup
        raise CorruptFileError(
            f"commit journal names the tail {str(staged)!r}, which is missing, and "
            f"{str(final)!r} is not {end} bytes long; the commit cannot be finished: delete "
            "the journal and truncate the file to its previous length to keep the previous "
            "generation",
            path=str(staged),
        ) from None
    with src, open(final, "r+b") as dst:
        if os.fstat(src.fileno()).st_size != append.tail_length:
            raise CorruptFileError(
                f"tail {str(staged)!r} is not the {append.tail_length} bytes its journal "
                "records; the commit cannot be finished",
                path=str(staged),
            )
        # At least two steps, so the crash harness can stop between them.
        step = min(_COPY_BLOCK, max(append.tail_length // 2, 1))
        done = 0
        while done < append.tail_length:
            done += copy_range(src.fileno(), dst.fileno(), done, append.base_length + done, step)
            if done < append.tail_length:
                _crash_point("tail_part")
        if os.fstat(dst.fileno()).st_size > end:
            os.ftruncate(dst.fileno(), end)
        os.fsync(dst.fileno())


def copy_range(src: int, dst: int, src_offset: int, dst_offset: int, count: int) -> int:
    """Copy up to ``count`` bytes in the kernel (``copy_file_range``: file systems that
    share extents, XFS and btrfs, may not write them again); pread/pwrite elsewhere."""
    copy = getattr(os, "copy_file_range", None)
    if copy is not None:
        try:
            copied: int = copy(src, dst, count, src_offset, dst_offset)
            if copied > 0:
                return copied
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
    block = os.pread(src, count, src_offset)
    if not block:
        raise CorruptFileError(f"tail ended early at byte {src_offset}", offset=src_offset)
    return os.pwrite(dst, block, dst_offset)


def check_journal(directory: Path, dataset_name: str, done: _Journal, journal: Path) -> None:
    """Refuse a journal that does not belong to the dataset before anything is rolled forward.

    A journal is input like any file: copied from another dataset, left by a different
    dataset of the same name, or forged, rolling it forward would rename or write files
    it has no business with (a tail offset of 1 TiB makes a 1 TiB sparse file). So every
    file it names must be one of ``dataset_name``'s (``NAME``, ``NAME`` + digits, their
    ``.db``); every shard it touches must carry its dataset id; and every tail must start
    where a committed generation of its shard ends (a trailer ends there: bytes before a
    committed length are never written, so that trailer survives any crash).
    """
    def refuse(why: str) -> CorruptFileError:
        return CorruptFileError(
            f"commit journal {str(journal)!r} {why}; it cannot be rolled forward: if the "
            "dataset's files are yours, delete the journal to keep the previous generation",
            path=str(journal),
        )

    for name in [*done.files, *(a.name for a in done.appends), *done.db_appends]:
        suffix = _data_name(name)[len(dataset_name) :]
        if not name.startswith(dataset_name) or not (suffix == "" or suffix.isdigit()):
            raise refuse(f"names {name!r}, which is not a file of dataset {dataset_name!r}")
    shards = dict.fromkeys(_data_name(n) for n in [*done.files, *done.db_appends])
    for append in done.appends:
        shards.pop(append.name, None)
        final = directory / append.name
        try:
            size = final.stat().st_size
            found = committed_dataset_id(final, append.base_length)
        except FileNotFoundError:
            raise refuse(f"appends to {append.name!r}, which does not exist") from None
        if append.base_length > size:
            raise refuse(
                f"records a tail at byte {append.base_length} of {str(final)!r}, past its end "
                f"({size} bytes)"
            )
        if found is None:
            raise refuse(
                f"records a tail at byte {append.base_length} of {str(final)!r}, where no "
                "committed generation of it ends"
            )
        if found != done.dataset_id:
            raise refuse(
                f"belongs to another dataset (id {done.dataset_id!r}; {str(final)!r} is "
                f"{found!r})"
            )
    for name in shards:
        final = directory / name
        staged = partial_path(final)
        try:
            meta = read_shard_metadata(staged if staged.exists() else final)
        except (MrecordError, OSError):
            continue  # a file that cannot be read is refused by the reader, not here
        if meta.dataset_id != done.dataset_id:
            raise refuse(
                f"belongs to another dataset (id {done.dataset_id!r}; {str(final)!r} is "
                f"{meta.dataset_id!r})"
            )


def _data_name(name: str) -> str:
    """The data file a journal's ``name`` (a data file or its ``.db``) belongs to."""
    return name[: -len(DB_SUFFIX)] if name.endswith(DB_SUFFIX) else name


def committed_dataset_id(final: Path, length: int) -> str | None:
    """The dataset id of the generation of ``final`` that ends at byte ``length``, or None
    when none ends there (no trailer there, or metadata that does not check out)."""
    if length < HEADER_SIZE + TRAILER_SIZE:
        return None
    fd = os.open(final, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if os.fstat(fd).st_size < length:
            return None
        try:
            trailer = Trailer.parse(os.pread(fd, TRAILER_SIZE, length - TRAILER_SIZE), length)
            body = os.pread(fd, trailer.metadata_length, trailer.metadata_offset)
            if checksum(body) != trailer.metadata_crc32:
                return None
            return ShardMetadata.decode(body, trailer.metadata_offset).dataset_id
        except FormatError:
            return None
    finally:
        os.close(fd)


def read_journal(journal: Path) -> _Journal:
    """What a journal commits; refuses unsafe names."""
    try:
        data = journal.read_bytes()
        if len(data) > _MAX_JOURNAL_BYTES:
            raise MetadataError("journal is too large")
        doc = msgpack.unpackb(data, raw=False, max_bin_len=len(data), max_str_len=len(data))
        return _Journal.from_doc(doc, journal)
    except (ValueError, KeyError, TypeError, MetadataError) as exc:
        raise CorruptFileError(
            f"commit journal {str(journal)!r} is damaged ({exc}); the files it names are from an "
            "unfinished commit: delete the journal to keep the previous generation",
            path=str(journal),
        ) from exc


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
    except OSError as exc:
        if isinstance(exc, MrecordError) or exc.errno not in _CANNOT_WRITE:
            raise
        # This process may not write here (a read-only medium, no permission). A live
        # writer finishes its commit by itself; otherwise the commit stays unpublished
        # until someone who can write opens the dataset: say so, naming the journal.
        if exc.errno != errno.EROFS and _gone(journal, wait):  # no writer on a read-only fs
            return False
        raise storage_error(
            exc,
            operation=f"finish the interrupted commit of dataset {dataset_name!r}: failed on",
            path=lock.path,
            state=f"the commit is durable (journal {str(journal)!r}) but not published; "
            "nothing is lost, and opening the dataset where it can be written finishes it",
        ) from exc
    try:
        recover_locked(directory, dataset_name)  # the writer may have finished while we waited
    finally:
        lock.release()
    return True


_CANNOT_WRITE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _gone(path: Path, wait: float) -> bool:
    """Whether ``path`` disappears within ``wait`` seconds (a live writer finishing)."""
    deadline = time.monotonic() + wait
    while path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def recover_locked(directory: Path, dataset_name: str) -> bool:
    """:func:`recover` for a caller that already holds the dataset lock (a new writer).

    Taking the lock again from the same process would fail: ``flock`` locks belong
    to the open file, not the process.
    """
    journal = journal_path(directory, dataset_name)
    if not journal.exists():
        return False
    done = read_journal(journal)
    check_journal(directory, dataset_name, done, journal)
    _roll_forward(directory, done)
    journal.unlink()
    fsync_dir(directory)
    remove_partials(_spent(directory, done))
    return True


def remove_partials(finals: Iterable[Path]) -> None:
    """Delete the partial files of ``finals`` left by an uncommitted writer.

    Call only while holding the dataset lock. Names are derived from the finals,
    never globbed, so another dataset's files in the same folder are never touched.
    """
    for final in finals:
        with contextlib.suppress(FileNotFoundError):
            partial_path(final).unlink()
