"""Finding a dataset from what a person typed: a shard, a shard's base name, or a folder.

``FileWriter("data.mrecord", shard_num=4)`` writes ``data.mrecord0`` ...
``data.mrecord3``; a user then often types ``data.mrecord``. :func:`missing_hint`
turns that into "did you mean 'data.mrecord0'?", and :func:`locate_dataset` also
accepts a folder that holds exactly one dataset's shards.
"""

from __future__ import annotations

import os
from pathlib import Path

from mrecord.errors import ArgumentError, DatasetNotFoundError, MrecordError
from mrecord.format.index_layout import DB_SUFFIX
from mrecord.format.layout import HEADER_MAGIC
from mrecord.storage.shard import read_shard_metadata

__all__ = ["locate_dataset", "missing_hint"]


def missing_hint(path: Path) -> str:
    """For a missing ``path``: "did you mean '<path>0'?" when its shards exist, else ""."""
    try:
        names = os.listdir(path.parent)
    except OSError:
        return ""
    stem = path.name
    shards = sorted(
        (name for name in names if name.startswith(stem) and name[len(stem) :].isdigit()),
        key=lambda name: int(name[len(stem) :]),
    )
    if not shards:
        return ""
    return (
        f"did you mean {str(path.with_name(shards[0]))!r}? (a dataset of {len(shards)} shards "
        "is opened by naming any one of them)"
    )


def locate_dataset(arg: str | os.PathLike[str]) -> Path:
    """The shard file to open for ``arg``: the file itself, or the first shard of the one
    dataset in the folder ``arg``. DatasetNotFoundError (with a hint) when there is none."""
    path = Path(arg)
    if path.is_dir():
        return _only_dataset_in(path)
    if not path.exists():
        hint = missing_hint(path)
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
