"""Opening a dataset by URL: fetch its shards and ``.db`` files into the cache, then read
them memory-mapped exactly as local files (the hook ``DatasetReader.open`` calls)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Mapping, Sequence
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
from mrecord.reader.shard import ShardFile
from mrecord.remote.cache import CacheSession, RemoteCache
from mrecord.remote.fs import RemoteFile, remote_file
from mrecord.remote.urls import is_url, url_parent

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
    """``DatasetReader.open`` for URLs: the reader maps cached copies; it pickles by URL."""
    options = dict(storage_options or {})
    cache = cache or RemoteCache()
    with cache.session() as session:
        local = _fetch(session, dataset_files, options, need_index=check_index)
        reader = cls.open(local, columns=columns, verify=verify, check_index=check_index)
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
        local = _fetch(session, url, dict(storage_options or {}), need_index=False)
    return Path(local) if isinstance(local, str) else Path(local[0])


def _fetch(
    session: CacheSession,
    dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    options: dict[str, Any],
    need_index: bool,
) -> str | list[str]:
    if isinstance(dataset_files, str):
        first = _fetch_shard(session, dataset_files, options, need_index)
        with ShardFile(first, verify="never") as shard:
            names = shard.meta.shard_names
        if len(names) > 1:
            parent = url_parent(dataset_files)
            for name in names:
                if name != first.name:
                    _fetch_shard(session, f"{parent}/{name}", options, need_index)
        return str(first)
    urls = _as_list(dataset_files)
    if not all(is_url(u) for u in urls):
        raise ArgumentError(
            f"dataset_files mixes URLs and local paths: {[str(u) for u in urls]!r}; "
            "read them as two datasets"
        )
    return [str(_fetch_shard(session, str(u), options, need_index)) for u in urls]


def _as_list(
    dataset_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> list[str | os.PathLike[str]]:
    if isinstance(dataset_files, os.PathLike):
        return [dataset_files]
    return list(dataset_files)


def _fetch_shard(
    session: CacheSession, url: str, options: dict[str, Any], need_index: bool
) -> Path:
    """Fetch one shard and its ``.db`` into the cache; returns the shard's local path."""
    remote = _with_trailer(remote_file(url, options))
    folder = session.cache.folder(url_parent(url), options)
    local = session.fetch(remote, folder, lambda path: _check_shard(path, url))
    if local is None:
        raise ArgumentError(
            f"{url!r} is {remote.size:,} bytes, more than the whole remote cache "
            f"({session.cache.max_bytes:,} bytes, $MRECORD_CACHE_BYTES) can hold, or the cache "
            "is full of files other processes are using; raise MRECORD_CACHE_BYTES or point "
            "MRECORD_CACHE_DIR at a larger disk"
        )
    try:
        db = remote_file(url + DB_SUFFIX, options)
    except DatasetNotFoundError:
        if need_index:
            raise
        return local  # the reader reports the missing .db when it needs it
    # A .db is committed with its data file: a new data file means a new .db.
    db = dataclasses.replace(db, tag=f"{db.tag}:{remote.tag}")
    if session.fetch(db, folder, lambda path: _check_db(path, db.url)) is None:
        raise ArgumentError(
            f"{db.url!r} does not fit in the remote cache; raise MRECORD_CACHE_BYTES"
        )
    return local


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
