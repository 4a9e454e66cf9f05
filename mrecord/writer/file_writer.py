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

import enum
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from mrecord.errors import (
    AppendTargetMissingError,
    ArgumentError,
    DatasetNotFoundError,
    RuntimeArgumentError,
    SchemaError,
    WriterStateError,
    WrongTypeError,
)
from mrecord.format.columnize import columns_from_rows
from mrecord.format.compression import DEFAULT_ZSTD_LEVEL
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import FieldKind, StoredSchema, parse_schema
from mrecord.storage.naming import DB_SUFFIX, PARTIAL_SUFFIX, partial_path, shard_file_names
from mrecord.storage.transaction import CommittedShard, StagedShard, Transaction
from mrecord.writer.shard_writer import ShardWriter

__all__ = ["FileWriter", "WriterState", "check_index_fields"]

DEFAULT_PAGE_SIZE = 1 << 20
MIN_PAGE_SIZE = 1 << 10
MAX_PAGE_SIZE = 1 << 28
MAX_SHARDS = 1000
PENDING_BYTES = 64 << 20
"""Memory a writer's shards may hold for their next pages together (or four pages, where
that is more); past it every shard writes what it holds as a page, and its rows' index
values to their spill. Each call spreads its rows over every shard: 1,000 shards held up
to 1,000 pages (1 GiB)."""


class WriterState(enum.Enum):
    """Where a :class:`FileWriter` is in its life."""

    OPEN = "open"
    """Configurable (schema, index, page size, compression); no row written yet."""
    WRITING = "writing"
    """Rows were written; configuration is fixed."""
    COMMITTED = "committed"
    """The commit is durable; the lock is released."""
    ABORTED = "aborted"
    """Nothing uncommitted is left on disk; the lock is released."""


@dataclass(frozen=True)
class _Start:
    """What a writer starts from: a new dataset's settings, or a committed one's."""

    files: list[Path]
    schema: StoredSchema | None = None
    desc: str | None = None
    index_fields: tuple[str, ...] = ()
    page_size: int = DEFAULT_PAGE_SIZE
    dataset_id: str = ""
    generation: int = 1
    next_shard: int = 0
    committed: tuple[CommittedShard, ...] = ()


def check_index_fields(schema: StoredSchema, index_fields: Sequence[str]) -> tuple[str, ...]:
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
            raise WrongTypeError(f"shard_num must be an int, got {shard_num!r}")
        if not 1 <= shard_num <= MAX_SHARDS:
            raise ArgumentError(f"shard_num must be in [1, {MAX_SHARDS}], got {shard_num!r}")
        if not isinstance(overwrite, bool):
            raise WrongTypeError(f"overwrite must be a bool, got {overwrite!r}")
        path = Path(file_name)
        if path.name.endswith(PARTIAL_SUFFIX) or path.name.endswith(DB_SUFFIX):
            raise ArgumentError(
                f"file_name {str(path)!r} must not end in {DB_SUFFIX!r} or a temp suffix"
            )
        directory = self._dir_of(path)
        if not directory.is_dir():
            raise ArgumentError(
                f"folder {str(directory)!r} for {str(path)!r} does not exist; create it first"
            )
        files = shard_file_names(path, shard_num)
        txn = Transaction.begin(directory, path.name, action="create")
        txn.claim(files, overwrite=overwrite)
        self._setup(txn, _Start(files, dataset_id=uuid.uuid4().hex))

    def _setup(self, txn: Transaction, start: _Start) -> None:
        """The one place a writer's attributes are set (``__init__`` and ``open_for_append``)."""
        self._txn = txn
        self._dir = txn.directory
        self._dataset_name = txn.dataset_name
        self._files = start.files
        self._schema: StoredSchema | None = start.schema
        self._desc = start.desc
        self._index_fields = start.index_fields
        self._page_size = start.page_size
        self._level = DEFAULT_ZSTD_LEVEL
        self._dataset_id = start.dataset_id
        self._generation = start.generation
        self._next_shard = start.next_shard
        self._committed = start.committed
        self._failure: str | None = None
        self._shards: list[ShardWriter] | None = None
        self._state = WriterState.OPEN

    @staticmethod
    def _dir_of(path: Path) -> Path:
        return path.parent if str(path.parent) else Path(".")

    # -- MindSpore API -------------------------------------------------------------------

    def add_schema(self, content: Mapping[str, Any], desc: str | None = None) -> int:
        """Set the schema (once, before writing). Returns the schema id, 0 as MindSpore."""
        self._require(WriterState.OPEN, "add_schema")
        if self._schema is not None:
            raise WriterStateError("add_schema was already called; a dataset has one schema")
        if desc is not None and not isinstance(desc, str):
            raise WrongTypeError(f"desc must be a str, got {desc!r}")
        self._schema = parse_schema(content)
        self._desc = desc
        return 0

    def add_index(self, index_fields: Sequence[str]) -> None:
        """Index scalar fields in the ``.db`` for lookups (``MindPage``)."""
        self._require(WriterState.OPEN, "add_index")
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
        self._require(WriterState.OPEN, "set_header_size")
        if isinstance(header_size, bool) or not isinstance(header_size, int):
            raise WrongTypeError(f"header_size must be an int, got {header_size!r}")
        if not 16 * 1024 <= header_size <= 128 * 1024 * 1024:
            raise ArgumentError(
                f"header_size must be in [16384, 134217728] (MindSpore's range), "
                f"got {header_size!r}"
            )

    def set_page_size(self, page_size: int) -> None:
        """Set the target page size in bytes (default 1 MiB)."""
        self._require(WriterState.OPEN, "set_page_size")
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise WrongTypeError(f"page_size must be an int, got {page_size!r}")
        if not MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE:  # MindSpore: RuntimeError
            raise RuntimeArgumentError(
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
        self._require(WriterState.OPEN, "set_compression")
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
        if self._state not in (WriterState.OPEN, WriterState.WRITING):
            self._require(WriterState.OPEN, "write_raw_data")
        schema = self._need_schema("write_raw_data")
        if not isinstance(parallel_writer, bool):
            raise WrongTypeError(f"parallel_writer must be a bool, got {parallel_writer!r}")
        columns = columns_from_rows(schema, raw_data)
        n = len(next(iter(columns.values())))
        try:
            shards = self._start()
            for shard, (start, stop) in zip(shards, self._distribute(n), strict=True):
                if stop > start:
                    part = {name: values[start:stop] for name, values in columns.items()}
                    shard.add(part, stop - start, self._index_fields)
            if sum(s.held_bytes for s in shards) > max(PENDING_BYTES, 4 * self._page_size):
                # All at once: the shards' parts of a batch are views of its arrays, kept
                # alive until the last of them is written.
                for shard in shards:
                    shard.write_pending()
        except OSError as exc:
            # Some shards may hold part of this call: drop everything uncommitted now.
            error = self._txn.storage_error(exc, "write rows to")
            self._fail(error)
            raise error from exc
        except BaseException as exc:
            self._fail(exc)
            raise

    def commit(self) -> None:
        """Finish every shard, then commit them in one transaction (``.db``, journal, publish)."""
        if self._state is WriterState.COMMITTED:
            raise WriterStateError("commit was already called; open_for_append to add more rows")
        if self._state not in (WriterState.OPEN, WriterState.WRITING):
            self._require(WriterState.WRITING, "commit")
        self._need_schema("commit")
        try:
            shards = self._start()
            staged = [
                StagedShard(
                    final=self._files[i],
                    meta=self._finish_shard(i, shard),
                    first_new_row=shard.first_new_row,
                    index_values=shard.new_index_values(),
                    base_length=shard.base_length,
                    tail_length=shard.tail_length,
                )
                for i, shard in enumerate(shards)
            ]
        except BaseException as exc:
            if isinstance(exc, OSError):
                error = self._txn.storage_error(exc, "commit")
                self._fail(error)
                raise error from exc
            self._fail(exc)
            raise
        try:
            self._txn.commit(self._dataset_id, self._generation, staged)
        except BaseException as exc:
            if self._txn.durable:
                self._state = WriterState.COMMITTED
            else:
                self._fail(exc)
            raise
        finally:
            for shard in shards:
                shard.drop_index_values()
        self._state = WriterState.COMMITTED

    @classmethod
    def open_for_append(cls, file_name: str | os.PathLike[str]) -> FileWriter:
        """Open a committed dataset (any of its shard files) to add rows.

        The next :meth:`commit` publishes a new generation atomically; until then
        readers keep seeing the previous one. The new pages are written after each
        shard's committed end and the ``.db`` gets the new rows only, so an append
        costs the rows added, not the dataset's size.
        """
        try:
            txn, committed = Transaction.begin_append(Path(file_name))
        except DatasetNotFoundError as exc:
            if isinstance(exc, AppendTargetMissingError):
                raise
            raise AppendTargetMissingError(
                f"cannot append to {str(file_name)!r}: {exc}; open_for_append adds rows to a "
                "committed dataset: write it with FileWriter(...).commit() first"
            ) from exc
        head = committed[0].meta
        self = cls.__new__(cls)
        self._setup(
            txn,
            _Start(
                files=[shard.path for shard in committed],
                schema=head.schema,
                desc=head.desc,
                index_fields=head.index_fields,
                page_size=head.page_size,
                dataset_id=head.dataset_id,
                generation=max(shard.meta.generation for shard in committed) + 1,
                next_shard=head.next_shard,
                committed=tuple(committed),
            ),
        )
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
            if self._state in (WriterState.OPEN, WriterState.WRITING):
                self.commit()
        else:
            self.abort()

    def abort(self) -> None:
        """Drop everything written since the last commit; committed data is untouched."""
        if self._state in (WriterState.COMMITTED, WriterState.ABORTED):
            return
        for shard in self._shards or []:
            shard.abort()
        self._txn.abort()
        self._state = WriterState.ABORTED

    def _fail(self, exc: BaseException) -> None:
        """Abort after a failed write or commit, remembering why for later calls."""
        self._failure = f"{type(exc).__name__}: {exc}"
        self.abort()

    # -- internals ---------------------------------------------------------------------------

    @property
    def files(self) -> list[Path]:
        """The shard data files this writer produces."""
        return list(self._files)

    @property
    def state(self) -> WriterState:
        """Where this writer is in its life (open, writing, committed, aborted)."""
        return self._state

    def _require(self, state: WriterState, method: str) -> None:
        if self._state is not state:
            hint = {
                WriterState.COMMITTED: "the dataset is committed; use "
                "FileWriter.open_for_append to add rows",
                WriterState.ABORTED: "the writer was aborted"
                + (f" after {self._failure}" if self._failure else "")
                + "; nothing uncommitted is left on disk; create a new FileWriter "
                "(or FileWriter.open_for_append) to write again",
                WriterState.WRITING: "rows were already written; call it before write_raw_data",
            }.get(self._state, "")
            raise WriterStateError(f"cannot call {method} now: {hint}")

    def _need_schema(self, method: str) -> StoredSchema:
        if self._schema is None:
            raise WriterStateError(f"call add_schema before {method}")
        return self._schema

    def _start(self) -> list[ShardWriter]:
        if self._shards is None:
            schema = self._need_schema("write_raw_data")
            committed = self._committed
            self._shards = [
                ShardWriter(
                    partial_path(f),
                    schema,
                    self._page_size,
                    self._level,
                    committed_meta=committed[i].meta if committed else None,
                    base_length=committed[i].length if committed else None,
                )
                for i, f in enumerate(self._files)
            ]
            self._state = WriterState.WRITING
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
