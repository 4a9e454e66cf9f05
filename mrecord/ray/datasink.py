"""``write_mrecord``: a Ray Dataset written as one mrecord dataset, all or nothing.

The life of a write (``ds.write_datasink(MRecordDatasink(path, ...))``):

1. ``on_write_start`` (driver, when the first block is ready): take the dataset's writer
   lock (``<name>.mrecord-lock``, held until the end), finish an interrupted earlier commit,
   refuse an existing dataset unless ``overwrite=True``, remove staging files a killed job
   left, and fix the schema (given, or inferred from the first block's Arrow schema; when
   Ray fused the write with the step before it and knows no schema yet, each write task
   infers it from its first block and the publish requires them all to agree).
2. ``write`` (each write task, anywhere in the cluster): validate its blocks with the
   writer's row checks (a bad value fails the job with :class:`RowValidationError` naming
   the task, block, row and field) and write them as pages of one *part* under the staging
   name ``<name>.ray-<job>-<task>-<random>.mrecord-partial`` next to the dataset.
3. ``on_write_complete`` (driver): build each shard's partial file from the parts
   (:mod:`mrecord.ray._publish`), write each ``.db``, then commit everything with the
   writer's journal: the new dataset appears whole, or (killed before the journal is
   durable) not at all; the previous dataset at that path stays readable until then.
4. ``on_write_failed`` (driver): delete this job's staging and partial files.

A job killed outright leaves staging files but nothing visible; the next write to the
same path removes them.
"""

from __future__ import annotations

import functools
import glob
import itertools
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import ray.data
from ray.data.block import BlockAccessor
from ray.data.datasource import Datasink, WriteResult

from mrecord.errors import (
    ArgumentError,
    DatasetExistsError,
    MrecordError,
    RowValidationError,
    SchemaError,
    WrongTypeError,
)
from mrecord.format.columnize import columns_from_columns
from mrecord.format.compression import DEFAULT_ZSTD_LEVEL
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import StoredSchema, parse_schema
from mrecord.maintenance.reindex import read_index_values
from mrecord.pool import ThreadPool, call
from mrecord.ray._arrow import columns_from_block, data_schema, schema_from_arrow
from mrecord.ray._publish import (
    DEFAULT_SHARD_SIZE,
    page_runs,
    plan_shards,
    shard_count_for_size,
)

# The writer's machinery (commit transaction, names, page writer): reused, not redone.
from mrecord.storage import commit as commit_mod
from mrecord.storage.naming import (
    DB_SUFFIX,
    PARTIAL_SUFFIX,
    db_path,
    partial_path,
    shard_file_names,
)
from mrecord.storage.shard import ShardFile, read_shard_metadata
from mrecord.storage.shard_output import assemble_shard
from mrecord.storage.transaction import StagedShard, Transaction
from mrecord.storage.value_spill import ValueSpill
from mrecord.writer.file_writer import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MAX_SHARDS,
    MIN_PAGE_SIZE,
    check_index_fields,
)
from mrecord.writer.shard_writer import ShardWriter

__all__ = ["DEFAULT_PAGE_SIZE", "DEFAULT_SHARD_SIZE", "MRecordDatasink", "write_mrecord"]

_STAGING_TAG = ".ray-"
_PUBLISH_THREADS = 8
_TRANSACTIONS: dict[str, Transaction] = {}
"""Open commit transactions (each holds its dataset's lock) of this driver process, by job
id; never pickled into tasks."""


class MRecordDatasink(Datasink[dict[str, Any] | None]):  # type: ignore[misc]
    """A Ray ``Datasink`` that writes one mrecord dataset at ``path`` (see the module doc).

    ``shard_num``: ``None`` (default) picks the count from the data's size, one shard per
    ``shard_size`` bytes of pages (default 256 MiB, at least one shard); ``k`` cuts all
    pages into ``k`` shards of about equal rows (page bytes are copied once on the
    driver's filesystem); ``"per_task"`` writes one shard per write task (no data copied
    at publish; use ``ds.repartition(n)`` to choose the count).
    ``schema``: a MindSpore-style schema dict; inferred from the first block when None.
    ``index_fields``: scalar or string fields to index in each ``.db``.
    ``compression``: ``"zstd"`` compresses every field (per-field: put ``"compression"``
    in the schema) at ``compression_level``. ``overwrite``: replace a dataset at ``path``
    (atomically, on success). ``desc`` and ``page_size`` as for :class:`mrecord.FileWriter`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        shard_num: int | Literal["per_task"] | None = None,
        shard_size: int = DEFAULT_SHARD_SIZE,
        schema: Mapping[str, Any] | None = None,
        index_fields: Sequence[str] | None = None,
        compression: str | None = None,
        overwrite: bool = False,
        desc: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        compression_level: int = DEFAULT_ZSTD_LEVEL,
    ):
        target = Path(path).absolute()
        if not target.parent.is_dir():
            raise ArgumentError(
                f"folder {str(target.parent)!r} for {str(path)!r} does not exist; create it first"
            )
        if target.name.endswith((PARTIAL_SUFFIX, DB_SUFFIX)) or not target.name:
            raise ArgumentError(f"path {str(path)!r} must name a data file, not {DB_SUFFIX!r}")
        _check_shard_options(shard_num, shard_size)
        if compression not in (None, "zstd", "none"):
            raise ArgumentError(f"compression must be None or 'zstd', got {compression!r}")
        if type(page_size) is not int or not MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE:
            raise ArgumentError(
                f"page_size must be an int in [{MIN_PAGE_SIZE}, {MAX_PAGE_SIZE}], got {page_size!r}"
            )
        if type(compression_level) is not int or not 1 <= compression_level <= 22:
            raise ArgumentError(
                f"compression_level must be an int in [1, 22], got {compression_level!r}"
            )
        if not isinstance(overwrite, bool):
            raise WrongTypeError(f"overwrite must be a bool, got {overwrite!r}")
        self._dir = target.parent
        self._name = target.name
        self._shard_num = shard_num
        self._shard_size = shard_size
        self._given_schema = None if schema is None else dict(schema)
        self._index_fields = tuple(index_fields or ())
        self._compression = compression
        self._overwrite = overwrite
        self._desc = desc
        self._page_size = page_size
        self._level = compression_level
        self._schema: StoredSchema | None = None
        if schema is not None:
            self._schema = self._prepare_schema(dict(schema))
        self._job = ""
        self._dataset_id = ""
        self._replaced: list[Path] = []
        self.files: list[Path] = []
        """The published shard data files, in shard order (set by ``on_write_complete``)."""

    # -- driver side ----------------------------------------------------------------------------

    def on_write_start(self, schema: Any | None = None) -> None:
        """Lock the dataset, check ``overwrite``, clear old litter, fix the schema."""
        self._job = uuid.uuid4().hex[:16]
        self._dataset_id = uuid.uuid4().hex
        _TRANSACTIONS[self._job] = Transaction.begin(self._dir, self._name, action="write")
        existing = [p for p in self._finals(self._all_shard_names()) if p.exists()]
        if existing and not self._overwrite:
            raise DatasetExistsError(
                f"{str(existing[0])!r} already exists; pass overwrite=True to replace the dataset"
            )
        self._replaced = self._previous_files(existing)
        for litter in self._dir.glob(f"{glob.escape(self._name)}{_STAGING_TAG}*{PARTIAL_SUFFIX}"):
            litter.unlink(missing_ok=True)  # we hold the lock: no live job owns these
        schema = data_schema(schema)  # None for Ray's file listing (a fused file read)
        if self._schema is None and schema is not None:
            self._schema = self._prepare_schema(schema_from_arrow(schema))
        # else: Ray fused the write with its input and has no schema yet; each task infers
        # one from its first block and the publish checks that they all agree.

    def on_write_complete(self, write_result: WriteResult[dict[str, Any] | None]) -> None:
        """Assemble the parts into shards and publish them with the commit journal."""
        if not self._job:  # no block ever came: on_write_start was not called
            self.on_write_start(None)
        results = sorted(
            (r for r in write_result.write_returns if r is not None),
            key=lambda r: (r["task"], r["file"]),
        )
        try:
            self._publish(results)
        except BaseException:
            self._cleanup()
            raise
        self._cleanup()

    def on_write_failed(self, error: Exception) -> None:
        """Delete this job's staging files (and partial shards, if not yet committed)."""
        self._cleanup()

    # -- task side ------------------------------------------------------------------------------

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any] | None:
        """Write this task's blocks as one part; return what the driver needs to publish it."""
        stream = iter(blocks)
        if self._schema is None:
            first = next(stream, None)
            if first is None:
                return None  # nothing to write and nothing to infer a schema from
            arrow = BlockAccessor.for_block(first).to_arrow().schema
            self._schema = self._prepare_schema(schema_from_arrow(arrow))
            stream = itertools.chain([first], stream)
        schema = self._schema
        staging = self._dir / (
            f"{self._name}{_STAGING_TAG}{self._job}-{ctx.task_idx:05d}-{uuid.uuid4().hex[:8]}"
            f"{PARTIAL_SUFFIX}"
        )
        part = ShardWriter(staging, schema, self._page_size, self._level)
        try:
            for number, block in enumerate(stream):
                columns = _validated(schema, columns_from_block(block, schema), ctx, number)
                n = len(next(iter(columns.values())))
                part.add(columns, n, ())  # the driver reads index values back
            part.finish(self._template(0, (staging.name,)))
        except BaseException:
            part.abort()
            raise
        return {
            "task": int(ctx.task_idx),
            "file": staging.name,
            "rows": part.num_rows,
            "schema": schema.to_dict(),
        }

    # -- internals ------------------------------------------------------------------------------

    def _prepare_schema(self, spec: dict[str, Any]) -> StoredSchema:
        schema = parse_schema(spec)
        if self._compression == "zstd":
            schema = schema.with_compression("zstd")
        self._index_fields = check_index_fields(schema, self._index_fields)
        return schema

    def _need_schema(self) -> StoredSchema:
        if self._schema is None:
            raise SchemaError("no schema yet: on_write_start was not called on this datasink")
        return self._schema

    def _template(self, index: int, names: tuple[str, ...]) -> ShardMetadata:
        import numpy as np

        from mrecord.format.metadata import CHUNK_DTYPE

        return ShardMetadata(
            dataset_id=self._dataset_id,
            dataset_name=self._name,
            generation=1,
            shard_index=index,
            shard_names=names,
            schema=self._need_schema(),
            desc=self._desc,
            index_fields=self._index_fields,
            page_size=self._page_size,
            num_rows=0,
            next_shard=0,
            page_rows=np.zeros(0, dtype="<u4"),
            chunks=np.zeros(0, dtype=CHUNK_DTYPE),
        )

    def _all_shard_names(self) -> list[Path]:
        """Every data file name a dataset at ``path`` may have (any shard count)."""
        names = [self._dir / self._name]
        for width in range(1, len(str(MAX_SHARDS - 1)) + 1):
            names.append(self._dir / (self._name + "0" * width))
        return names

    def _previous_files(self, existing: list[Path]) -> list[Path]:
        """The data and ``.db`` files of the dataset now at ``path`` (to delete once replaced)."""
        for candidate in existing:
            if candidate.name.endswith(DB_SUFFIX):
                continue
            try:
                meta = read_shard_metadata(candidate)
            except MrecordError:
                continue  # not a readable shard: leave it alone
            if meta.dataset_name != self._name:
                continue
            names = meta.shard_names if len(meta.shard_names) > 1 else (candidate.name,)
            return self._finals([self._dir / n for n in names])
        return []

    def _finals(self, data_files: list[Path]) -> list[Path]:
        return [*data_files, *(db_path(f) for f in data_files)]

    def _publish(self, results: list[dict[str, Any]]) -> None:
        parts = [self._dir / r["file"] for r in results]
        # Shards are independent until the commit: build them in threads (fsync and SQLite
        # release the GIL), which hides most of the per-file latency of many small shards.
        with ThreadPool[Callable[[], Any], Any](call, _PUBLISH_THREADS, "mrecord-publish") as pool:
            metas = list(pool.map(functools.partial(read_shard_metadata, p) for p in parts))
            self._publish_parts(results, parts, metas, pool)

    def _publish_parts(
        self,
        results: list[dict[str, Any]],
        parts: list[Path],
        metas: list[ShardMetadata],
        pool: ThreadPool[Callable[[], Any], Any],
    ) -> None:
        if self._schema is None:
            if not results:
                raise SchemaError(
                    "the dataset has no rows to infer a schema from; pass schema= to "
                    "MRecordDatasink"
                )
            self._schema = parse_schema(results[0]["schema"])
        schema = self._schema
        for result, path, meta in zip(results, parts, metas, strict=True):
            if meta.schema.to_dict() != schema.to_dict():
                raise SchemaError(
                    f"write task {result['task']} inferred the schema {meta.schema.to_dict()!r} "
                    f"from its first block, write task {results[0]['task']} inferred "
                    f"{schema.to_dict()!r}; pass schema= to MRecordDatasink"
                )
            if meta.dataset_id != self._dataset_id:
                raise SchemaError(f"staged part {str(path)!r} does not belong to this write")
        plan = plan_shards([m.page_rows for m in metas], self._planned_count(parts))
        files = shard_file_names(self._dir / self._name, len(plan))
        finals = self._finals(files)
        txn = _TRANSACTIONS[self._job]
        txn.claim(files, overwrite=True)  # existing files were refused in on_write_start
        names = tuple(f.name for f in files)
        spills: list[ValueSpill] = []  # closed once the commit wrote the .db files

        def build(i: int) -> StagedShard:
            data_file, pieces = files[i], plan[i]
            meta = assemble_shard(
                partial_path(data_file), page_runs(pieces, parts, metas), self._template(i, names)
            )
            values = self._index_values(data_file, meta)
            spills.extend(values.values())
            return StagedShard(data_file, meta, index_values=values)

        try:
            staged = list(pool.map(functools.partial(build, i) for i in range(len(plan))))
            commit_mod.crash_hook("ray_assembled")  # tests: the driver killed before the journal
            txn.commit(self._dataset_id, 1, staged, run_all=lambda calls: list(pool.map(calls)))
        finally:
            for spill in spills:
                spill.close()
        self.files = files
        # Replaced: files of the previous dataset that the new one did not overwrite (another
        # shard count). They are foreign to the new dataset, so deleting them after the commit
        # cannot break it; a crash before this line only leaves them as harmless litter.
        for old in set(self._replaced) - set(finals):
            old.unlink(missing_ok=True)

    def _index_values(self, data_file: Path, meta: ShardMetadata) -> dict[str, ValueSpill]:
        """The index values of an assembled shard's rows, read back from its partial file a
        block at a time: write tasks sent theirs to the driver, which held every row's
        (300K 47-character names: 48 MB traced in the driver)."""
        if not meta.index_fields:
            return {}
        with ShardFile(partial_path(data_file), verify="once") as shard:
            return read_index_values(shard, meta.index_fields, meta.num_rows)

    def _planned_count(self, parts: list[Path]) -> int | None:
        """The shard count for ``plan_shards``: ``None`` is one shard per write task."""
        if self._shard_num == "per_task":
            return None
        if self._shard_num is not None:
            return self._shard_num
        sizes = [p.stat().st_size for p in parts]
        return shard_count_for_size(sizes, self._shard_size, MAX_SHARDS)

    def _cleanup(self) -> None:
        """Remove this job's staging files and uncommitted partials; release the lock."""
        txn = _TRANSACTIONS.pop(self._job, None) if self._job else None
        if not self._job:
            return
        for staged in self._dir.glob(
            f"{glob.escape(self._name)}{_STAGING_TAG}{self._job}-*{PARTIAL_SUFFIX}"
        ):
            staged.unlink(missing_ok=True)
        self._job = ""  # a reused sink starts its next write afresh
        if txn is not None:
            txn.abort()  # after a commit: nothing to do (a durable commit keeps its files)


def _check_shard_options(shard_num: object, shard_size: object) -> None:
    if shard_num not in (None, "per_task") and (
        isinstance(shard_num, bool)
        or not isinstance(shard_num, int)
        or not 1 <= shard_num <= MAX_SHARDS
    ):
        raise ArgumentError(
            f"shard_num must be None (from the data's size), 'per_task' or an int in "
            f"[1, {MAX_SHARDS}], got {shard_num!r}"
        )
    if type(shard_size) is not int or shard_size < 1:
        raise ArgumentError(f"shard_size must be an int >= 1 (bytes), got {shard_size!r}")


def _validated(
    schema: StoredSchema, columns: dict[str, Any], ctx: Any, number: int
) -> dict[str, Any]:
    try:
        return columns_from_columns(schema, columns)
    except RowValidationError as exc:
        raise RowValidationError(
            f"write task {ctx.task_idx}, block {number}: {exc}", row=exc.row, field=exc.field
        ) from exc


def write_mrecord(
    ds: ray.data.Dataset, path: str | os.PathLike[str], **options: Any
) -> list[Path]:
    """Write ``ds`` as the mrecord dataset ``path`` (keywords as :class:`MRecordDatasink`).

    Returns the shard data files once the dataset is committed; raises (leaving nothing
    at ``path``, and a previous dataset there intact) when any task or the commit fails.
    """
    ray_remote_args = options.pop("ray_remote_args", None)
    concurrency = options.pop("concurrency", None)
    sink = MRecordDatasink(path, **options)
    ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    return sink.files
