"""Every name a dataset's files have on disk, in one place.

A dataset created as ``NAME`` with ``shard_num`` shards is::

    NAME                      one shard, or NAME0 .. NAME{k-1} (zero-padded) for k shards
    <shard>.db                each shard's SQLite index
    <final>.mrecord-partial   a file being written, before its commit publishes it
    NAME.mrecord-journal      the commit journal (exists only while a commit publishes)
    NAME.mrecord-lock         the writer lock file (flock; never removed)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from mrecord.errors import ArgumentError
from mrecord.format.index_layout import DB_SUFFIX

__all__ = [
    "DB_SUFFIX",
    "JOURNAL_SUFFIX",
    "LOCK_SUFFIX",
    "PARTIAL_SUFFIX",
    "PathArg",
    "db_path",
    "journal_path",
    "lock_path",
    "partial_path",
    "resolve_files",
    "shard_file_names",
    "sibling_paths",
]

PARTIAL_SUFFIX = ".mrecord-partial"
JOURNAL_SUFFIX = ".mrecord-journal"
LOCK_SUFFIX = ".mrecord-lock"

PathArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""What ``dataset_files`` arguments accept: one shard path or a list of shard paths."""


def shard_file_names(file_name: str | os.PathLike[str], shard_num: int) -> list[Path]:
    """MindSpore's shard naming: ``NAME`` alone, or ``NAME`` + zero-padded index."""
    base = Path(file_name)
    if shard_num == 1:
        return [base]
    width = len(str(shard_num - 1))
    return [base.with_name(base.name + str(i).zfill(width)) for i in range(shard_num)]


def db_path(data_file: Path) -> Path:
    """The ``.db`` that belongs to ``data_file``."""
    return data_file.with_name(data_file.name + DB_SUFFIX)


def partial_path(final: Path) -> Path:
    """The temporary name a file is written under before its commit."""
    return final.with_name(final.name + PARTIAL_SUFFIX)


def journal_path(directory: Path, dataset_name: str) -> Path:
    """The commit journal of the dataset created as ``dataset_name``."""
    return directory / (dataset_name + JOURNAL_SUFFIX)


def lock_path(directory: Path, dataset_name: str) -> Path:
    """The writer lock file of the dataset created as ``dataset_name``."""
    return directory / (dataset_name + LOCK_SUFFIX)


def sibling_paths(path: Path, shard_names: Sequence[str]) -> list[Path]:
    """Every shard of the dataset ``path`` belongs to, in shard order (from its metadata).

    A single-shard dataset is the file itself, whatever it is called now (so a renamed
    one-file dataset still opens); siblings are looked up next to ``path``.
    """
    if len(shard_names) == 1:
        return [path]
    return [path.parent / name for name in shard_names]


def resolve_files(dataset_files: PathArg) -> tuple[list[Path], bool]:
    """Normalize ``dataset_files``; returns (paths, expand_siblings)."""
    if isinstance(dataset_files, (str, os.PathLike)):
        return [Path(dataset_files)], True
    if (
        isinstance(dataset_files, Sequence)
        and dataset_files
        and all(isinstance(p, (str, os.PathLike)) for p in dataset_files)
    ):
        paths = [Path(p) for p in dataset_files]
        if len(set(paths)) != len(paths):
            raise ArgumentError(f"dataset_files lists a file twice: {[str(p) for p in paths]!r}")
        return paths, False
    raise ArgumentError(
        f"dataset_files must be a file path or a non-empty list of paths, got {dataset_files!r}"
    )
