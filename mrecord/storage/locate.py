"""Finding a dataset from what a person typed: a shard, a shard's base name, or a folder.

``FileWriter("data.mrecord", shard_num=4)`` writes ``data.mrecord0`` ...
``data.mrecord3``; a user then often types ``data.mrecord``, which
:func:`locate_dataset` (and ``open_committed``) resolve to the first shard through the
dataset name recorded in the shards' metadata; it also accepts a folder that holds
exactly one dataset's shards. Any other missing name whose numbered files exist gets
:func:`missing_hint`'s "did you mean 'data.mrecord00'? (a dataset of 16 shards ...)".
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from mrecord.errors import ArgumentError, DatasetNotFoundError, MrecordError
from mrecord.format.index_layout import DB_SUFFIX
from mrecord.format.layout import HEADER_MAGIC
from mrecord.storage.naming import PARTIAL_SUFFIX
from mrecord.storage.shard import read_shard_metadata

__all__ = [
    "base_name_shard",
    "leftover_note",
    "locate_dataset",
    "missing_hint",
    "partial_leftovers",
]


def _numbered(path: Path) -> list[Path]:
    """The files named ``path`` + digits, lowest number first (shards of a sharded name)."""
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    stem = path.name
    found = [name for name in names if name.startswith(stem) and name[len(stem) :].isdigit()]
    return [path.with_name(n) for n in sorted(found, key=lambda n: (len(n), int(n[len(stem) :])))]


def base_name_shard(path: Path) -> Path | None:
    """The first shard of the dataset written as ``path`` (``train.mrecord`` → ``…0``).

    ``FileWriter("train.mrecord", shard_num=4)`` names its shards ``train.mrecord0`` ..
    ``train.mrecord3`` and records ``train.mrecord`` as the dataset's name in each;
    only a shard whose metadata says so is returned (``x.mrecord`` is not the name of
    the dataset ``x.mrecord1`` = ``x.mrecord10``, ``x.mrecord11``). None otherwise.
    """
    for candidate in _numbered(path):
        try:
            meta = read_shard_metadata(candidate)
        except MrecordError:
            continue
        if meta.dataset_name == path.name and candidate.name in meta.shard_names:
            return candidate.with_name(meta.shard_names[0])
    return None


def partial_leftovers(folder: Path, dataset_name: str) -> list[Path]:
    """The ``*.mrecord-partial`` files of writes under ``dataset_name`` in ``folder``.

    A write killed before its commit leaves them (a running write has them too); they
    are never part of a dataset.
    """
    pattern = f"{glob.escape(dataset_name)}*{PARTIAL_SUFFIX}"
    return sorted(folder.glob(pattern))


def leftover_note(leftovers: list[Path]) -> str:
    """What the partial files ``leftovers`` are, for an error message or ``mrecord info``."""
    shown = ", ".join(repr(p.name) for p in leftovers[:3])
    more = f" and {len(leftovers) - 3} more" if len(leftovers) > 3 else ""
    return (
        f"{len(leftovers)} partial file(s) ({shown}{more}) are left by an interrupted write, "
        "or belong to one still running; they are not part of any committed dataset: "
        "delete them once no write is running"
    )


def missing_hint(path: Path) -> str:
    """For a missing ``path``: "did you mean '<first shard>'?" when a dataset's shards start
    with its name, with that dataset's shard count (from its metadata), else ""."""
    shards = _numbered(path)
    if not shards:
        return ""
    first, count = shards[0], len(shards)
    try:
        meta = read_shard_metadata(first)
    except MrecordError:
        pass  # not readable: suggest it anyway, with the count of names seen
    else:
        first, count = first.with_name(meta.shard_names[0]), len(meta.shard_names)
    return (
        f"did you mean {str(first)!r}? (a dataset of {count} shards "
        "is opened by naming any one of them)"
    )


def locate_dataset(arg: str | os.PathLike[str]) -> Path:
    """The shard file to open for ``arg``: the file itself, the first shard of the dataset
    written under the name ``arg`` (its base name), or the first shard of the one dataset
    in the folder ``arg``. DatasetNotFoundError (with a hint) when there is none."""
    path = Path(arg)
    if path.is_dir():
        return _only_dataset_in(path)
    if not path.exists():
        located = base_name_shard(path)
        if located is not None:
            return located
        hint = missing_hint(path)
        leftovers = partial_leftovers(path.parent, path.name)
        if leftovers:
            hint = "; ".join(filter(None, [hint, leftover_note(leftovers)]))
        raise DatasetNotFoundError(
            f"data file {str(path)!r} does not exist" + (f"; {hint}" if hint else "")
        )
    return path


def _only_dataset_in(folder: Path) -> Path:
    """The lowest-numbered shard of the single dataset whose shards ``folder`` holds."""
    firsts: dict[str, tuple[int, Path]] = {}
    for path in sorted(folder.iterdir()):
        if not _looks_like_shard(path):
            continue
        try:
            meta = read_shard_metadata(path)
        except MrecordError:
            continue  # damaged or not ours: `mrecord verify FILE` tells which
        best = firsts.get(meta.dataset_id)
        if best is None or meta.shard_index < best[0]:
            firsts[meta.dataset_id] = (meta.shard_index, path)
    if not firsts:
        raise DatasetNotFoundError(f"folder {str(folder)!r} holds no mrecord data file")
    if len(firsts) > 1:
        names = sorted(str(p.name) for _, p in firsts.values())
        raise ArgumentError(
            f"folder {str(folder)!r} holds {len(firsts)} datasets ({', '.join(names)}); "
            "name one of their files"
        )
    return next(iter(firsts.values()))[1]


def _looks_like_shard(path: Path) -> bool:
    if path.name.endswith(DB_SUFFIX) or ".mrecord-" in path.name or not path.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(len(HEADER_MAGIC)) == HEADER_MAGIC
    except OSError:
        return False
