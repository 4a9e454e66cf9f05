"""Opening a dataset by URL: fetch its shards and ``.db`` files into the cache, then read
them memory-mapped exactly as local files (the hook ``DatasetReader.open`` calls)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrecord.errors import (
    ArgumentError,
    CorruptFileError,
    DatasetNotFoundError,
    MrecordError,
    RemoteStorageError,
)
from mrecord.format.index_layout import DB_SUFFIX
from mrecord.format.layout import TRAILER_SIZE
from mrecord.remote.cache import CacheSession, RemoteCache
from mrecord.remote.fs import RemoteFile, remote_file, unreachable
from mrecord.remote.ranged import RangeShardFile, RemoteReads
from mrecord.remote.urls import is_url, url_basename, url_parent
from mrecord.storage.committed import check_consistent, open_committed
from mrecord.storage.index_db import check_index_db
from mrecord.storage.naming import PathArg
from mrecord.storage.shard import ShardFile, read_shard_metadata

__all__ = ["StaleCacheWarning", "fetch_dataset", "open_remote_shards"]


def open_remote_shards(
    dataset_files: PathArg,
    *,
    verify: str = "once",
    check_index: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    cache: RemoteCache | None = None,
) -> list[ShardFile]:
    """``open_committed`` for URLs (``DatasetReader.open`` calls it): the shards as cached,
    memory-mapped files, or, for one the cache cannot hold, read with range requests."""
    options = dict(storage_options or {})
    cache = cache or RemoteCache()
    with cache.session() as session:
        try:
            fetched, expand = _fetch(session, dataset_files, options, need_index=check_index)
        except RemoteStorageError as exc:
            if cache.stale == "refuse" or not unreachable(exc):
                raise
            local = _cached_commit(session, dataset_files, options, check_index, exc)
            return open_committed(local, verify=verify, check_index=check_index)
        if all(f.remote is None for f in fetched):
            local = str(fetched[0].local) if expand else [str(f.local) for f in fetched]
            return open_committed(local, verify=verify, check_index=check_index)
        return _open_ranged(session, fetched, expand, verify, check_index)


class StaleCacheWarning(UserWarning):
    """A dataset was opened from the local cache because its store could not be reached:
    the rows are those of the commit cached last, which may no longer be the newest."""


def _cached_commit(
    session: CacheSession,
    dataset_files: PathArg,
    options: dict[str, Any],
    check_index: bool,
    error: RemoteStorageError,
) -> str | list[str]:
    """The local paths of the commit cached (and verified) for ``dataset_files``, when
    every file of it is in the cache; else ``error`` is raised, saying what is missing."""
    one = isinstance(dataset_files, str)
    urls = [str(u) for u in ([dataset_files] if one else _as_list(dataset_files))]
    found: list[Path] = []
    missing: list[str] = []

    def need(url: str) -> Path | None:
        local = session.cached(session.cache.folder(url_parent(url), options), url_basename(url))
        if local is None:
            missing.append(url)
        return local

    for url in urls:
        local = need(url)
        if local is None:
            continue
        found.append(local)
        names = read_shard_metadata(local).shard_names if isinstance(dataset_files, str) else []
        for name in names:
            if name != local.name:
                need(f"{url_parent(url)}/{name}")
        if check_index:
            for shard_url in [url] + [f"{url_parent(url)}/{n}" for n in names if n != local.name]:
                need(shard_url + DB_SUFFIX)
    if not found:
        raise error  # nothing of it was ever cached: the store's error says it all
    if missing:
        raise RemoteStorageError(
            f"{error} (the local cache cannot stand in: it does not hold {missing[0]!r}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''})"
        ) from error
    warnings.warn(
        StaleCacheWarning(
            f"the store cannot be reached ({error}); reading the copy of {urls[0]!r}"
            f"{' and its siblings' if len(urls) == 1 else ' ...'} cached and verified "
            f"under {found[0].parent}: it may be stale (a newer commit may exist). Set "
            "MRECORD_STALE_CACHE=refuse to fail instead"
        ),
        stacklevel=4,
    )
    return str(found[0]) if isinstance(dataset_files, str) else [str(f) for f in found]


def fetch_dataset(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    cache: RemoteCache | None = None,
) -> Path:
    """Fetch a dataset (one shard's URL: all its siblings and ``.db`` files) into the cache;
    returns the local path of that shard, for tools that want files (``mrecord verify``)."""
    cache = cache or RemoteCache()
    with cache.session() as session:
        fetched, _ = _fetch(session, url, dict(storage_options or {}), need_index=False)
    for f in fetched:
        if f.remote is not None:
            raise ArgumentError(
                f"{f.remote.url!r} is {f.remote.size:,} bytes, more than the remote cache "
                f"({cache.max_bytes:,} bytes, $MRECORD_CACHE_BYTES) can hold now; raise "
                "MRECORD_CACHE_BYTES or point MRECORD_CACHE_DIR at a larger disk"
            )
    return fetched[0].local


@dataclass(frozen=True)
class _Fetched:
    """One shard after fetching: its local path (for a shard read by range requests, where
    its ``.db`` lies) and, when the cache could not hold it, the remote file to read."""

    local: Path
    remote: RemoteFile | None = None


def _fetch(
    session: CacheSession,
    dataset_files: PathArg,
    options: dict[str, Any],
    need_index: bool,
) -> tuple[list[_Fetched], bool]:
    """Fetch the shards named (one URL: it and its siblings); returns them and whether
    siblings were expanded.

    Every ``.db`` is fetched before any shard: they are small and the reader cannot do
    without them, while a shard the cache cannot hold is read by range requests. (Shard
    by shard, a first shard cached whole could leave no room for the next ``.db``.)
    """
    if isinstance(dataset_files, str):
        first = _with_trailer(remote_file(dataset_files, options))
        folder = session.cache.folder(url_parent(dataset_files), options)
        try:
            with RangeShardFile(first, folder / url_basename(dataset_files), "never") as shard:
                names = shard.meta.shard_names  # header and metadata: two range requests
        except MrecordError as exc:
            raise type(exc)(
                f"{dataset_files!r} is damaged, nothing was cached: {exc}",
                **_location(exc, dataset_files),
            ) from exc
        parent = url_parent(dataset_files)
        remotes = [first] + [
            _with_trailer(remote_file(f"{parent}/{name}", options))
            for name in names
            if name != url_basename(dataset_files)
        ]
        expand = True
    else:
        urls = _as_list(dataset_files)
        if not all(is_url(u) for u in urls):
            raise ArgumentError(
                f"dataset_files mixes URLs and local paths: {[str(u) for u in urls]!r}; "
                "read them as two datasets"
            )
        remotes = [_with_trailer(remote_file(str(u), options)) for u in urls]
        expand = False
    for remote in remotes:
        _fetch_db(session, remote, options, need_index)
    return [_fetch_data(session, remote, options) for remote in remotes], expand


def _open_shard(fetched: _Fetched, verify: str) -> ShardFile:
    if fetched.remote is None:
        return ShardFile(fetched.local, verify=verify)
    return RangeShardFile(fetched.remote, fetched.local, verify=verify)


def _open_ranged(
    session: CacheSession, fetched: list[_Fetched], expand: bool, verify: str, check_index: bool
) -> list[ShardFile]:
    """Cached and range-read shards, with the checks ``open_committed`` makes (one dataset
    and commit, matching ``.db`` files). The range-read ones share one read plan and the
    cache space left, reserved now, for the pieces they fetch."""
    shards: list[ShardFile] = []
    try:
        for f in fetched:
            shards.append(_open_shard(f, verify))
        if expand:
            shards.sort(key=lambda s: s.meta.shard_index)
        check_consistent(shards, expand)
        if check_index:
            for shard in shards:
                check_index_db(shard.path, shard.meta)
        ranged = [s for s in shards if isinstance(s, RangeShardFile)]
        want = sum(s.size for s in ranged)
        budget, release = session.reserve_pieces(ranged[0].path.parent, want)
        reads = RemoteReads(
            sum(s.meta.num_rows for s in shards), ranged[0].path.parent, budget, release
        )
        first = 0
        for shard in shards:
            if isinstance(shard, RangeShardFile):
                shard.reads, shard.shard_no, shard.first_row = reads, ranged.index(shard), first
            first += shard.meta.num_rows
        return shards
    except BaseException:
        for shard in shards:
            shard.close()
        raise


def _as_list(
    dataset_files: PathArg,
) -> list[str | os.PathLike[str]]:
    if isinstance(dataset_files, os.PathLike):
        return [dataset_files]
    return list(dataset_files)


def _fetch_data(session: CacheSession, remote: RemoteFile, options: dict[str, Any]) -> _Fetched:
    """Fetch one shard into the cache when it can hold it; else it is read by ranges."""
    url = remote.url
    folder = session.cache.folder(url_parent(url), options)
    local = session.fetch(remote, folder, lambda path: _check_shard(path, url))
    return _Fetched(folder / url_basename(url), remote) if local is None else _Fetched(local)


def _fetch_db(
    session: CacheSession, remote: RemoteFile, options: dict[str, Any], need_index: bool
) -> None:
    """Fetch the ``.db`` of the shard ``remote`` into the cache."""
    url = remote.url
    try:
        db = remote_file(url + DB_SUFFIX, options)
    except DatasetNotFoundError:
        if need_index:
            raise
        return  # the reader reports the missing .db when it needs it
    # A .db is committed with its data file: a new data file means a new .db.
    db = dataclasses.replace(db, tag=f"{db.tag}:{remote.tag}")
    folder = session.cache.folder(url_parent(url), options)
    if session.fetch(db, folder, lambda path: _check_db(path, db.url)) is None:
        raise ArgumentError(
            f"{db.url!r} does not fit in the remote cache; raise MRECORD_CACHE_BYTES"
        )


def _with_trailer(remote: RemoteFile) -> RemoteFile:
    """Add the shard's trailer to its version tag (one small range request).

    The trailer holds the metadata checksum, which changes with every commit
    (dataset id, generation), so a rewritten shard is never taken for the cached
    one, even where the server's ETag or Last-Modified cannot tell them apart.
    """
    if remote.size < TRAILER_SIZE:
        return remote  # not a shard: the download check says so
    trailer = remote.read_range(remote.size - TRAILER_SIZE, remote.size)
    return dataclasses.replace(remote, tag=f"{remote.tag}:{trailer.hex()}")


def _check_shard(path: Path, url: str) -> None:
    """Every checksum of a downloaded shard (metadata and each chunk) must match."""
    try:
        with ShardFile(path, verify="always") as shard:
            for page in range(shard.meta.num_pages):
                for col in range(len(shard.meta.schema.fields)):
                    shard.check_chunk(page, col)
    except MrecordError as exc:
        raise type(exc)(
            f"downloaded {url!r} is damaged, nothing was cached: {exc}",
            **_location(exc, url),
        ) from exc


def _location(exc: MrecordError, url: str) -> dict[str, Any]:
    if isinstance(exc, CorruptFileError):
        return {"path": url, "page": exc.page, "offset": exc.offset}
    return {}


def _check_db(path: Path, url: str) -> None:
    """A downloaded ``.db`` must be a sound SQLite file (the reader then checks it matches)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            result = conn.execute("PRAGMA quick_check").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise CorruptFileError(f"downloaded index {url!r} is damaged: {exc}", path=url) from exc
    if result is None or result[0] != "ok":
        raise CorruptFileError(f"downloaded index {url!r} is damaged: {result!r}", path=url)
