"""Write a conversion source into an mrecord dataset, atomically, with a summary.

:func:`write_source` is the one place that talks to :class:`mrecord.FileWriter`:
every ``convert_*`` function and ``mrecord convert`` go through it. All rows are
written inside one ``FileWriter`` context, so a conversion that fails (bad input
found halfway, Ctrl-C, disk full) leaves no dataset files behind.

Parallel: a source with a :meth:`~mrecord.convert.base.Source.plan` has its per-row
work done ``workers`` pieces at a time, in threads or processes
(:mod:`mrecord.convert.parallel`), while this process writes the batches in order, so
the dataset is the one a serial run writes.

Resumable: every ``checkpoint_bytes`` of pages (or :data:`CHECKPOINT_SECONDS`, whichever
comes first), the writer's state is made durable
in a sidecar folder ``DST.mrecord-resume`` (:mod:`mrecord.writer.resume`). A
conversion killed at any instant and run again with ``resume=True`` goes on from the
last checkpoint and writes exactly the bytes an uninterrupted run writes (with the
same dataset id). The sidecar is removed after the commit, and by any run that
does not resume.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mrecord.convert._prefetch import prefetch
from mrecord.convert.base import Batch, Source, check_batch_rows
from mrecord.convert.parallel import default_workers, run_plan
from mrecord.errors import ArgumentError, DatasetExistsError

__all__ = ["ConversionSummary", "WriteOptions", "output_files", "write_source"]

ProgressCallback = Callable[[int], None]
"""Called with the number of rows just written."""

DEFAULT_CHECKPOINT_BYTES = 1 << 30
"""Pages written between two resume checkpoints unless a caller asks otherwise.

Each checkpoint waits for the writes in flight and syncs the shards (~45 ms each
on this machine's disk; 256 MiB made seven of them 7% of a 20,000-image conversion).
:data:`CHECKPOINT_SECONDS` bounds what a kill loses where pages come slowly."""

CHECKPOINT_SECONDS = 60.0
"""A checkpoint is also made once this long has passed since the last one (when pages
were written since): a CPU-bound conversion (``--resize`` to small images) can take
many minutes to write a GiB, and a kill should not cost them."""


@dataclass(frozen=True)
class WriteOptions:
    """How to write the converted dataset (mirrors ``mrecord convert``'s options).

    ``index_fields=None`` uses the source's suggestion (e.g. ``label``); ``[]``
    indexes nothing. ``compression="zstd"`` with ``compress_fields=None``
    compresses every field, else only the named ones. ``batch_rows``: rows per write
    (None: the source's ``default_batch_rows``, 4,096, or 256 for ``imagefolder``, whose
    rows are whole files; fewer where that many would hold more than ``BATCH_BYTES``,
    8 MiB, ``Source.batch_rows_default``; a resumed run keeps its checkpoint's).
    ``workers``: pieces of per-row work (image checks, ``--resize``, PNG encoding) done
    at once; None: one per core, 1: a serial run (see :mod:`mrecord.convert.parallel`).
    """

    shard_num: int = 1
    page_size: int | None = None
    compression: str | None = None
    compress_fields: Sequence[str] | None = None
    compression_level: int = 3
    index_fields: Sequence[str] | None = None
    overwrite: bool = False
    batch_rows: int | None = None
    workers: int | None = None
    resume: bool = False
    checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES

    @property
    def worker_count(self) -> int:
        """``workers``, with None resolved to one per core, or as many as the memory
        budget holds (``mrecord.convert.parallel.default_workers``)."""
        return self.workers or default_workers()

    def check(self, schema: dict[str, dict[str, Any]]) -> None:
        """Raise :class:`ArgumentError` for options that cannot work with ``schema``."""
        if isinstance(self.shard_num, bool) or not isinstance(self.shard_num, int):
            raise ArgumentError(f"shard_num must be an int, got {self.shard_num!r}")
        if not 1 <= self.shard_num <= 1000:
            raise ArgumentError(f"shard_num must be in [1, 1000], got {self.shard_num!r}")
        if self.batch_rows is not None:
            check_batch_rows(self.batch_rows)
        for name in ("workers", "checkpoint_bytes"):
            value = getattr(self, name)
            if name == "workers" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ArgumentError(f"{name} must be an int >= 1, got {value!r}")
        if self.compression not in (None, "zstd"):
            raise ArgumentError(f"compression must be 'zstd' or None, got {self.compression!r}")
        if self.compress_fields is not None and self.compression is None:
            raise ArgumentError("compress_fields needs compression='zstd' (--compression zstd)")
        fields = list(schema)
        for name in self.compress_fields or ():
            if name not in schema:
                raise ArgumentError(f"compress field {name!r} is not a field; fields: {fields}")
        for name in self.index_fields or ():
            if name not in schema:
                raise ArgumentError(f"index field {name!r} is not a field; fields: {fields}")
            spec = schema[name]
            if spec.get("type") == "bytes" or "shape" in spec:
                raise ArgumentError(
                    f"index field {name!r} is {spec!r}; only scalar fields can be indexed"
                )


@dataclass(frozen=True)
class ConversionSummary:
    """What a conversion wrote."""

    kind: str
    source: str
    destination: str
    rows: int
    shards: int
    files: list[str]
    bytes: int
    seconds: float
    problems: list[str] = field(default_factory=list)
    workers: int = 1
    resumed_at_row: int = 0

    @property
    def rows_per_second(self) -> float:
        """Rows written per second of wall time."""
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able values."""
        out = asdict(self)
        out["rows_per_second"] = round(self.rows_per_second, 1)
        out["seconds"] = round(self.seconds, 3)
        return out


def output_files(file_name: str | os.PathLike[str], shard_num: int) -> list[Path]:
    """Data files a dataset of ``shard_num`` shards is written to (MindSpore's naming)."""
    from mrecord.storage.naming import shard_file_names

    return shard_file_names(file_name, shard_num)


def write_source(
    source: Source,
    dst: str | os.PathLike[str],
    options: WriteOptions | None = None,
    *,
    progress: ProgressCallback | None = None,
    dataset_id: str | None = None,
) -> ConversionSummary:
    """Write every row of ``source`` to the dataset ``dst``; return the summary.

    Nothing is visible at ``dst`` unless the whole conversion succeeds. With
    ``options.resume`` the conversion goes on from the last checkpoint of an earlier
    run killed on the way (or starts from the beginning when there is none); a
    checkpoint made for another source or other options is refused with
    :class:`~mrecord.errors.CheckpointError` naming its file. ``dataset_id`` (32 hex
    digits) fixes the new dataset's id, for byte-for-byte comparisons of two runs.
    """
    from mrecord.writer.file_writer import FileWriter  # imported when used
    from mrecord.writer.resume import Checkpointer, read_resume_state, set_dataset_id

    opts = options or WriteOptions()
    opts.check(source.schema)
    source.check_destination(dst, output_files(dst, opts.shard_num))
    index = list(source.index_fields if opts.index_fields is None else opts.index_fields)
    started = time.perf_counter()
    state = read_resume_state(dst) if opts.resume else None
    if opts.batch_rows is None:
        opts = replace(opts, batch_rows=_default_batch_rows(source, state))
    # A resumed run checks the key first; a fresh one needs it only at its first
    # checkpoint, so the source's fingerprint is worked out beside the first writes.
    def work_out_key() -> dict[str, Any]:
        return _resume_key(source, opts, index)

    key = work_out_key if state is not None else _in_background(work_out_key)
    rows = 0
    resumed_at = 0
    try:
        # When resuming, open without overwrite first: the open finishes a commit that
        # was publishing when the last run was killed, and then that run's dataset is
        # there, complete.
        writer = FileWriter(dst, shard_num=opts.shard_num, overwrite=opts.overwrite and not state)
    except DatasetExistsError as exc:
        if state is not None and _finished(dst, opts, state):
            return _finished_summary(source, dst, opts, started)
        if opts.resume and state is None and not opts.overwrite:
            raise DatasetExistsError(
                f"{exc}. There is no checkpoint of an unfinished conversion to resume at "
                f"{str(dst)!r}: the dataset there is complete (a conversion that finished, "
                "perhaps killed only as it exited, or another dataset); use it, or pass "
                "--overwrite (overwrite=True) to convert again"
            ) from None
        if not (state is not None and opts.overwrite):
            raise
        writer = FileWriter(dst, shard_num=opts.shard_num, overwrite=True)
    try:
        with writer:
            writer.add_schema(source.schema, desc=source.desc)
            if index:
                writer.add_index(index)
            if opts.page_size is not None:
                writer.set_page_size(opts.page_size)
            if opts.compression is not None:
                fields = None if opts.compress_fields is None else list(opts.compress_fields)
                level = opts.compression_level
                writer.set_compression(opts.compression, fields=fields, level=level)
            start = 0
            if state is not None:
                checkpoints, point = Checkpointer.resume(writer, key())
                source.restore_state(point.extra)
                start, rows = point.position, point.rows
                resumed_at = rows
                if progress is not None and rows:
                    progress(rows)
            else:
                checkpoints = Checkpointer.start(writer, key)
                if dataset_id is not None:
                    set_dataset_id(writer, dataset_id)
            saved, saved_at = checkpoints.written_bytes, time.monotonic()
            with contextlib.closing(_batches(source, opts, start)) as batches:
                for position, batch in batches:
                    n = len(next(iter(batch.values()))) if batch else 0
                    if n:
                        writer.write_raw_data(batch)
                        rows += n
                        if progress is not None:
                            progress(n)
                    new_bytes = checkpoints.written_bytes - saved
                    if new_bytes >= opts.checkpoint_bytes or (
                        new_bytes and time.monotonic() - saved_at >= CHECKPOINT_SECONDS
                    ):
                        checkpoints.checkpoint(position, source.resume_state(position))
                        saved, saved_at = checkpoints.written_bytes, time.monotonic()
    except (KeyboardInterrupt, OSError) as exc:
        _note_resumable(exc, dst)
        raise
    checkpoints.discard()
    seconds = time.perf_counter() - started
    return _summary(source, dst, opts, rows, seconds, resumed_at)


def _default_batch_rows(source: Source, state: dict[str, Any] | None) -> int:
    """Rows per batch where the caller gives none: those of the checkpoint resumed from
    (its batches are the positions it counts, and a run of a version before 2026-11-29
    cut large rows into bigger ones), else ``source.batch_rows_default()``."""
    key = state.get("key") if state is not None else None
    kept = key.get("batch_rows") if isinstance(key, dict) else None
    if isinstance(kept, int) and not isinstance(kept, bool) and kept >= 1:
        return kept
    return source.batch_rows_default()


def _note_resumable(exc: BaseException, dst: str | os.PathLike[str]) -> None:
    """Tell the user of an interrupted conversion that its checkpoint is kept."""
    from mrecord.writer.resume import read_resume_state, resume_dir

    try:
        state = read_resume_state(dst)
    except Exception:  # an unreadable checkpoint: nothing useful to say
        return
    if state is None:
        return
    folder = resume_dir(dst)
    kept = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    note = (
        f"the rows converted up to row {state['rows']:,} are kept in {str(folder)!r} "
        f"({kept / 1e6:,.1f} MB): run the same conversion again with --resume "
        "(resume=True) to go on from there, or without it to start over and remove them"
    )
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is not None:
        add_note(note)
    else:
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])  # noqa: B010


def _batches(
    source: Source, opts: WriteOptions, start: int
) -> Generator[tuple[int, Batch], None, None]:
    """``(position after it, batch)`` for the source's batches from number ``start`` on."""
    batch_rows = opts.batch_rows or source.batch_rows_default()
    plan = source.plan(batch_rows)
    if plan is not None:
        for b, batch in prefetch(run_plan(plan, workers=opts.worker_count, start=start)):
            yield b + 1, batch or {}
        return
    batches = source.iter_batches_for(opts.shard_num, batch_rows)
    for b, batch in enumerate(prefetch(batches)):
        if b >= start:  # a source without a plan is read again up to its checkpoint
            yield b + 1, batch


def _in_background(work: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """Start ``work`` in a thread now; the function returned waits for its result (or
    raises its error)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="mrecord-convert-key")
    future = pool.submit(work)
    pool.shutdown(wait=False)  # the thread ends with the work
    return future.result


def _resume_key(source: Source, opts: WriteOptions, index: list[str]) -> dict[str, Any]:
    """What a checkpoint is valid for: the source and every option that changes bytes."""
    return {
        "kind": source.kind,
        "source": os.path.abspath(source.name),
        "source_files": source.fingerprint(),
        "schema": source.schema,
        "desc": source.desc,
        "index_fields": index,
        "shard_num": opts.shard_num,
        "page_size": opts.page_size,
        "compression": opts.compression,
        "compress_fields": None if opts.compress_fields is None else list(opts.compress_fields),
        "compression_level": opts.compression_level,
        "batch_rows": opts.batch_rows,
    }


def _finished(dst: str | os.PathLike[str], opts: WriteOptions, state: dict[str, Any]) -> bool:
    """Whether the dataset at ``dst`` is the one the checkpoint ``state`` was heading for."""
    from mrecord.storage.shard import read_shard_metadata

    first = output_files(dst, opts.shard_num)[0]
    if not first.is_file():
        return False
    try:
        return read_shard_metadata(first).dataset_id == state.get("dataset_id")
    except Exception:  # not a readable shard: not the finished conversion
        return False


def _finished_summary(
    source: Source, dst: str | os.PathLike[str], opts: WriteOptions, started: float
) -> ConversionSummary:
    """The summary of a conversion whose commit was done before a kill."""
    from mrecord.storage.shard import read_shard_metadata
    from mrecord.writer.resume import remove_resume_state

    remove_resume_state(dst)
    rows = sum(read_shard_metadata(f).num_rows for f in output_files(dst, opts.shard_num))
    summary = _summary(source, dst, opts, rows, time.perf_counter() - started, rows)
    return summary


def _summary(
    source: Source,
    dst: str | os.PathLike[str],
    opts: WriteOptions,
    rows: int,
    seconds: float,
    resumed_at: int,
) -> ConversionSummary:
    data_files = output_files(dst, opts.shard_num)
    all_files = [p for f in data_files for p in (f, f.with_name(f.name + ".db"))]
    total = sum(p.stat().st_size for p in all_files if p.exists())
    return ConversionSummary(
        kind=source.kind,
        source=source.name,
        destination=str(dst),
        rows=rows,
        shards=opts.shard_num,
        files=[str(f) for f in data_files],
        bytes=total,
        seconds=seconds,
        problems=list(source.problems),
        workers=opts.worker_count,
        resumed_at_row=resumed_at,
    )
