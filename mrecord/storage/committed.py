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
from mrecord.storage.descriptors import make_room
from mrecord.storage.index_db import check_index_db
from mrecord.storage.locate import base_name_shard, locate_dataset, missing_hint
from mrecord.storage.naming import PathArg, journal_path, resolve_files, sibling_paths
from mrecord.storage.shard import ShardFile, read_shard_metadata

__all__ = [
    "check_consistent",
    "dataset_name_of",
    "journal_names_for",
    "open_committed",
    "sibling_problems",
]

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
    attempt = -1
    while True:  # every path below returns, retries, or raises on the last attempt
        attempt += 1
        try:
            shards = _open_shards(paths, expand, verify, recover)
        except CorruptFileError:
            # An append publishing right now writes its tail after a shard's committed
            # end: the file's last bytes are not a trailer until it finishes. Its journal
            # exists for that whole time; wait for it (recover) and look again.
            if attempt == _OPEN_RETRIES - 1 or not recover or not _journal_near(paths[0]):
                raise
            for name in journal_names_for(paths[0]):
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
            commit_mod.recover(path.parent, name) for name in journal_names_for(path)
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
    make_room(1 + len(rest))
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


def journal_names_for(path: Path) -> list[str]:
    """Names of the datasets whose commit journal, next to ``path``, commits ``path``.

    Used when ``path`` cannot be read (an append's tail half copied, a first commit not
    renamed yet), so its metadata cannot say which dataset it belongs to. A dataset
    created as ``NAME`` with several shards names them ``NAME`` + digits, so the
    candidates are ``path``'s name less 0, 1, 2, ... of its trailing digits (``ds10`` may
    be shard 10 of ``ds`` or shard 0 of ``ds1``); a candidate counts only when its
    journal names ``path`` (a damaged journal counts: recovering it says it is damaged).
    """
    name = path.name
    digits = len(name) - len(name.rstrip("0123456789"))
    found = []
    for cut in range(digits + 1):
        candidate = name[: len(name) - cut]
        journal = journal_path(path.parent, candidate)
        if not candidate or not journal.exists():
            continue
        try:
            done = commit_mod.read_journal(journal)
        except FileNotFoundError:
            continue  # finished meanwhile
        except CorruptFileError:
            found.append(candidate)
            continue
        if name in done.files or any(a.name == name for a in done.appends):
            found.append(candidate)
    return found


def dataset_name_of(path: Path) -> str:
    """The name the dataset of shard ``path`` was created as (its lock and journal are
    named after it), also while an interrupted commit leaves ``path`` unreadable.

    Writers call this before taking the lock, then recover and read the shard again
    under it: what they read before the lock is only its name, which no commit changes.
    """
    try:
        return read_shard_metadata(path).dataset_name
    except (CorruptFileError, DatasetNotFoundError) as exc:
        names = journal_names_for(path)
        if len(names) == 1:
            return names[0]
        hint = missing_hint(path) if isinstance(exc, DatasetNotFoundError) else ""
        if hint:
            raise DatasetNotFoundError(f"{exc}; {hint}") from None
        raise


def _journal_near(path: Path) -> bool:
    return bool(journal_names_for(path))


def check_consistent(shards: list[ShardFile], expand: bool) -> None:
    """Raise the first of :func:`sibling_problems` (ForeignShardError, or SchemaError for a
    list of files whose schemas differ)."""
    problems = sibling_problems(shards, expand)
    if problems:
        kind, message = problems[0]
        raise kind(message)


def sibling_problems(
    shards: list[ShardFile], expand: bool
) -> list[tuple[type[ForeignShardError] | type[SchemaError], str]]:
    """Why ``shards`` do not belong together, as (error type, message); empty when they do.

    With ``expand`` (the siblings of one shard): one dataset id, generation, sibling list
    and schema, and each shard where its index says (``NAME1`` holds shard 1): a shard
    copied over its sibling is intact and of the right dataset, and only its index tells.
    A list given by the caller: one schema, and no shard twice. ``DatasetReader.open``
    raises the first problem; ``verify_dataset`` reports them all.
    """
    problems: list[tuple[type[ForeignShardError] | type[SchemaError], str]] = []
    head = shards[0].meta
    seen: dict[tuple[str, int], ShardFile] = {}
    for shard in shards:
        meta, where = shard.meta, str(shard.path)
        twin = seen.setdefault((meta.dataset_id, meta.shard_index), shard)
        if twin is not shard:
            problems.append((ForeignShardError, (
                f"{where!r} is shard {meta.shard_index} of dataset {meta.dataset_id} again "
                f"(so is {str(twin.path)!r}): a shard file was copied over another; restore "
                "it from a backup or rewrite the dataset"
            )))
        if expand:
            problems.extend((ForeignShardError, m) for m in _sibling_mismatch(shard, shards[0]))
        elif meta.schema.to_dict() != head.schema.to_dict() and [
            (f.name, f.type, f.shape) for f in meta.schema.fields
        ] != [(f.name, f.type, f.shape) for f in head.schema.fields]:
            problems.append((SchemaError, (
                f"{where!r} has schema {meta.schema.to_dict()!r}, but "
                f"{str(shards[0].path)!r} has {head.schema.to_dict()!r}; files read together must "
                "share a schema"
            )))
    return problems


def _sibling_mismatch(shard: ShardFile, first: ShardFile) -> list[str]:
    """How ``shard`` differs from what a sibling of ``first`` must be."""
    meta, head, where = shard.meta, first.meta, str(shard.path)
    if meta.dataset_id != head.dataset_id:
        return [
            f"{where!r} belongs to another dataset (id {meta.dataset_id}, expected "
            f"{head.dataset_id}); a stray file replaced a sibling"
        ]
    found = []
    if meta.generation != head.generation:
        found.append(
            f"{where!r} is from commit generation {meta.generation}, its siblings from "
            f"{head.generation}: an append did not finish; run `mrecord verify`"
        )
    if meta.shard_names != head.shard_names:
        found.append(f"{where!r} names other siblings than {str(first.path)!r}")
    names = meta.shard_names
    if len(names) > 1 and shard.path.name in names and names.index(shard.path.name) != (
        meta.shard_index
    ):
        found.append(
            f"{where!r} holds shard {meta.shard_index} of its dataset "
            f"({names[meta.shard_index]!r}), not shard {names.index(shard.path.name)}: a shard "
            "file was copied or renamed over its sibling; restore it from a backup or rewrite "
            "the dataset"
        )
    if meta.schema != head.schema:
        found.append(
            f"{where!r} has another schema than {str(first.path)!r} "
            f"({meta.schema.to_dict()!r} vs {head.schema.to_dict()!r}); one writer gives every "
            "shard the same schema: the file was changed"
        )
    return found


def _commit_in_progress(shard: ShardFile) -> bool:
    """True while a writer is publishing: its journal exists from before the first rename
    until after the last one."""
    return journal_path(shard.path.parent, shard.meta.dataset_name).exists()
