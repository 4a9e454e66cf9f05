"""One commit of a dataset, from taking its lock to publishing it: what every writer drives.

``FileWriter`` (a new dataset and ``open_for_append``), the Ray sink, any other
producer of shard files (a parallel converter) and ``reindex`` commit through a
:class:`Transaction`, so the protocol of :mod:`mrecord.storage.commit` is driven in one
place::

    txn = Transaction.begin(folder, "data.mrecord", action="create")   # lock, recover
    txn.claim(finals)                   # refuse existing files unless overwriting, clear litter
    ...                                 # write each shard to partial_path(final): ShardOutput,
    ...                                 # ShardWriter or assemble_shard, then finish it (fsync)
    txn.commit(dataset_id, generation, [StagedShard(...), ...])    # .db partials, checks,
                                                                    # journal, publish, unlock

or, to add rows to a committed dataset::

    txn, shards = Transaction.begin_append(shard_file)   # lock, recover, the committed shards
    ... write each shard's tail to partial_path(shard.path) (ShardOutput(base_length=...)) ...
    txn.commit(dataset_id, generation, [StagedShard(..., base_length=E, tail_length=T), ...])

or, to rebuild the ``.db`` files of a committed dataset from its data files (``reindex``)::

    txn, shards = Transaction.begin_reindex(shard_file)  # lock, recover, the shards, verified
    for shard in shards:                                  # one at a time: bounded memory
        txn.stage_index(StagedShard(shard.path, shard.meta, index_values=..., index_only=True))
    txn.commit(dataset_id, generation, staged)           # journal names the .db files only

**At open** (:meth:`Transaction.begin`): the dataset's ``flock`` is taken (waiting up to
half a second: a reader may be finishing someone's interrupted commit), an interrupted
commit is rolled forward (:func:`~mrecord.storage.commit.recover_locked`), and
:meth:`claim` removes the partial files a killed writer left.

**Commit** (:meth:`Transaction.commit`), in this order:

1. each shard's data partial is already finished (fsync'ed) by its writer (an index-only
   commit has none: its data files stay as they are);
2. each shard's ``.db`` is written to its partial name (the new rows only when appending),
   unless :meth:`Transaction.stage_index` wrote it already;
3. checks that would otherwise fail after the commit point: no folder where a final
   belongs; an appended shard still has its committed length; room for the tails;
4. the journal is made durable: **the commit point**;
5. publish: renames, or tails + ``.db`` merges; the journal is removed; when the commit
   replaced a dataset (``overwrite``), that dataset's shards the new one does not reuse
   are removed (best effort, after the publish: a kill there leaves them, unnamed by the
   new dataset); the lock released.

A failure before step 4 removes every partial and leaves the previous generation as it
was (``state`` ABORTED); at or after it the commit is durable (``state`` COMMITTED) and the
error says the next open finishes it. Either way the lock is released.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mrecord.errors import DatasetExistsError, MrecordError, StorageError, WriterStateError
from mrecord.format.metadata import ShardMetadata
from mrecord.storage import commit as commit_mod
from mrecord.storage.commit import DatasetLock
from mrecord.storage.committed import dataset_name_of, open_committed
from mrecord.storage.failures import check_free_space, found_failure, storage_error
from mrecord.storage.index_db import IndexValues, write_index_db
from mrecord.storage.naming import db_path, journal_path, partial_path
from mrecord.storage.shard import ShardFile, read_shard_metadata

__all__ = ["CommittedShard", "StagedShard", "Transaction", "TransactionState"]

LOCK_WAIT = 0.5
"""Seconds :meth:`Transaction.begin` waits for the lock (rides out a reader's roll-forward)."""

_UNTOUCHED = "nothing was written; the dataset's files are as they were"
_DURABLE_NOTE = (
    "the commit is durable (its journal was written) but publishing stopped; the next open "
    "of the dataset finishes it"
)


class TransactionState(enum.Enum):
    """Where a :class:`Transaction` is; it holds the dataset lock only while OPEN."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class StagedShard:
    """One shard whose partial data file is finished, ready for :meth:`Transaction.commit`.

    ``final`` is the data file's name; its partial (``partial_path(final)``) holds the
    whole file, or when ``base_length`` is set, the ``tail_length`` bytes that go at
    ``base_length``. ``index_values`` are the index-field values of rows
    ``first_new_row..meta.num_rows`` (what the ``.db`` partial gets). ``index_only``: the
    data file is committed already and only its ``.db`` is replaced (``reindex``).
    """

    final: Path
    meta: ShardMetadata
    first_new_row: int = 0
    index_values: Mapping[str, IndexValues] = field(default_factory=dict)
    base_length: int | None = None
    tail_length: int = 0
    index_only: bool = False


@dataclass(frozen=True)
class CommittedShard:
    """A committed shard an append starts from: its file, metadata and committed length."""

    path: Path
    meta: ShardMetadata
    length: int


def _write_db(shard: StagedShard) -> None:
    write_index_db(
        partial_path(db_path(shard.final)), shard.meta, shard.first_new_row, shard.index_values
    )


class Transaction:
    """A writer's hold on one dataset, from :meth:`begin` to :meth:`commit` or :meth:`abort`.

    Built only by :meth:`begin` and :meth:`begin_append` (the module docstring has the
    protocol). Not thread-safe: one writer drives it.
    """

    def __init__(self, directory: Path, dataset_name: str, lock: DatasetLock, action: str):
        """Private: use :meth:`begin` or :meth:`begin_append` (they take the lock)."""
        self.directory = directory
        self.dataset_name = dataset_name
        self.state = TransactionState.OPEN
        self._lock = lock
        self._action = action
        self._finals: list[Path] = []
        # Shards of a dataset being overwritten that the new one does not reuse (a dataset
        # of 3 shards replaced by one of 2: its third), and that dataset's id.
        self._replaced: tuple[list[Path], set[str]] = ([], set())
        self.committed_generation: int | None = None
        """The generation an append or a reindex starts from (None for a new dataset)."""
        self._staged_dbs: set[Path] = set()  # .db partials stage_index wrote already

    # -- open --------------------------------------------------------------------------------

    @classmethod
    def begin(cls, directory: Path, dataset_name: str, *, action: str = "create") -> Transaction:
        """Lock dataset ``dataset_name`` in ``directory`` and finish an interrupted commit.

        ``action`` names what the caller does, for errors ("create", "append to", ...).
        A file system that refuses the lock or the recovery is a :class:`StorageError`
        saying nothing was written.
        """
        lock = DatasetLock(directory, dataset_name)
        try:
            lock.acquire(wait=LOCK_WAIT)
        except OSError as exc:
            if isinstance(exc, MrecordError):
                raise
            raise storage_error(
                exc, operation=f"{action} dataset: failed on lock file", path=lock.path,
                state=_UNTOUCHED,
            ) from exc
        txn = cls(directory, dataset_name, lock, action)
        with txn._opening(f"{action} dataset: failed on"):
            commit_mod.recover_locked(directory, dataset_name)
        return txn

    @classmethod
    def begin_append(cls, shard_file: Path) -> tuple[Transaction, list[CommittedShard]]:
        """Lock the committed dataset of ``shard_file`` (any shard) to add rows to it.

        Returns the transaction and the dataset's committed shards, read under the lock
        after any interrupted commit was finished; the shards' partial litter is removed.
        """
        directory = shard_file.parent if str(shard_file.parent) else Path(".")
        # Only the dataset's name is read before the lock (an interrupted commit may leave
        # this shard unreadable until it is rolled forward); the shards are read under it.
        name = dataset_name_of(shard_file)
        txn = cls.begin(directory, name, action="append to")
        with txn._opening("open for append: failed on"):
            opened = open_committed(shard_file, verify="never", lock_held=True)
            shards = []
            for shard in opened:
                shard.close()
                shards.append(CommittedShard(shard.path, shard.meta, shard.size))
            txn.committed_generation = max(s.meta.generation for s in shards)
            txn.claim([s.path for s in shards], overwrite=True)
        return txn, shards

    @classmethod
    def begin_reindex(cls, shard_file: Path) -> tuple[Transaction, list[ShardFile]]:
        """Lock the committed dataset of ``shard_file`` (any shard) to rebuild its ``.db``
        files.

        Returns the transaction and the dataset's committed shards, open and checked
        (``verify="always"``, the ``.db`` files not consulted), read under the lock after
        any interrupted commit was finished: an append cannot commit in between, so the
        index is built from the generation that is committed. The caller closes them.
        """
        directory = shard_file.parent if str(shard_file.parent) else Path(".")
        name = dataset_name_of(shard_file)
        txn = cls.begin(directory, name, action="reindex")
        shards: list[ShardFile] = []
        try:
            with txn._opening("rebuild index: failed on"):
                shards = open_committed(
                    shard_file, verify="always", check_index=False, lock_held=True
                )
                txn.committed_generation = max(s.meta.generation for s in shards)
                txn.claim([s.path for s in shards], overwrite=True)
        except BaseException:
            for shard in shards:
                shard.close()
            raise
        return txn, shards

    def claim(self, finals: Sequence[Path], *, overwrite: bool) -> None:
        """Name the data files this transaction writes, and clear the way for them.

        A folder where a data file or its ``.db`` belongs is refused; so are existing
        files unless ``overwrite`` (an append claims its own shards with ``overwrite``).
        Partial files a killed writer left for these names are removed.
        """
        self._need_open("claim files")
        with self._opening(f"{self._action} dataset: failed on"):
            both = [p for f in finals for p in (f, db_path(f))]
            folders = [p for p in both if p.is_dir()]
            if folders:
                raise found_failure(errno.EISDIR, folders[0])
            existing = [p for p in both if p.exists()]
            if existing and not overwrite:
                raise DatasetExistsError(
                    f"{str(existing[0])!r} already exists; pass overwrite=True to replace the "
                    "dataset, or use FileWriter.open_for_append to add rows"
                )
            self._finals = list(finals)
            if existing and self.committed_generation is None:  # replacing a dataset
                self._replaced = self._replaced_siblings()
            commit_mod.remove_partials(self._temp_finals())

    # -- commit ------------------------------------------------------------------------------

    def stage_index(self, shard: StagedShard) -> None:
        """Write ``shard``'s ``.db`` partial now (not at :meth:`commit`), so that a writer
        holding each shard's index values in turn never holds them all. A failure aborts
        the transaction (every partial removed, the lock released)."""
        self._need_open("stage an index")
        try:
            _write_db(shard)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, OSError) and not isinstance(exc, MrecordError):
                raise self.storage_error(exc, "commit") from exc
            raise
        self._staged_dbs.add(shard.final)

    def commit(
        self,
        dataset_id: str,
        generation: int,
        shards: Sequence[StagedShard],
        *,
        run_all: Callable[[Sequence[Callable[[], None]]], object] | None = None,
    ) -> None:
        """Write the ``.db`` partials, check, make the commit durable, publish, unlock.

        Every shard is whole (``base_length`` None, renamed into place) or every shard is
        a tail (an append, written after its committed end). ``run_all`` runs the
        ``.db`` writers (one call per shard; they are independent), e.g. in a thread
        pool; one after the other when None. See the module docstring for what a
        failure leaves.
        """
        self._need_open("commit")
        tails = [s.base_length is not None for s in shards]
        if any(tails) and not all(tails):
            raise WriterStateError("a commit appends to every shard or to none")
        index_only = [s.index_only for s in shards]
        if any(index_only) and not all(index_only):
            raise WriterStateError("a commit replaces the .db of every shard or of none")
        try:
            writers = [
                functools.partial(_write_db, shard)
                for shard in shards
                if shard.final not in self._staged_dbs
            ]
            if run_all is None:
                for write in writers:
                    write()
            else:
                run_all(writers)
            self._check_before_commit_point(shards)
            finals = [s.final for s in shards]
            if shards and all(index_only):
                # The data files are committed already: the journal names the .db files.
                commit_mod.write_journal_and_publish(
                    self.directory,
                    self.dataset_name,
                    dataset_id,
                    generation,
                    [db_path(f) for f in finals],
                )
            elif shards and all(tails):
                commit_mod.write_journal_and_publish(
                    self.directory,
                    self.dataset_name,
                    dataset_id,
                    generation,
                    [],
                    appends=[
                        commit_mod.TailAppend(s.final.name, s.base_length or 0, s.tail_length)
                        for s in shards
                    ],
                    db_appends=[db_path(f) for f in finals],
                )
            else:
                commit_mod.write_journal_and_publish(
                    self.directory,
                    self.dataset_name,
                    dataset_id,
                    generation,
                    [*finals, *(db_path(f) for f in finals)],
                )
                self._remove_replaced(dataset_id)
        except BaseException as exc:
            if journal_path(self.directory, self.dataset_name).exists():
                # Past the commit point: the journal names complete files. Removing them
                # would break the roll-forward, so keep them for the next open to finish.
                self._end(TransactionState.COMMITTED)
                if isinstance(exc, OSError):
                    error = self.storage_error(exc, "publish", state=_DURABLE_NOTE)
                    error.add_note(_DURABLE_NOTE)
                    raise error from exc
                exc.add_note(_DURABLE_NOTE)
                raise
            self.abort()
            # A typed error that names its operation already says it all (a shard changed
            # since the append began); wrapping it would repeat its file and state.
            if isinstance(exc, OSError) and getattr(exc, "operation", None) is None:
                raise self.storage_error(exc, "commit") from exc
            raise
        self._end(TransactionState.COMMITTED)

    def _replaced_siblings(self) -> tuple[list[Path], set[str]]:
        """The shards of the datasets the claimed files overwrite that the new dataset
        does not reuse (named in those datasets' own sibling lists), and their ids."""
        names: set[str] = set()
        ids: set[str] = set()
        for final in self._finals:
            if not final.is_file():
                continue
            try:
                meta = read_shard_metadata(final)
            except (MrecordError, OSError):
                continue  # not a readable shard: nothing to learn about siblings from it
            names.update(meta.shard_names)
            ids.add(meta.dataset_id)
        reused = {f.name for f in self._finals}
        # Basenames only (a sibling list is never a path; a damaged one could say "../x").
        stale = sorted(
            n for n in names - reused if n == Path(n).name and n not in ("", ".", "..")
        )
        return [self.directory / n for n in stale], ids

    def _remove_replaced(self, dataset_id: str) -> None:
        """After a replacing commit is published, remove the replaced dataset's shards the
        new one did not reuse, each only if it still carries that dataset's id.

        Best effort and after the publish: a process killed here leaves those files as
        before (the new dataset never names them, so readers are not affected).
        """
        stale, ids = self._replaced
        self._replaced = ([], set())
        for path in stale:
            try:
                owner = read_shard_metadata(path).dataset_id
            except (MrecordError, OSError):
                continue  # gone already, or not a shard we can identify: never removed
            if owner in ids and owner != dataset_id:
                for victim in (db_path(path), path):
                    with contextlib.suppress(FileNotFoundError):
                        victim.unlink()

    def _check_before_commit_point(self, shards: Sequence[StagedShard]) -> None:
        """Refuse to write the journal when publishing is bound to fail.

        A folder standing where a data file belongs, a shard changed since the append
        began, or a disk without room for the tails would otherwise stop the commit after
        its commit point, leaving it durable but unpublished.
        """
        for shard in shards:
            final = shard.final
            if final.is_dir() or db_path(final).is_dir():
                folder = final if final.is_dir() else db_path(final)
                raise found_failure(errno.EISDIR, folder)
            if shard.base_length is not None and final.stat().st_size != shard.base_length:
                raise StorageError(
                    f"{str(final)!r} changed since open_for_append (it is "
                    f"{final.stat().st_size} bytes, was {shard.base_length}); "
                    f"{self.dataset_state()}; open the dataset for append again",
                    errno=errno.ESTALE,
                    path=str(final),
                    operation="commit",
                )
        if shards and shards[0].base_length is not None:
            tails = sum(s.tail_length for s in shards)
            staged = sum(partial_path(db_path(s.final)).stat().st_size for s in shards)
            check_free_space(self.directory, tails + 2 * staged + (1 << 20))

    # -- end ---------------------------------------------------------------------------------

    def abort(self) -> None:
        """Remove every partial file of the claimed names and release the lock (idempotent).

        Committed files are never touched. Removal errors are swallowed: an abort runs
        after a failure, which must not be hidden by the clean-up.
        """
        if self.state is not TransactionState.OPEN:
            return
        with contextlib.suppress(OSError):
            commit_mod.remove_partials(self._temp_finals())
        self._end(TransactionState.ABORTED)

    @property
    def durable(self) -> bool:
        """Whether this transaction's commit reached its commit point."""
        return self.state is TransactionState.COMMITTED

    def dataset_state(self) -> str:
        """What a failure now leaves, in words (for error messages)."""
        if self.committed_generation is not None:
            return (
                "nothing of this commit is visible; the last committed generation "
                f"{self.committed_generation} is intact"
            )
        return "nothing of this commit is visible; no file of it was left behind"

    def storage_error(self, exc: OSError, operation: str, state: str | None = None) -> StorageError:
        """``exc`` as a :class:`StorageError` naming the dataset, file and what is left."""
        where = exc.filename if exc.filename is not None else self.directory
        return storage_error(
            exc,
            operation=f"{operation} dataset {self.dataset_name!r}: failed on",
            path=where,
            state=state or self.dataset_state(),
        )

    # -- internals ---------------------------------------------------------------------------

    def _temp_finals(self) -> list[Path]:
        """Finals whose partial files a writer may leave: data, .db and the journal."""
        return [
            *self._finals,
            *(db_path(f) for f in self._finals),
            journal_path(self.directory, self.dataset_name),
        ]

    def _need_open(self, what: str) -> None:
        if self.state is not TransactionState.OPEN:
            raise WriterStateError(f"cannot {what}: the transaction is {self.state.value}")

    def _end(self, state: TransactionState) -> None:
        self.state = state
        self._lock.release()

    @contextlib.contextmanager
    def _opening(self, operation: str) -> Iterator[None]:
        """While opening: any failure releases the lock; a bare OSError becomes typed."""
        try:
            yield
        except OSError as exc:
            self._end(TransactionState.ABORTED)
            # A found_failure() (a check, not a system call) has no operation yet: name it.
            if isinstance(exc, MrecordError) and getattr(exc, "operation", True) is not None:
                raise
            raise storage_error(
                exc, operation=operation, path=self.directory, state=_UNTOUCHED
            ) from exc
        except BaseException:
            self._end(TransactionState.ABORTED)
            raise
