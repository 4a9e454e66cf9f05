"""A local, size-bounded, LRU cache of remote files, shared safely by processes on one host.

Layout under the cache root (``$MRECORD_CACHE_DIR``, default ``~/.cache/mrecord``)::

    <root>/.lock                                  global lock: accounting and eviction
    <root>/<key>/<name>                           a cached file, under its remote basename
    <root>/<key>/<name>.mrecord-cache             its record (JSON): url, version tag, size, state
    <root>/<key>/<name>.mrecord-cache-lock        its entry lock
    <root>/<key>/<name>.mrecord-cache-partial     a download in progress

``<key>`` hashes the remote folder's URL and the storage options, so the files of
one remote dataset sit side by side under their own names and the reader finds
siblings and ``.db`` files exactly as it does locally.

Rules that keep it safe with several processes:

- An entry is checked and used under a shared entry lock (``flock``), downloaded
  under an exclusive one (then turned back into a shared one), and evicted only
  when an exclusive lock can be had at once; a process that finds another
  downloading the same file waits, then reuses it. An open keeps its entries'
  shared locks until the files are mapped, so they cannot be evicted meanwhile;
  two processes opening the same files in different orders never wait on each
  other unless both must download the same file.
- A download goes to the partial name, is checked (size, then the caller's check:
  shard checksums), and only then renamed over the final name (atomic).
- Space is reserved before downloading: the record, in state ``downloading``,
  counts toward the bound. Eviction (under the global lock) removes the least
  recently used entries whose lock it can take without waiting; entries that are
  being downloaded or opened right now are skipped. A file that is evicted while
  a reader has it memory-mapped stays readable (POSIX keeps the unlinked inode).
- A file that cannot fit at all (larger than the bound) is not cached: the caller
  reads it with range requests instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrecord.errors import ArgumentError, CorruptFileError
from mrecord.remote.fs import RemoteFile
from mrecord.remote.urls import url_basename
from mrecord.storage.cache_folder import cache_root
from mrecord.storage.locking import lock, try_lock, unlock

__all__ = ["DEFAULT_CACHE_BYTES", "STALE_POLICIES", "CacheSession", "RemoteCache"]

DEFAULT_CACHE_BYTES = 20 << 30
STALE_POLICIES = ("warn", "refuse")
_RECORD = ".mrecord-cache"
_LOCK = ".mrecord-cache-lock"
_PARTIAL = ".mrecord-cache-partial"
_WHY = "caching remote files"


def _default_bytes() -> int:
    text = os.environ.get("MRECORD_CACHE_BYTES")
    return int(text) if text else DEFAULT_CACHE_BYTES


class RemoteCache:
    """The cache under ``root`` (default ``$MRECORD_CACHE_DIR``) bounded to ``max_bytes``.

    ``max_bytes`` defaults to ``$MRECORD_CACHE_BYTES`` or 20 GiB. ``stale`` (default
    ``$MRECORD_STALE_CACHE`` or ``"warn"``) says what an open does when the store cannot
    be reached: ``"warn"`` opens the commit cached and verified before, with a
    :class:`StaleCacheWarning`; ``"refuse"`` raises the store's error.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        max_bytes: int | None = None,
        stale: str | None = None,
    ):
        self.root = Path(root) if root is not None else cache_root()
        self.max_bytes = max_bytes if max_bytes is not None else _default_bytes()
        self.stale = stale if stale is not None else os.environ.get("MRECORD_STALE_CACHE", "warn")
        if self.stale not in STALE_POLICIES:
            raise ArgumentError(
                f"stale (or $MRECORD_STALE_CACHE) must be one of {STALE_POLICIES}, got "
                f"{self.stale!r}"
            )

    def folder(self, parent_url: str, storage_options: Mapping[str, Any]) -> Path:
        """The cache folder for the files of one remote folder (on one store: the URL, the
        storage options and ``$AWS_ENDPOINT_URL`` name it)."""
        key = [parent_url, dict(storage_options)]
        if os.environ.get("AWS_ENDPOINT_URL"):  # another S3-compatible store, same URLs
            key.append(os.environ["AWS_ENDPOINT_URL"])
        text = json.dumps(key, sort_keys=True, default=repr)
        return self.root / hashlib.sha256(text.encode()).hexdigest()[:24]

    @contextlib.contextmanager
    def session(self) -> Iterator[CacheSession]:
        """Fetch files; every entry fetched stays locked (safe from eviction) until exit."""
        session = CacheSession(self)
        try:
            yield session
        finally:
            session.release()

    def used_bytes(self) -> int:
        """Bytes held or reserved by the cache's entries now."""
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[Path, int, float]]:
        """(record path, size, last use) of every entry, least recently used first."""
        found = []
        for record in self.root.glob(f"*/*{_RECORD}"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                size = int(json.loads(record.read_text())["size"])
                found.append((record, size, record.stat().st_mtime))
        return sorted(found, key=lambda e: e[2])

    def _reserve(self, record: Path, remote: RemoteFile, pinned: set[Path]) -> bool:
        """Evict until ``remote`` fits, then reserve its space; False when it cannot fit."""
        if remote.size > self.max_bytes:
            return False
        with self._accounting() as fits:
            if not fits(record, remote.size, pinned):
                return False
            _write_record(record, remote, "downloading")
            return True

    def _reserve_upto(self, record: Path, want: int, pinned: set[Path]) -> int:
        """Evict (least recently used first) until ``want`` bytes fit or nothing more can
        go; reserve what is free then, at most ``want``; returns the bytes reserved."""
        with self._accounting() as fits:
            fits(record, want, pinned)
            used = sum(size for path, size, _ in self._entries() if path != record)
            granted = max(0, min(want, self.max_bytes - used))
            staged = record.with_name(record.name + ".tmp")
            doc = {"url": "", "tag": "", "size": granted, "state": "pieces"}
            staged.write_text(json.dumps(doc))
            os.replace(staged, record)
            return granted

    @contextlib.contextmanager
    def _accounting(self) -> Iterator[Callable[[Path, int, set[Path]], bool]]:
        """Under the global lock: ``fits(record, size, pinned)`` evicts until ``size`` more
        bytes fit beside every entry but ``record`` (never ``pinned`` ones, nor entries in
        use); True when they do."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)

        def fits(record: Path, size: int, pinned: set[Path]) -> bool:
            entries = [e for e in self._entries() if e[0] != record]
            total = sum(size for _, size, _ in entries)
            for victim, victim_size, _ in entries:
                if total + size <= self.max_bytes:
                    break
                if victim in pinned or not _evict(victim):
                    continue
                total -= victim_size
            return total + size <= self.max_bytes

        try:
            lock(fd, _WHY)
            yield fits
        finally:
            os.close(fd)  # closing drops the lock


@dataclass
class CacheSession:
    """The entries one open call fetched; their shared locks are held until :meth:`release`."""

    cache: RemoteCache
    _fds: dict[Path, int] = field(default_factory=dict)

    def fetch(
        self, remote: RemoteFile, folder: Path, check: Callable[[Path], None]
    ) -> Path | None:
        """The local copy of ``remote`` under ``folder``: reused when current, else downloaded
        and checked with ``check(path)``. None when it cannot fit in the cache."""
        final = folder / url_basename(remote.url)
        record = final.with_name(final.name + _RECORD)
        fd = self._fds.get(record)
        if fd is None:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(final.with_name(final.name + _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                lock(fd, _WHY, shared=True)
            except BaseException:
                os.close(fd)
                raise
            self._fds[record] = fd
        if _current(record, final, remote):
            os.utime(record)  # last use, for LRU
            return final
        lock(fd, _WHY)  # exclusive to download; another process may have done it meanwhile
        try:
            return self._download(remote, record, final, check)
        finally:
            lock(fd, _WHY, shared=True)

    def _download(
        self, remote: RemoteFile, record: Path, final: Path, check: Callable[[Path], None]
    ) -> Path | None:
        """Under the exclusive entry lock: reuse, or download, check and publish ``final``."""
        if _current(record, final, remote):
            os.utime(record)
            return final
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        if not self.cache._reserve(record, remote, set(self._fds)):
            return None
        partial = final.with_name(final.name + _PARTIAL)
        try:
            got = remote.download(partial)
            if got != remote.size:
                raise CorruptFileError(
                    f"downloading {remote.url!r} gave {got} bytes, but the server said "
                    f"{remote.size}; the file changed during the download or the transfer was "
                    "cut: try again",
                    path=remote.url,
                )
            check(partial)
            os.replace(partial, final)
            _write_record(record, remote, "ready")
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
            with contextlib.suppress(FileNotFoundError):
                record.unlink()
            raise
        return final

    def cached(self, folder: Path, name: str) -> Path | None:
        """The copy of ``name`` under ``folder`` that a past open downloaded and verified,
        locked against eviction for this session, or None (without asking the store)."""
        final = folder / name
        record = final.with_name(final.name + _RECORD)
        if record not in self._fds:
            if not record.exists():
                return None
            fd = os.open(final.with_name(final.name + _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                lock(fd, _WHY, shared=True)
            except BaseException:
                os.close(fd)
                raise
            self._fds[record] = fd
        try:
            doc = json.loads(record.read_text())
            ready = doc.get("state") == "ready" and final.stat().st_size == doc.get("size")
        except (OSError, ValueError):
            return None
        return final if ready else None

    def reserve_pieces(self, folder: Path, want: int) -> tuple[int, Callable[[], None]]:
        """Reserve up to ``want`` bytes of the cache for pieces of range-read shards
        (evicting least recently used entries of other datasets); returns the bytes
        granted and the function that gives them back. The reservation is an entry of
        its own, locked until given back (a crashed process's is evicted as any other)."""
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f".mrecord-pieces-{os.getpid()}-{os.urandom(4).hex()}"
        record = final.with_name(final.name + _RECORD)
        lock_path = final.with_name(final.name + _LOCK)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            lock(fd, _WHY, shared=True)
            granted = self.cache._reserve_upto(record, want, set(self._fds))
        except BaseException:
            os.close(fd)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            for path in (record, lock_path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            os.close(fd)

        return granted, release

    def release(self) -> None:
        """Drop every entry lock this session holds."""
        for fd in self._fds.values():
            unlock(fd)
            os.close(fd)
        self._fds.clear()


def _current(record: Path, final: Path, remote: RemoteFile) -> bool:
    """True when the cached copy is complete and of the same remote version."""
    try:
        doc = json.loads(record.read_text())
        size = final.stat().st_size
    except (OSError, ValueError):
        return False
    return bool(
        doc.get("state") == "ready"
        and doc.get("url") == remote.url
        and doc.get("tag") == remote.tag
        and size == remote.size
    )


def _write_record(record: Path, remote: RemoteFile, state: str) -> None:
    staged = record.with_name(record.name + ".tmp")
    staged.write_text(
        json.dumps({"url": remote.url, "tag": remote.tag, "size": remote.size, "state": state})
    )
    os.replace(staged, record)


def _evict(record: Path) -> bool:
    """Remove one entry if nobody holds its lock; True when removed."""
    final = record.with_name(record.name[: -len(_RECORD)])
    try:
        fd = os.open(final.with_name(final.name + _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        if not try_lock(fd, _WHY):
            return False
        for path in (record, final, final.with_name(final.name + _PARTIAL)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return True
    finally:
        os.close(fd)
