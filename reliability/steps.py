"""Deterministic kills: SIGKILL a writer at every inner step of every commit, one by one.

The random kills of :mod:`reliability.crash` land where time happens to be spent, so
a step that takes microseconds (between a tail's two parts, between two ``.db``
merges) is almost never hit: that is how issue 27's D1-D3 got past them. Here the
writer first runs to the end once and lists every ``crash_hook`` step it passes
(:func:`kill_points`): the first commit (create), two appends, a reindex between them.
Then, for each point, a fresh writer SIGKILLs itself exactly there (``python -m
reliability.steps DIR NAME SHARDS POINT``), and the survivor is checked:

- whoever touches the dataset first after the kill (``FIRST_OPENERS``: a reader of the
  first or the last shard, an appender, ``reindex``, ``verify``) finishes the commit
  and succeeds; every hook step is past the journal, so the commit is durable and the
  dataset must hold exactly its rows (a reindex keeps the rows of the commit before it);
- then :func:`reliability.crash.check_dataset`: every row whole, ids ``0..n-1``,
  ``verify_dataset`` passes, the next writer leaves no temporary file.

Names with and without trailing digits (``data``, ``ds1``, ``v20``) and one, two and
eleven shards (zero-padded ``NAME00`` ... ``NAME10``) are the axes that hid D2.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reliability.crash import check_dataset, make_rows, shard_files

__all__ = [
    "FIRST_OPENERS",
    "KillPoint",
    "PointResult",
    "kill_points",
    "run_point",
]

# The work: commit 1 creates, 2 and 3 append; "r" is a reindex between them.
_COMMITS: list[list[int]] = [[300, 200], [250, 150], [400]]
_REINDEX_AFTER = 2
FIRST_OPENERS = ("reader", "reader-last", "appender", "reindex", "verify")


@dataclass(frozen=True)
class KillPoint:
    """The ``nth`` time ``step`` is reached during ``phase`` (``c1``, ``c2``, ``r``, ``c3``)."""

    phase: str
    step: str
    nth: int

    def __str__(self) -> str:
        return f"{self.phase}:{self.step}:{self.nth}"

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        """The point ``str`` wrote."""
        phase, step, nth = text.split(":")
        return cls(phase, step, int(nth))


def _rows_after(phase: str) -> int:
    """Rows in the dataset once ``phase`` is committed (a reindex adds none)."""
    t = _totals()
    return t[_REINDEX_AFTER] if phase == "r" else t[int(phase[1:])]


def _totals() -> list[int]:
    out = [0]
    for calls in _COMMITS:
        out.append(out[-1] + sum(calls))
    return out


# -- the worker ------------------------------------------------------------------------------


def _work(directory: Path, name: str, shards: int, hook: Callable[[str, str], None]) -> None:
    """Create, append, reindex, append; ``hook(phase, step)`` at each commit step."""
    from mrecord.maintenance.reindex import reindex
    from mrecord.storage import commit
    from mrecord.writer.file_writer import FileWriter

    phase = [""]
    commit.crash_hook = lambda step: hook(phase[0], step)
    files = shard_files(directory, shards, name)
    next_id = 0
    for c, calls in enumerate(_COMMITS, start=1):
        if c == 1:
            writer = FileWriter(directory / name, shard_num=shards)
            writer.add_schema(_schema())
            writer.add_index(["id"])
            writer.set_page_size(4096)
        else:
            writer = FileWriter.open_for_append(files[c % shards])
        for n in calls:
            writer.write_raw_data(make_rows(next_id, n))
            next_id += n
        phase[0] = f"c{c}"
        writer.commit()
        if c == _REINDEX_AFTER:
            phase[0] = "r"
            reindex(files[-1])


def _schema() -> dict[str, object]:
    from reliability.crash import SCHEMA

    return SCHEMA


def worker(directory: Path, name: str, shards: int, point: str) -> None:
    """Run the work; with ``point`` SIGKILL this process there, without it print every point."""
    target = KillPoint.parse(point) if point else None
    seen: Counter[tuple[str, str]] = Counter()

    def hook(phase: str, step: str) -> None:
        seen[(phase, step)] += 1
        here = KillPoint(phase, step, seen[(phase, step)])
        if target is None:
            sys.stdout.write(f"{here}\n")
            sys.stdout.flush()
        elif here == target:
            os.kill(os.getpid(), signal.SIGKILL)

    _work(directory, name, shards, hook)


# -- the parent ------------------------------------------------------------------------------


def _run(directory: Path, name: str, shards: int, point: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "reliability.steps", str(directory), name, str(shards), point],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def kill_points(directory: Path, name: str, shards: int) -> list[KillPoint]:
    """Every commit step the work passes, in order (one run to the end, unkilled)."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    done = _run(directory, name, shards, "")
    if done.returncode != 0:
        raise RuntimeError(f"the unkilled worker failed: {done.stderr}")
    check_dataset(directory, shards, {_totals()[-1]}, name)
    return [KillPoint.parse(line) for line in done.stdout.split()]


@dataclass
class PointResult:
    """What one kill left: the rows found and which opener went first."""

    point: KillPoint
    first: str
    rows: int


def _first_open(directory: Path, name: str, shards: int, first: str) -> None:
    """The first thing to touch the dataset after the kill; it must succeed."""
    from mrecord.maintenance.reindex import reindex
    from mrecord.maintenance.verify import verify_dataset
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.writer.file_writer import FileWriter

    files = shard_files(directory, shards, name)
    if first in ("reader", "reader-last"):
        with DatasetReader.open(files[0] if first == "reader" else files[-1]) as reader:
            reader.read_rows(range(reader.num_rows))
    elif first == "appender":
        FileWriter.open_for_append(files[-1]).abort()
    elif first == "reindex":
        reindex(files[0])
    else:
        report = verify_dataset(files[0])
        if not report.ok:
            raise AssertionError(f"verify after the kill: {report.problems}")


def run_point(directory: Path, name: str, shards: int, point: KillPoint, first: str) -> PointResult:
    """Kill the work at ``point``, let ``first`` open the dataset, check everything.

    Raises AssertionError (or the opener's error) on any violation.
    """
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    done = _run(directory, name, shards, str(point))
    if done.returncode != -signal.SIGKILL:
        raise AssertionError(
            f"the worker was not killed at {point} ({done.returncode}): {done.stderr[-2000:]}"
        )
    want = _rows_after(point.phase)
    try:
        _first_open(directory, name, shards, first)
    except Exception as exc:
        why = f"{first} after a kill at {point}: {type(exc).__name__}: {exc}"
        raise AssertionError(why) from exc
    rows = check_dataset(directory, shards, {want}, name)
    return PointResult(point, first, rows)


if __name__ == "__main__":
    worker(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4])
