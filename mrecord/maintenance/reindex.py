"""``reindex``: rebuild the ``.db`` indexes of a dataset from its data files.

The data files are the source of truth: every shard's page directory gives each
row's page and slot, and the index fields are read back from the pages. The new
``.db`` files are published by the same :class:`~mrecord.storage.transaction.Transaction`
as every write (lock, recovery, journal, publish), so a reader never sees a half-built
index and a process killed at any instant leaves the old ``.db`` files usable or the new
ones complete. The lock is taken before the data files are read: the index is built from
the generation that is committed while no writer can append.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mrecord.errors import MrecordError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.naming import db_path
from mrecord.storage.transaction import StagedShard, Transaction

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
    txn, shards = Transaction.begin_reindex(Path(dataset_file))
    try:
        reader = DatasetReader(shards)
    except BaseException:
        for shard in shards:
            shard.close()
        txn.abort()
        raise
    try:
        if start is not None:
            start(reader.num_rows)
        head = reader.shards[0].meta
        staged = []
        for shard in reader.shards:
            meta = shard.meta
            index_values = {}
            if meta.index_fields:
                sub = DatasetReader([shard], columns=list(meta.index_fields))
                index_values = dict(sub.read_rows(range(meta.num_rows)).columns)
            # Each shard's .db partial is written now, so only one shard's values are held.
            txn.stage_index(StagedShard(shard.path, meta, 0, index_values, index_only=True))
            staged.append(StagedShard(shard.path, meta, index_only=True))
            if progress is not None:
                progress(meta.num_rows)
        txn.commit(head.dataset_id, head.generation, staged)
    except BaseException as exc:
        txn.abort()  # before the commit point: every partial removed; after it: a no-op
        if isinstance(exc, OSError) and not isinstance(exc, MrecordError):
            raise txn.storage_error(exc, "rebuild index of") from exc
        raise
    finally:
        reader.close()
    return [db_path(s.final) for s in staged]
