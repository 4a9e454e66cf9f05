"""``verify_dataset``: check every page of every shard and every ``.db``; report all damage.

Unlike normal reads, verification does not stop at the first problem: each
damaged page, unreadable shard or inconsistent index is listed, so one run tells
the whole story (``mrecord verify`` prints it and exits non-zero).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mrecord.errors import DatasetNotFoundError, MrecordError, NotAnMrecordFileError
from mrecord.format.head_index import part_lengths
from mrecord.format.index_layout import ROWS_TABLE, index_column
from mrecord.format.schema import FieldKind
from mrecord.format.value_crcs import FLAG_VALUE_CRCS
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.committed import open_committed, sibling_problems
from mrecord.storage.descriptors import make_room
from mrecord.storage.index_db import check_index_db, iter_index_db
from mrecord.storage.naming import PathArg, journal_path, resolve_files, sibling_paths
from mrecord.storage.shard import ShardFile

__all__ = ["VerifyReport", "verify_dataset"]


@dataclass
class VerifyReport:
    """What :func:`verify_dataset` found. ``ok`` is True when ``problems`` is empty."""

    files: list[str] = field(default_factory=list)
    rows: int = 0
    pages_checked: int = 0
    chunks_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is damaged."""
        return not self.problems


def verify_dataset(
    dataset_files: str | os.PathLike[str] | list[str | os.PathLike[str]],
    progress: Callable[[int], None] | None = None,
    *,
    start: Callable[[int], None] | None = None,
) -> VerifyReport:
    """Check checksums, chunk structure and ``.db`` consistency of every shard.

    Damage is reported, not raised. A file the caller named that does not exist
    (:class:`DatasetNotFoundError`) or is not an mrecord file at all
    (:class:`NotAnMrecordFileError`) raises: there is nothing to verify.
    ``start`` is called once with the number of pages to check, then
    ``progress`` with 1 after each page.
    """
    report = VerifyReport()
    paths, expand = resolve_files(dataset_files)
    shards = _open_snapshot(dataset_files)
    if shards is None:
        shards = _open_each(paths, expand, report)
    else:
        report.files.extend(str(shard.path) for shard in shards)
    if start is not None:
        start(sum(shard.meta.num_pages for shard in shards))
    try:
        _check_siblings(shards, expand, report)
        for shard in shards:
            _check_head_index(shard, report)
            _check_pages(shard, report, progress)
            _check_index(shard, report)
            report.rows += shard.meta.num_rows
    finally:
        for shard in shards:
            shard.close()
    return report


def _open_snapshot(dataset_files: PathArg) -> list[ShardFile] | None:
    """The dataset's shards as a reader opens them, or None when the reader would refuse.

    The reader's procedure finishes (or waits for) a commit in flight and retries until
    the files settle, so a dataset being appended to or reindexed is verified as one
    committed generation, never reported damaged because a commit was publishing.
    """
    try:
        return open_committed(dataset_files, verify="always", check_index=True)
    except MrecordError:
        return None  # looked at file by file, below, to report every problem


def _open_each(paths: list[Path], expand: bool, report: VerifyReport) -> list[ShardFile]:
    """Open every shard that opens, reporting those that do not."""
    named = set(paths)
    shards: list[ShardFile] = []
    listed = _shard_paths(paths, expand, report)
    make_room(len(listed))
    for path in listed:
        report.files.append(str(path))
        try:
            shards.append(ShardFile(path, verify="always"))
        except (DatasetNotFoundError, NotAnMrecordFileError) as exc:
            if path in named:
                for shard in shards:
                    shard.close()
                raise
            report.problems.append(str(exc))
        except MrecordError as exc:
            report.problems.append(str(exc))
    return shards


def _shard_paths(paths: list[Path], expand: bool, report: VerifyReport) -> list[Path]:
    if not expand:
        return paths
    try:
        first = ShardFile(paths[0], verify="never")
    except (DatasetNotFoundError, NotAnMrecordFileError):
        raise
    except MrecordError as exc:
        report.problems.append(str(exc))
        return []
    try:
        journal = journal_path(first.path.parent, first.meta.dataset_name)
        if journal.exists():
            report.problems.append(
                f"an unfinished commit journal {str(journal)!r} exists; opening the dataset "
                "with write access finishes it"
            )
        return sibling_paths(first.path, first.meta.shard_names)
    finally:
        first.close()


def _check_siblings(shards: list[ShardFile], expand: bool, report: VerifyReport) -> None:
    """What the reader checks across files (one dataset, generation, schema; each shard in
    its place; no shard twice), every problem reported."""
    if shards:
        report.problems.extend(message for _, message in sibling_problems(shards, expand))


def _check_pages(
    shard: ShardFile, report: VerifyReport, progress: Callable[[int], None] | None
) -> None:
    for page in range(shard.meta.num_pages):
        for fld in shard.meta.schema.fields:
            report.chunks_checked += 1
            try:
                if fld.kind is FieldKind.FIXED:
                    shard.fixed_page(page, fld)
                else:
                    shard.var_page(page, fld)
                    shard.check_value_table(page, fld)
            except MrecordError as exc:
                report.problems.append(str(exc))
        report.pages_checked += 1
        if progress is not None:
            progress(1)


def _check_head_index(shard: ShardFile, report: VerifyReport) -> None:
    """The head index (format 1.4) reads back intact and holds, for every chunk with a
    value table, the same table and head as lie before the chunk, and for every small
    chunk the chunk's bytes. Then the shard is told to ignore it: the pages are checked
    against their own tables."""
    intact = shard.head_index_intact()
    where = str(shard.path)
    if intact is False:
        report.problems.append(
            f"{where!r}: the head index (a copy of the value tables and heads, after the "
            "pages) is damaged; readers ignore it and read each head from its chunk "
            "(`mrecord convert mrecord` rewrites the dataset with a new one)"
        )
    elif intact:
        meta = shard.meta
        held = part_lengths(meta.schema, meta.page_rows, meta.chunks) > 0
        for page, col in zip(*np.nonzero(held), strict=True):
            page, col = int(page), int(col)
            copy = shard.index_part(page, col)
            if meta.chunks[page, col]["flags"] & FLAG_VALUE_CRCS:
                start, length = shard.head_range(page, col)
                what = "value table and head"
            else:
                start, length = shard.chunk_place(page, col)[:2]
                what = "chunk"
            if copy is None or bytes(copy) != shard.read_region(start, length):
                name = meta.schema.fields[col].name
                report.problems.append(
                    f"{where!r}: page {page}, field {name!r}: the head index's copy of the "
                    f"{what} differs from the chunk's own; readers that use it may fail; "
                    "rewrite the dataset (`mrecord convert mrecord`)"
                )
                break
    shard.ignore_head_index()


def _check_index(shard: ShardFile, report: VerifyReport) -> None:
    try:
        check_index_db(shard.path, shard.meta)
    except MrecordError as exc:
        report.problems.append(str(exc))
        return
    quoted = ", ".join(["row_id", "page", "slot", *map(index_column, shard.meta.index_fields)])
    sql = f"SELECT {quoted} FROM {ROWS_TABLE} ORDER BY row_id"
    try:
        _compare_locations(shard, iter_index_db(shard.path, sql), report)
    except MrecordError as exc:
        report.problems.append(str(exc))


def _compare_locations(
    shard: ShardFile, blocks: Iterator[list[tuple[object, ...]]], report: VerifyReport
) -> None:
    """Check the ``.db``'s rows (``blocks`` of them, in row order) against the data file:
    their number, each one's page and slot, and its index fields' values, a block at a
    time (read whole, the rows of a 10M-row shard were ~1.5 GB of Python tuples)."""
    where = f"index of {str(shard.path)!r}"
    n = shard.meta.num_rows
    indexed = bool(shard.meta.index_fields)
    reader = DatasetReader([shard], columns=list(shard.meta.index_fields)) if indexed else None
    seen = 0
    checking = True  # until the first problem: one report per index, as before
    for rows in blocks:
        if checking and seen + len(rows) > n:
            checking = False  # more rows than the data file: counted, then reported
        if checking:
            checking = _compare_block(shard, reader, rows, seen, where, report)
        seen += len(rows)
    if seen > n or (indexed and seen < n):
        # Format 1.2 keeps no rows for a shard without index fields; one written by 1.1
        # has a row per row, and appending with 1.2 leaves those for the older rows only:
        # fewer rows than the file's are right there, where they point where it says.
        report.problems.append(f"{where} has {seen} rows, the data file {n}")


def _compare_block(
    shard: ShardFile,
    reader: DatasetReader | None,
    rows: list[tuple[object, ...]],
    first: int,
    where: str,
    report: VerifyReport,
) -> bool:
    """Check rows ``first ..`` of the ``.db`` (``rows``); False once a problem is reported."""
    for i, row in enumerate(rows):
        if not all(type(cell) is int for cell in row[:3]):
            report.problems.append(
                f"{where}: row {first + i} has a location that is not three integers: {row[:3]!r}"
            )
            return False
    ids = np.arange(first, first + len(rows), dtype=np.int64)
    table = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3)
    pages = np.searchsorted(shard.page_starts, ids, side="right") - 1
    expected = np.stack([ids, pages, ids - shard.page_starts[pages]], axis=1)
    if not np.array_equal(table, expected):
        bad = first + int(np.flatnonzero(np.any(table != expected, axis=1))[0])
        report.problems.append(f"{where}: row {bad} points at the wrong page or slot")
        return False
    if reader is None:
        return True
    try:
        block = reader.read_rows(ids)
    except MrecordError:
        return False  # damaged pages were already reported
    for j, name in enumerate(shard.meta.index_fields):
        stored = [r[3 + j] for r in rows]
        actual = block.columns[name]
        values = actual.tolist() if isinstance(actual, np.ndarray) else list(actual)
        # SQLite stores a NaN as NULL: that is the value the writer put there, not damage.
        values = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
        if stored != values:
            bad = next(i for i, (a, b) in enumerate(zip(stored, values, strict=True)) if a != b)
            report.problems.append(f"{where}: index field {name!r} of row {first + bad} is stale")
            return False
    return True
