"""``reindex``: rebuild the ``.db`` indexes of a dataset from its data files.

The data files are the source of truth: every shard's page directory gives each
row's page and slot, and the index fields are read back from the pages. The new
``.db`` files are published with the same journaled commit as a write, under the
dataset's lock, so a reader never sees a half-built index. The lock is taken before
the data files are read: the index is built from the generation that is committed
while no writer can append.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from mrecord.errors import MrecordError, StorageError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import commit as commit_mod
from mrecord.storage.commit import DatasetLock
from mrecord.storage.committed import dataset_name_of, open_committed
from mrecord.storage.failures import storage_error
from mrecord.storage.index_db import write_index_db
from mrecord.storage.naming import db_path, journal_path, partial_path

__all__ = ["reindex"]


def reindex(
    dataset_file: str | os.PathLike[str],
    *,
    progress: Callable[[int], None] | None = None,
    start: Callable[[int], None] | None = None,
) -> list[Path]:
    """Rebuild the ``.db`` of every shard of the dataset; returns the ``.db`` paths written.

    ``start`` is called once with the dataset's row count, then ``progress`` with
    the rows of each shard as its index is built.
    """
    path = Path(dataset_file)
    # The lock first, then recover and read the shards under it: read before the lock, an
    # append committing in between would be indexed as the generation before it.
    name = dataset_name_of(path)
    directory = path.parent if str(path.parent) else Path(".")
    lock = DatasetLock(directory, name)
    try:
        lock.acquire(wait=0.5)
    except OSError as exc:
        if isinstance(exc, MrecordError):
            raise
        raise _reindex_error(exc, lock.path, durable=False) from exc
    try:
        try:
            commit_mod.recover_locked(directory, name)
            shards = open_committed(path, verify="always", check_index=False, lock_held=True)
        except OSError as exc:
            if isinstance(exc, MrecordError):
                raise
            raise _reindex_error(exc, directory, durable=False) from exc
        try:
            reader = DatasetReader(shards)
        except BaseException:
            for shard in shards:
                shard.close()
            raise
        if start is not None:
            start(reader.num_rows)
        head = reader.shards[0].meta
        try:
            targets = []
            for shard in reader.shards:
                meta = shard.meta
                index_values = {}
                if meta.index_fields:
                    sub = DatasetReader([shard], columns=list(meta.index_fields))
                    block = sub.read_rows(range(meta.num_rows))
                    index_values = dict(block.columns)
                target = db_path(shard.path)
                write_index_db(partial_path(target), meta, 0, index_values)
                targets.append(target)
                if progress is not None:
                    progress(meta.num_rows)
            commit_mod.write_journal_and_publish(
                directory, name, head.dataset_id, head.generation, targets
            )
        except BaseException as exc:
            durable = journal_path(directory, name).exists()
            if not durable:
                with contextlib.suppress(OSError):  # never hide the failure itself
                    commit_mod.remove_partials(db_path(s.path) for s in reader.shards)
            if isinstance(exc, OSError) and not isinstance(exc, MrecordError):
                raise _reindex_error(exc, directory, durable) from exc
            if isinstance(exc, StorageError):
                raise _reindex_error(exc, directory, durable) from exc
            raise
        finally:
            reader.close()
    finally:
        lock.release()
    return targets


def _reindex_error(exc: OSError, where: Path, durable: bool) -> StorageError:
    state = (
        "the new indexes are durable (journal written); the next open of the dataset "
        "publishes them"
        if durable
        else "nothing of the rebuild is visible; the data files and the previous .db files "
        "are as they were"
    )
    return storage_error(exc, operation="rebuild index: failed on", path=where, state=state)
