"""Opening the committed generation of a dataset: one procedure for readers and appenders.

:func:`open_committed` finds a dataset's shards, finishes an interrupted commit
(roll forward through the journal), and checks that the files belong together
(same dataset id, generation and sibling list; with ``check_index``, each ``.db``
matches its data file). A commit publishing while we read can make two files look
mismatched for an instant, so a mismatch is retried until it settles.

``DatasetReader.open`` and ``FileWriter.open_for_append`` both use it; a writer
that already holds the dataset lock passes ``lock_held=True`` (it has rolled the
journal forward itself, and taking the lock again from the same process would fail).
"""

from __future__ import annotations

import time
from pathlib import Path

from mrecord.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    ForeignShardError,
    IndexMismatchError,
    SchemaError,
)
from mrecord.storage import commit as commit_mod
from mrecord.storage.index_db import check_index_db
from mrecord.storage.locate import base_name_shard, locate_dataset, missing_hint
from mrecord.storage.naming import PathArg, journal_path, resolve_files, sibling_paths
from mrecord.storage.shard import ShardFile

__all__ = ["check_consistent", "open_committed"]

_OPEN_RETRIES = 100
_SETTLE_RETRIES = 3


def open_committed(
    dataset_files: PathArg,
    *,
    verify: str = "once",
    check_index: bool = True,
    lock_held: bool = False,
) -> list[ShardFile]:
    """Open one shard (its siblings are found from its metadata) or a list of shards.

    Returns the open shards, in shard order when siblings were expanded; the caller
    closes them. Raises :class:`ForeignShardError` / :class:`IndexMismatchError` when
    the files do not belong together once no commit is in progress.
    """
    paths, expand = resolve_files(dataset_files)
    recover = not lock_held
    for attempt in range(_OPEN_RETRIES):
        try:
            shards = _open_shards(paths, expand, verify, recover)
        except CorruptFileError:
            # An append publishing right now writes its tail after a shard's committed
            # end: the file's last bytes are not a trailer until it finishes. Its journal
            # exists for that whole time; wait for it (recover) and look again.
            if attempt == _OPEN_RETRIES - 1 or not recover or not _journal_near(paths[0]):
                raise
            for name in _dataset_name_guesses(paths[0]):
                commit_mod.recover(paths[0].parent, name)
            time.sleep(0.01)
            continue
        try:
            check_consistent(shards, expand)
            if check_index:
                for shard in shards:
                    check_index_db(shard.path, shard.meta)
            return shards
        except (ForeignShardError, IndexMismatchError):
            _close_all(shards)
            # A commit may be publishing right now: give it a moment, then look again.
            # A commit that finished between our reads of two files leaves no journal, so
            # look again a few times even without one before calling the files mismatched.
            settled = attempt >= _SETTLE_RETRIES and not _commit_in_progress(shards[0])
            if attempt == _OPEN_RETRIES - 1 or settled:
                raise
            time.sleep(0.01)
        except BaseException:
            _close_all(shards)
            raise
    raise AssertionError("unreachable")


def _close_all(shards: list[ShardFile]) -> None:
    for shard in shards:
        shard.close()


def _open_first(path: Path, verify: str, recover: bool) -> ShardFile:
    """Open ``path``; when it is missing, finish a durable first commit that names it.

    A folder of one dataset, or the base name of a sharded one, opens its first shard.
    """
    if path.is_dir():
        path = locate_dataset(path)
    try:
        return ShardFile(path, verify=verify)
    except DatasetNotFoundError as exc:
        # A dataset's first commit is durable once its journal exists, before any rename.
        if not recover or not any(
            commit_mod.recover(path.parent, name) for name in _dataset_name_guesses(path)
        ):
            located = base_name_shard(path)  # "train.mrecord" of train.mrecord0..3
            if located is not None:
                return ShardFile(located, verify=verify)
            hint = missing_hint(path)  # "did you mean 'data.mrecord0'?"
            if hint:
                raise DatasetNotFoundError(f"{exc}; {hint}") from None
            raise
    return ShardFile(path, verify=verify)


def _open_shards(paths: list[Path], expand: bool, verify: str, recover: bool) -> list[ShardFile]:
    first = _open_first(paths[0], verify, recover)
    if recover and commit_mod.recover(first.path.parent, first.meta.dataset_name):
        first.close()
        first = ShardFile(first.path, verify=verify)
    if not expand:
        rest = paths[1:]
    else:
        siblings = sibling_paths(first.path, first.meta.shard_names)
        rest = [p for p in siblings if p.name != first.path.name]
    shards = [first]
    try:
        for path in rest:
            shards.append(ShardFile(path, verify=verify))
    except BaseException:
        _close_all(shards)
        raise
    if expand:
        shards.sort(key=lambda s: s.meta.shard_index)
    return shards


def _dataset_name_guesses(path: Path) -> list[str]:
    """The dataset name ``path`` may belong to, when its metadata cannot be read."""
    return [n for n in dict.fromkeys([path.name, path.name.rstrip("0123456789")]) if n]


def _journal_near(path: Path) -> bool:
    return any(journal_path(path.parent, n).exists() for n in _dataset_name_guesses(path))


def check_consistent(shards: list[ShardFile], expand: bool) -> None:
    """Raise unless ``shards`` belong together: with ``expand`` (siblings of one shard) one
    dataset id, generation and sibling list; a list given by the caller, one schema."""
    head = shards[0].meta
    for shard in shards:
        meta = shard.meta
        if expand:
            if meta.dataset_id != head.dataset_id:
                raise ForeignShardError(
                    f"{str(shard.path)!r} belongs to another dataset (id {meta.dataset_id}, "
                    f"expected {head.dataset_id}); a stray file replaced a sibling"
                )
            if meta.generation != head.generation:
                raise ForeignShardError(
                    f"{str(shard.path)!r} is from commit generation {meta.generation}, its "
                    "siblings "
                    f"from {head.generation}: an append did not finish; run `mrecord verify`"
                )
            if meta.shard_names != head.shard_names:
                raise ForeignShardError(
                    f"{str(shard.path)!r} names other siblings than {str(shards[0].path)!r}"
                )
            if meta.schema != head.schema:
                raise ForeignShardError(
                    f"{str(shard.path)!r} has another schema than {str(shards[0].path)!r} "
                    f"({meta.schema.to_dict()!r} vs {head.schema.to_dict()!r}); one writer "
                    "gives every shard the same schema: the file was changed"
                )
        elif meta.schema.to_dict() != head.schema.to_dict() and [
            (f.name, f.type, f.shape) for f in meta.schema.fields
        ] != [(f.name, f.type, f.shape) for f in head.schema.fields]:
            raise SchemaError(
                f"{str(shard.path)!r} has schema {meta.schema.to_dict()!r}, but "
                f"{str(shards[0].path)!r} has {head.schema.to_dict()!r}; files read together must "
                "share a schema"
            )


def _commit_in_progress(shard: ShardFile) -> bool:
    """True while a writer is publishing: its journal exists from before the first rename
    until after the last one."""
    return journal_path(shard.path.parent, shard.meta.dataset_name).exists()
