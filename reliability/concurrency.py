"""Readers racing an appender: processes that read while another commits.

``python -m reliability.concurrency writer DIR APPENDS`` appends
:data:`APPEND_ROWS` rows ``APPENDS`` times to the dataset made by
:func:`create`, then touches ``DIR/stop``. ``... reader DIR`` opens and reads
the whole dataset again and again until ``stop`` exists, checking every
snapshot, and prints a JSON summary: the row counts it saw and any error.
``... reindexer DIR`` rebuilds the ``.db`` files again and again until ``stop``
exists (reindex racing the appender: issue 27's D3) and prints how many rebuilds
it published, how many found the dataset locked, and any error.

A snapshot is consistent when its ids are exactly ``0..n-1``, every row is whole
(values derived from its id) and ``n`` is the row count after some commit.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from reliability.crash import make_rows

__all__ = [
    "APPEND_ROWS",
    "BASE_ROWS",
    "SHARDS",
    "create",
    "reader_loop",
    "reindex_loop",
    "writer_loop",
]

T = TypeVar("T")

NAME = "data"
SHARDS = 3
BASE_ROWS = 300
APPEND_ROWS = 150


def _schema() -> dict[str, Any]:
    from reliability.crash import SCHEMA

    return SCHEMA


def create(directory: Path) -> Path:
    """Write the base dataset; returns its first shard file."""
    from mrecord.writer.file_writer import FileWriter

    writer = FileWriter(directory / NAME, shard_num=SHARDS)
    writer.add_schema(_schema())
    writer.set_page_size(4096)
    writer.write_raw_data(make_rows(0, BASE_ROWS))
    writer.commit()
    return writer.files[0]


def writer_loop(directory: Path, appends: int) -> None:
    """Append ``appends`` times, then signal the readers to stop."""
    from mrecord.writer.file_writer import FileWriter

    n = BASE_ROWS
    for _ in range(appends):
        writer = _retry_locked(lambda: FileWriter.open_for_append(directory / (NAME + "1")))
        writer.write_raw_data(make_rows(n, APPEND_ROWS))
        writer.commit()
        n += APPEND_ROWS
    (directory / "stop").touch()


def _retry_locked(open_it: Callable[[], T], seconds: float = 60.0) -> T:
    """``open_it()``, again while another process holds the dataset (a reindex, a writer)."""
    from mrecord.errors import DatasetLockedError

    deadline = time.monotonic() + seconds
    while True:
        try:
            return open_it()
        except DatasetLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def reindex_loop(directory: Path, max_seconds: float = 120.0) -> dict[str, object]:
    """Rebuild the indexes until the writer is done; returns the counts and any error."""
    from mrecord.errors import DatasetLockedError
    from mrecord.maintenance.reindex import reindex

    published = locked = 0
    errors: list[str] = []
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline and not (directory / "stop").exists():
        try:
            reindex(directory / (NAME + "2"))
            published += 1
        except DatasetLockedError:
            locked += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"published": published, "locked": locked, "errors": errors[:20]}


def _check_snapshot(first: Path) -> int:
    from mrecord.reader.dataset_reader import DatasetReader

    with DatasetReader.open(first) as reader:
        n = reader.num_rows
        block = reader.read_rows(np.arange(n))
    ids = np.asarray(block.columns["id"])
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise AssertionError(f"snapshot of {n} rows does not hold ids 0..{n - 1}")
    if (n - BASE_ROWS) % APPEND_ROWS:
        raise AssertionError(f"snapshot of {n} rows is not the state after any commit")
    for i, payload in zip(ids.tolist(), block.columns["payload"], strict=True):
        if payload != make_rows(i, 1)[0]["payload"]:
            raise AssertionError(f"row {i} is not whole")
    return n


def reader_loop(directory: Path, max_seconds: float = 60.0) -> dict[str, object]:
    """Read snapshots until the writer is done; returns counts seen and errors."""
    first = directory / (NAME + "0")
    seen: Counter[int] = Counter()
    errors: list[str] = []
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        done = (directory / "stop").exists()
        try:
            seen[_check_snapshot(first)] += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        if done:
            break
    return {"seen": {str(k): v for k, v in sorted(seen.items())}, "errors": errors[:20]}


if __name__ == "__main__":
    if sys.argv[1] == "writer":
        writer_loop(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "reindexer":
        print(json.dumps(reindex_loop(Path(sys.argv[2]))))
    else:
        print(json.dumps(reader_loop(Path(sys.argv[2]))))
