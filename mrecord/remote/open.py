"""Opening a dataset by URL: fetch its shards and ``.db`` files into the cache, then read
them memory-mapped exactly as local files (the hook ``DatasetReader.open`` calls)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrecord.errors import (
    ArgumentError,
    CorruptFileError,
    DatasetNotFoundError,
    MrecordError,
)
from mrecord.format.index_layout import DB_SUFFIX
from mrecord.format.layout import TRAILER_SIZE
from mrecord.reader.index_check import check_index_db
from mrecord.reader.shard import ShardFile
from mrecord.remote.cache import CacheSession, RemoteCache
from mrecord.remote.fs import RemoteFile, remote_file
from mrecord.remote.ranged import RangeShardFile
from mrecord.remote.urls import is_url, url_basename, url_parent

if TYPE_CHECKING:
    from mrecord.reader.dataset_reader import DatasetReader

__all__ = ["fetch_dataset", "open_remote"]


def open_remote(
    cls: type[DatasetReader],
    dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    columns: Sequence[str] | None,
    verify: str,
    check_index: bool,
    storage_options: Mapping[str, Any] | None,
    cache: RemoteCache | None = None,
) -> DatasetReader:
    """``DatasetReader.open`` for URLs: the reader maps cached copies (or reads shards too big
    for the cache with range requests); it pickles by URL."""
    options = dict(storage_options or {})
    cache = cache or RemoteCache()
    with cache.session() as session:
        fetched, expand = _fetch(session, dataset_files, options, need_index=check_index)
        if all(f.remote is None for f in fetched):
            local = str(fetched[0].local) if expand else [str(f.local) for f in fetched]
            reader = cls.open(local, columns=columns, verify=verify, check_index=check_index)
        else:
            reader = _open_ranged(cls, fetched, expand, columns, verify, check_index)
    given = dataset_files if isinstance(dataset_files, str) else _as_list(dataset_files)
    reader._open_args = {
        "dataset_files": given,
        "columns": columns,
        "verify": verify,
        "check_index": check_index,
        "storage_options": options,
    }
    return reader


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
    dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    options: dict[str, Any],
    need_index: bool,
) -> tuple[list[_Fetched], bool]:
    """Fetch the shards named (one URL: it and its siblings); returns them and whether
    siblings were expanded."""
    if isinstance(dataset_files, str):
        first = _fetch_shard(session, dataset_files, options, need_index)
        with _open_shard(first, "never") as shard:
            names = shard.meta.shard_names
        fetched = [first]
        if len(names) > 1:
            parent = url_parent(dataset_files)
            for name in names:
                if name != first.local.name:
                    fetched.append(_fetch_shard(session, f"{parent}/{name}", options, need_index))
        return fetched, True
    urls = _as_list(dataset_files)
    if not all(is_url(u) for u in urls):
        raise ArgumentError(
            f"dataset_files mixes URLs and local paths: {[str(u) for u in urls]!r}; "
            "read them as two datasets"
        )
    return [_fetch_shard(session, str(u), options, need_index) for u in urls], False


def _open_shard(fetched: _Fetched, verify: str) -> ShardFile:
    if fetched.remote is None:
        return ShardFile(fetched.local, verify=verify)
    return RangeShardFile(fetched.remote, fetched.local, verify=verify)


def _open_ranged(
    cls: type[DatasetReader],
    fetched: list[_Fetched],
    expand: bool,
    columns: Sequence[str] | None,
    verify: str,
    check_index: bool,
) -> DatasetReader:
    """A reader over cached and range-read shards, with the checks ``DatasetReader.open`` makes
    (one dataset and commit, matching ``.db`` files)."""
    from mrecord.reader.dataset_reader import _check_consistent

    shards: list[ShardFile] = []
    try:
        for f in fetched:
            shards.append(_open_shard(f, verify))
        if expand:
            shards.sort(key=lambda s: s.meta.shard_index)
        _check_consistent(shards, expand)
        if check_index:
            for shard in shards:
                check_index_db(shard.path, shard.meta)
        return cls(shards, columns)
    except BaseException:
        for shard in shards:
            shard.close()
        raise


def _as_list(
    dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> list[str | os.PathLike[str]]:
    if isinstance(dataset_files, os.PathLike):
        return [dataset_files]
    return list(dataset_files)


def _fetch_shard(
    session: CacheSession, url: str, options: dict[str, Any], need_index: bool
) -> _Fetched:
    """Fetch one shard (when the cache can hold it) and its ``.db`` into the cache."""
    remote = _with_trailer(remote_file(url, options))
    folder = session.cache.folder(url_parent(url), options)
    local = session.fetch(remote, folder, lambda path: _check_shard(path, url))
    fetched = _Fetched(folder / url_basename(url), remote) if local is None else _Fetched(local)
    try:
        db = remote_file(url + DB_SUFFIX, options)
    except DatasetNotFoundError:
        if need_index:
            raise
        return fetched  # the reader reports the missing .db when it needs it
    # A .db is committed with its data file: a new data file means a new .db.
    db = dataclasses.replace(db, tag=f"{db.tag}:{remote.tag}")
    if session.fetch(db, folder, lambda path: _check_db(path, db.url)) is None:
        raise ArgumentError(
            f"{db.url!r} does not fit in the remote cache; raise MRECORD_CACHE_BYTES"
        )
    return fetched


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
