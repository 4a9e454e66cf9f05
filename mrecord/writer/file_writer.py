"""``FileWriter``: rows in, committed shard files and ``.db`` indexes out (MindSpore's API).

::

    writer = FileWriter("data.mrecord", shard_num=4)
    writer.add_schema({"image": {"type": "uint8", "shape": [32, 32, 3]},
                       "label": {"type": "int32"}})
    writer.add_index(["label"])
    writer.write_raw_data(rows)          # list of dicts, or a dict of columns (fast path)
    writer.commit()

Row distribution: each ``write_raw_data`` call of ``n`` rows is cut into
``shard_num`` contiguous runs, in shard order; run sizes differ by at most one,
and the one-larger runs go to the shards after the last one that got an extra
row (a rotating cursor stored in the metadata as ``next_shard``). So shards stay
balanced to within one row whatever the call sizes, and writing one row per call
is round-robin. Global row ids number shard 0's rows first, then shard 1's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from mrecord.errors import (
    ArgumentError,
    DatasetExistsError,
    MrecordError,
    SchemaError,
    StorageError,
    WriterStateError,
)
from mrecord.format.columnize import columns_from_rows
from mrecord.format.compression import DEFAULT_ZSTD_LEVEL
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import FieldKind, Schema, parse_schema
from mrecord.storage import commit as commit_mod
from mrecord.storage.commit import DatasetLock
from mrecord.storage.committed import dataset_name_of, open_committed
from mrecord.storage.failures import check_free_space, storage_error
from mrecord.storage.index_db import write_index_db
from mrecord.storage.naming import (
    DB_SUFFIX,
    PARTIAL_SUFFIX,
    db_path,
    journal_path,
    partial_path,
    shard_file_names,
)
from mrecord.writer.shard_writer import ShardWriter

__all__ = ["FileWriter", "check_index_fields"]

DEFAULT_PAGE_SIZE = 1 << 20
MIN_PAGE_SIZE = 1 << 10
MAX_PAGE_SIZE = 1 << 28
MAX_SHARDS = 1000
_LOCK_WAIT = 0.5  # seconds; rides out a reader finishing someone's interrupted commit


_UNTOUCHED = "nothing was written; the dataset's files are as they were"


def _acquire(lock: DatasetLock, what: str) -> None:
    """Take the writer lock; a file system that refuses the lock file is a typed error."""
    try:
        lock.acquire(wait=_LOCK_WAIT)
    except OSError as exc:
        if isinstance(exc, MrecordError):
            raise
        raise storage_error(
            exc, operation=f"{what} dataset: failed on lock file", path=lock.path,
            state=_UNTOUCHED,
        ) from exc


def check_index_fields(schema: Schema, index_fields: Sequence[str]) -> tuple[str, ...]:
    """``index_fields`` without repeats, if each is a scalar or string field of ``schema``."""
    for name in index_fields:
        if name not in schema:
            raise SchemaError(f"index field {name!r} is not in the schema {schema.names!r}")
        field = schema[name]
        if not (field.is_scalar or field.kind is FieldKind.STRING):
            raise SchemaError(
                f"index field {name!r} is {field.type}"
                f"{'' if field.shape is None else ' with shape ' + str(list(field.shape))}; "
                "only scalar numbers and strings can be indexed"
            )
    return tuple(dict.fromkeys(index_fields))


class FileWriter:
    """Write rows into ``shard_num`` shard files, each with a ``.db`` index.

    Nothing is visible until :meth:`commit`; on an exception inside a ``with``
    block nothing is committed and no file is left behind.
    """

    def __init__(
        self, file_name: str | os.PathLike[str], shard_num: int = 1, overwrite: bool = False
    ):
        if not isinstance(file_name, (str, os.PathLike)) or not str(file_name):
            raise ArgumentError(f"file_name must be a non-empty path, got {file_name!r}")
        if isinstance(shard_num, bool) or not isinstance(shard_num, int):
            raise TypeError(f"shard_num must be an int, got {shard_num!r}")
        if not 1 <= shard_num <= MAX_SHARDS:
            raise ArgumentError(f"shard_num must be in [1, {MAX_SHARDS}], got {shard_num!r}")
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be a bool, got {overwrite!r}")
        path = Path(file_name)
        if path.name.endswith(PARTIAL_SUFFIX) or path.name.endswith(DB_SUFFIX):
            raise ArgumentError(
                f"file_name {str(path)!r} must not end in {DB_SUFFIX!r} or a temp suffix"
            )
        self._dir = path.parent if str(path.parent) else Path(".")
        if not self._dir.is_dir():
            raise ArgumentError(
                f"folder {str(self._dir)!r} for {str(path)!r} does not exist; create it first"
            )
        self._files = shard_file_names(path, shard_num)
        self._dataset_name = path.name
        self._lock = DatasetLock(self._dir, self._dataset_name)
        _acquire(self._lock, "create")
        try:
            commit_mod.recover_locked(self._dir, self._dataset_name)
            folders = [p for f in self._files for p in (f, db_path(f)) if p.is_dir()]
            if folders:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", str(folders[0]))
            existing = [p for f in self._files for p in (f, db_path(f)) if p.exists()]
            if existing and not overwrite:
                raise DatasetExistsError(
                    f"{str(existing[0])!r} already exists; pass overwrite=True to replace the "
                    "dataset, "
                    "or use FileWriter.open_for_append to add rows"
                )
            commit_mod.remove_partials(self._temp_finals())
        except OSError as exc:
            self._lock.release()
            if isinstance(exc, MrecordError):
                raise
            raise storage_error(
                exc, operation="create dataset: failed on", path=self._dir, state=_UNTOUCHED
            ) from exc
        except BaseException:
            self._lock.release()
            raise
        self._schema: Schema | None = None
        self._desc: str | None = None
        self._index_fields: tuple[str, ...] = ()
        self._page_size = DEFAULT_PAGE_SIZE
        self._level = DEFAULT_ZSTD_LEVEL
        self._dataset_id = uuid.uuid4().hex
        self._generation = 1
        self._next_shard = 0
        self._committed: list[ShardMetadata] | None = None
        self._base_lengths: list[int] = []
        self._failure: str | None = None
        self._shards: list[ShardWriter] | None = None
        self._state = "open"

    # -- MindSpore API -------------------------------------------------------------------

    def add_schema(self, content: Mapping[str, Any], desc: str | None = None) -> int:
        """Set the schema (once, before writing). Returns the schema id, 0 as MindSpore."""
        self._require("open", "add_schema")
        if self._schema is not None:
            raise WriterStateError("add_schema was already called; a dataset has one schema")
        if desc is not None and not isinstance(desc, str):
            raise TypeError(f"desc must be a str, got {desc!r}")
        self._schema = parse_schema(content)
        self._desc = desc
        return 0

    def add_index(self, index_fields: Sequence[str]) -> None:
        """Index scalar fields in the ``.db`` for lookups (``MindPage``)."""
        self._require("open", "add_index")
        schema = self._need_schema("add_index")
        if (
            isinstance(index_fields, str)
            or not isinstance(index_fields, Sequence)
            or not index_fields
        ):
            raise SchemaError(
                f"index_fields must be a non-empty list of field names, got {index_fields!r}"
            )
        self._index_fields = check_index_fields(schema, index_fields)

    def set_header_size(self, header_size: int) -> None:
        """Accepted for MindSpore code; it changes nothing here.

        MindSpore reserves a fixed-size header (16 KiB – 128 MiB) for its page index and
        fails when a dataset outgrows it. mrecord's metadata is sized to its content (a
        trailer written at commit), so there is no limit to raise. The value is checked
        against MindSpore's range so that a typo still fails.
        """
        self._require("open", "set_header_size")
        if isinstance(header_size, bool) or not isinstance(header_size, int):
            raise TypeError(f"header_size must be an int, got {header_size!r}")
        if not 16 * 1024 <= header_size <= 128 * 1024 * 1024:
            raise ArgumentError(
                f"header_size must be in [16384, 134217728] (MindSpore's range), "
                f"got {header_size!r}"
            )

    def set_page_size(self, page_size: int) -> None:
        """Set the target page size in bytes (default 1 MiB)."""
        self._require("open", "set_page_size")
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise TypeError(f"page_size must be an int, got {page_size!r}")
        if not MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE:
            raise ArgumentError(
                f"page_size must be in [{MIN_PAGE_SIZE}, {MAX_PAGE_SIZE}], got {page_size!r}"
            )
        self._page_size = page_size

    def set_compression(
        self,
        codec: str = "zstd",
        fields: Sequence[str] | None = None,
        level: int = DEFAULT_ZSTD_LEVEL,
    ) -> None:
        """Compress ``fields`` (all when None) with ``codec`` ("zstd" or "none")."""
        self._require("open", "set_compression")
        schema = self._need_schema("set_compression")
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 22:
            raise ArgumentError(f"level must be an int in [1, 22], got {level!r}")
        self._schema = schema.with_compression(codec, None if fields is None else list(fields))
        self._level = level

    def write_raw_data(self, raw_data: Any, parallel_writer: bool = False) -> None:
        """Validate and buffer rows: a list of dicts, or a dict of equal-length columns.

        A row that does not fit raises :class:`RowValidationError` naming the row and
        field; nothing of this call is written then. ``parallel_writer`` is accepted
        for MindSpore compatibility.
        """
        if self._state not in ("open", "writing"):
            self._require("open", "write_raw_data")
        schema = self._need_schema("write_raw_data")
        if not isinstance(parallel_writer, bool):
            raise TypeError(f"parallel_writer must be a bool, got {parallel_writer!r}")
        columns = columns_from_rows(schema, raw_data)
        n = len(next(iter(columns.values())))
        try:
            shards = self._start()
            for shard, (start, stop) in zip(shards, self._distribute(n), strict=True):
                if stop > start:
                    part = {name: values[start:stop] for name, values in columns.items()}
                    shard.add(part, stop - start, self._index_fields)
        except OSError as exc:
            # Some shards may hold part of this call: drop everything uncommitted now.
            error = self._storage_error(exc, "write rows to")
            self._fail(error)
            raise error from exc
        except BaseException as exc:
            self._fail(exc)
            raise

    def commit(self) -> None:
        """Write metadata and indexes, then publish every file atomically."""
        if self._state == "committed":
            raise WriterStateError("commit was already called; open_for_append to add more rows")
        if self._state not in ("open", "writing"):
            self._require("writing", "commit")
        self._need_schema("commit")
        try:
            shards = self._start()
            metas = [self._finish_shard(i, s) for i, s in enumerate(shards)]
            for i, (shard, meta) in enumerate(zip(shards, metas, strict=True)):
                # When appending, the partial .db holds only the new rows: the commit
                # merges them into the committed .db in one SQLite transaction.
                write_index_db(
                    partial_path(db_path(self._files[i])),
                    meta,
                    shard.first_new_row,
                    shard.new_index_values(),
                )
            self._check_before_commit_point(shards)
            if self._committed:
                commit_mod.write_journal_and_publish(
                    self._dir,
                    self._dataset_name,
                    self._dataset_id,
                    self._generation,
                    [],
                    appends=[
                        commit_mod.TailAppend(f.name, s.base_length or 0, s.tail_length)
                        for f, s in zip(self._files, shards, strict=True)
                    ],
                    db_appends=[db_path(f) for f in self._files],
                )
            else:
                commit_mod.write_journal_and_publish(
                    self._dir,
                    self._dataset_name,
                    self._dataset_id,
                    self._generation,
                    self._all_finals(),
                )
        except BaseException as exc:
            if journal_path(self._dir, self._dataset_name).exists():
                # Past the commit point: the journal names complete files. Removing them
                # would break the roll-forward, so keep them for the next open to finish.
                self._state = "committed"
                self._lock.release()
                note = (
                    "the commit is durable (its journal was written) but publishing "
                    "stopped; the next open of the dataset finishes it"
                )
                if isinstance(exc, OSError):
                    error = self._storage_error(exc, "publish", state=note)
                    setattr(error, "__notes__", [note])  # noqa: B010 - add_note needs 3.11
                    raise error from exc
                add_note = getattr(exc, "add_note", None)  # Python >= 3.11
                if add_note is not None:
                    add_note(note)
                raise
            if isinstance(exc, OSError):
                error = self._storage_error(exc, "commit")
                self._fail(error)
                raise error from exc
            self._fail(exc)
            raise
        self._state = "committed"
        self._lock.release()

    @classmethod
    def open_for_append(cls, file_name: str | os.PathLike[str]) -> FileWriter:
        """Open a committed dataset (any of its shard files) to add rows.

        The next :meth:`commit` publishes a new generation atomically; until then
        readers keep seeing the previous one. The new pages are written after each
        shard's committed end and the ``.db`` gets the new rows only, so an append
        costs the rows added, not the dataset's size.
        """
        path = Path(file_name)
        # Only the dataset's name is read before the lock (an interrupted commit may leave
        # this shard unreadable until it is rolled forward); the shards are read under it.
        name = dataset_name_of(path)
        directory = path.parent if str(path.parent) else Path(".")
        self = cls.__new__(cls)
        self._dir = directory
        self._dataset_name = name
        self._lock = DatasetLock(directory, name)
        _acquire(self._lock, "append to")
        try:
            commit_mod.recover_locked(directory, name)
            shards = open_committed(path, verify="never", lock_held=True)
            for shard in shards:
                shard.close()
            self._files = [shard.path for shard in shards]
            metas = [shard.meta for shard in shards]
            self._base_lengths = [shard.size for shard in shards]
            commit_mod.remove_partials(self._temp_finals())
        except OSError as exc:
            self._lock.release()
            if isinstance(exc, MrecordError):
                raise
            raise storage_error(
                exc, operation="open for append: failed on", path=directory, state=_UNTOUCHED
            ) from exc
        except BaseException:
            self._lock.release()
            raise
        head = metas[0]
        self._schema = head.schema
        self._desc = head.desc
        self._index_fields = head.index_fields
        self._page_size = head.page_size
        self._level = DEFAULT_ZSTD_LEVEL
        self._dataset_id = head.dataset_id
        self._generation = max(m.generation for m in metas) + 1
        self._next_shard = head.next_shard
        self._committed = metas
        self._failure = None
        self._shards = None
        self._state = "open"
        return self

    # -- context manager and cleanup --------------------------------------------------------

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            if self._state in ("open", "writing"):
                self.commit()
        else:
            self.abort()

    def abort(self) -> None:
        """Drop everything written since the last commit; committed data is untouched."""
        if self._state in ("committed", "aborted"):
            return
        for shard in self._shards or []:
            shard.abort()
        # Cleanup must not hide the failure that led here (a vanished or read-only folder).
        with contextlib.suppress(OSError):
            commit_mod.remove_partials(self._temp_finals())
        self._state = "aborted"
        self._lock.release()

    def _fail(self, exc: BaseException) -> None:
        """Abort after a failed write or commit, remembering why for later calls."""
        self._failure = f"{type(exc).__name__}: {exc}"
        self.abort()

    def _dataset_state(self) -> str:
        if self._committed:
            return (
                "nothing of this commit is visible; the last committed generation "
                f"{self._generation - 1} is intact"
            )
        return "nothing of this commit is visible; no file of it was left behind"

    def _storage_error(
        self, exc: OSError, operation: str, state: str | None = None
    ) -> StorageError:
        where = exc.filename if exc.filename is not None else self._dir
        return storage_error(
            exc,
            operation=f"{operation} dataset {self._dataset_name!r}: failed on",
            path=where,
            state=state or self._dataset_state(),
        )

    def _check_before_commit_point(self, shards: list[ShardWriter]) -> None:
        """Refuse to write the journal when publishing is bound to fail.

        A folder standing where a data file belongs, a shard changed since
        ``open_for_append``, or a disk without room for the tails would otherwise
        stop the commit after its commit point, leaving it durable but unpublished.
        """
        for i, final in enumerate(self._files):
            if final.is_dir() or db_path(final).is_dir():
                folder = final if final.is_dir() else db_path(final)
                raise IsADirectoryError(errno.EISDIR, "Is a directory", str(folder))
            if self._committed and final.stat().st_size != self._base_lengths[i]:
                raise StorageError(
                    f"{str(final)!r} changed since open_for_append (it is "
                    f"{final.stat().st_size} bytes, was {self._base_lengths[i]}); "
                    f"{self._dataset_state()}; open the dataset for append again",
                    errno=errno.ESTALE,
                    path=str(final),
                    operation="commit",
                )
        if self._committed:
            tails = sum(s.tail_length for s in shards)
            staged = sum(partial_path(db_path(f)).stat().st_size for f in self._files)
            check_free_space(self._dir, tails + 2 * staged + (1 << 20))

    # -- internals ---------------------------------------------------------------------------

    @property
    def files(self) -> list[Path]:
        """The shard data files this writer produces."""
        return list(self._files)

    def _all_finals(self) -> list[Path]:
        return [*self._files, *(db_path(f) for f in self._files)]

    def _temp_finals(self) -> list[Path]:
        """Finals whose partial files a writer may leave: data, .db and the journal."""
        return [*self._all_finals(), journal_path(self._dir, self._dataset_name)]

    def _require(self, state: str, method: str) -> None:
        if self._state != state:
            hint = {
                "committed": "the dataset is committed; use FileWriter.open_for_append to add rows",
                "aborted": "the writer was aborted"
                + (f" after {self._failure}" if self._failure else "")
                + "; nothing uncommitted is left on disk; create a new FileWriter "
                "(or FileWriter.open_for_append) to write again",
                "writing": "rows were already written; call it before write_raw_data",
            }.get(self._state, "")
            raise WriterStateError(f"cannot call {method} now: {hint}")

    def _need_schema(self, method: str) -> Schema:
        if self._schema is None:
            raise WriterStateError(f"call add_schema before {method}")
        return self._schema

    def _start(self) -> list[ShardWriter]:
        if self._shards is None:
            schema = self._need_schema("write_raw_data")
            self._shards = [
                ShardWriter(
                    partial_path(f),
                    schema,
                    self._page_size,
                    self._level,
                    committed_meta=self._committed[i] if self._committed else None,
                    base_length=self._base_lengths[i] if self._committed else None,
                )
                for i, f in enumerate(self._files)
            ]
            self._state = "writing"
        return self._shards

    def _distribute(self, n: int) -> list[tuple[int, int]]:
        k = len(self._files)
        q, r = divmod(n, k)
        extra = np.zeros(k, dtype=np.int64)
        extra[(self._next_shard + np.arange(r)) % k] = 1
        sizes = q + extra
        ends = np.cumsum(sizes)
        self._next_shard = (self._next_shard + r) % k
        return [(int(e - s), int(e)) for s, e in zip(sizes, ends, strict=True)]

    def _finish_shard(self, i: int, shard: ShardWriter) -> ShardMetadata:
        schema = self._need_schema("commit")
        template = ShardMetadata(
            dataset_id=self._dataset_id,
            dataset_name=self._dataset_name,
            generation=self._generation,
            shard_index=i,
            shard_names=tuple(f.name for f in self._files),
            schema=schema,
            desc=self._desc,
            index_fields=self._index_fields,
            page_size=self._page_size,
            num_rows=0,
            next_shard=self._next_shard,
            page_rows=np.zeros(0, dtype="<u4"),
            chunks=np.zeros(0),
        )
        return shard.finish(template)
