"""Crash harness: run a writer in a subprocess, SIGKILL it, check what survived.

The worker (``python -m reliability.crash DIR SHARDS TARGET STEP``) creates a
dataset and appends to it, ``len(COMMITS)`` commits in all, printing a marker
line before each phase (flushed, with its monotonic time)::

    OPEN c     before FileWriter(...) / open_for_append for commit c
    WRITE c    before the write_raw_data calls of commit c
    BEGIN c    before commit() of commit c
    DONE c     after commit() of commit c returned

The parent kills it at a random delay after a chosen marker (or the worker
kills itself at a commit step named by ``STEP``, through the hook
``mrecord.storage.commit.crash_hook`` that :func:`install_crash_at` installs),
then checks the dataset:

- it opens and holds exactly the rows of the last DONE commit, or of the commit
  that had BEGun (a commit is atomic: all of it or none of it), or, when no
  commit finished, it does not exist and no file of it is visible but the lock;
- every row is whole (payload and vector derived from its id), ids are 0..n-1;
- ``verify_dataset`` passes;
- the next writer cleans up every temporary file, and the verdict does not change.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "COMMITS",
    "PHASES",
    "CrashTrial",
    "calibrate",
    "check_dataset",
    "make_rows",
    "run_trial",
    "shard_files",
    "totals",
]

NAME = "data"
SCHEMA = {
    "id": {"type": "int64"},
    "payload": {"type": "bytes", "compression": "zstd"},
    "vec": {"type": "float32", "shape": [-1]},
}
# Rows per write_raw_data call, per commit: commit 1 creates, the others append.
COMMITS: list[list[int]] = [[300, 500, 200], [250, 250], [400]]
PHASES = ("write", "commit", "append")
STEPS = ("journal", "renamed_one", "tail_part", "renamed_all")
_TEMP_SUFFIXES = (".mrecord-partial", ".mrecord-journal")


def totals() -> list[int]:
    """Rows in the dataset after 0, 1, 2, ... commits."""
    out = [0]
    for calls in COMMITS:
        out.append(out[-1] + sum(calls))
    return out


def _payload(i: int) -> bytes:
    return (b"%d:" % i) * (1 + i % 40)


def make_rows(start: int, n: int) -> list[dict[str, Any]]:
    """Rows with ids ``start..start+n-1``, every value derived from the id."""
    return [
        {
            "id": i,
            "payload": _payload(i),
            "vec": np.full(i % 5, i, dtype=np.float32),
        }
        for i in range(start, start + n)
    ]


# -- the worker ------------------------------------------------------------------------------


def _mark(what: str, c: int) -> None:
    sys.stdout.write(f"{what} {c} {time.monotonic():.6f}\n")
    sys.stdout.flush()


def install_crash_at(step: str) -> None:
    """Make this process SIGKILL itself when a commit reaches ``step`` (see ``crash_hook``)."""
    from mrecord.storage import commit

    def crash(reached: str) -> None:
        if reached == step:
            os.kill(os.getpid(), signal.SIGKILL)

    commit.crash_hook = crash


def shard_files(directory: Path, shards: int, name: str = NAME) -> list[Path]:
    """The data files of the dataset ``name`` with ``shards`` shards."""
    from mrecord.storage.naming import shard_file_names

    return shard_file_names(directory / name, shards)


def write_commits(
    directory: Path,
    shards: int,
    commits: list[list[int]],
    mark: Callable[[str, int], None],
    page_size: int = 4096,
    name: str = NAME,
) -> None:
    """Create the dataset and append to it: ``commits`` holds the rows of each
    ``write_raw_data`` call, per commit; ``mark(what, c)`` is called at each marker."""
    from mrecord.writer.file_writer import FileWriter

    path = directory / name
    files = shard_files(directory, shards, name)
    next_id = 0
    for c, calls in enumerate(commits, start=1):
        mark("OPEN", c)
        if c == 1:
            writer = FileWriter(path, shard_num=shards)
            writer.add_schema(SCHEMA)
            writer.add_index(["id"])
            writer.set_page_size(page_size)
        else:
            writer = FileWriter.open_for_append(files[c % shards])
        mark("WRITE", c)
        for n in calls:
            writer.write_raw_data(make_rows(next_id, n))
            next_id += n
        mark("BEGIN", c)
        writer.commit()
        mark("DONE", c)


def worker(directory: Path, shards: int, target: int, step: str, hold: str = "") -> None:
    """Write every commit of :data:`COMMITS`; crash at ``step`` of commit ``target``.

    With ``hold`` (a marker name), the worker stops after printing ``hold target`` and
    waits for a line on stdin: the parent's random kill then always lands inside the
    phase it aims at, even when the delay it drew outlasts the phase.
    """

    def mark(what: str, c: int) -> None:
        if what == "BEGIN" and c == target and step:
            install_crash_at(step)
        _mark(what, c)
        if hold and what == hold and c == target:
            sys.stdin.readline()

    write_commits(directory, shards, COMMITS, mark)


# -- the checks ------------------------------------------------------------------------------


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _read_total(directory: Path, shards: int, name: str = NAME) -> int | None:
    """Rows of the committed dataset (checked row by row), or None when it does not exist."""
    from mrecord.errors import DatasetNotFoundError
    from mrecord.maintenance.verify import verify_dataset
    from mrecord.reader.dataset_reader import DatasetReader

    first = shard_files(directory, shards, name)[0]
    try:
        reader = DatasetReader.open(first, verify="always")
    except DatasetNotFoundError:
        return None
    with reader:
        n = reader.num_rows
        ids = np.zeros(0, dtype=np.int64)
        for block in reader.iter_blocks(chunk_size=512):
            got = np.asarray(block.columns["id"])
            for i, payload, vec in zip(
                got.tolist(), block.columns["payload"], block.columns["vec"], strict=True
            ):
                if payload != _payload(i) or not np.array_equal(
                    vec, np.full(i % 5, i, dtype=np.float32)
                ):
                    raise AssertionError(f"row with id {i} is not whole: {payload[:20]!r}")
            ids = np.concatenate([ids, got])
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise AssertionError(f"ids are not 0..{n - 1}: {ids[:20].tolist()}...")
    report = verify_dataset(first)
    if not report.ok or report.rows != n:
        raise AssertionError(f"verify failed on {n} rows: {report.problems}")
    return n


def check_dataset(directory: Path, shards: int, allowed: set[int], name: str = NAME) -> int:
    """Check the dataset after a kill (see the module docstring); returns its row count."""
    from mrecord.writer.file_writer import FileWriter

    found = _read_total(directory, shards, name)
    total = 0 if found is None else found
    if total not in allowed:
        raise AssertionError(f"dataset holds {total} rows; allowed after this kill: {allowed}")
    if found is None:
        leftovers = [n for n in _visible(directory) if not n.endswith(_TEMP_SUFFIXES)]
        # After a power cut the lock file's own creation may be lost too: it holds nothing.
        if leftovers not in ([], [name + ".mrecord-lock"]):
            raise AssertionError(f"no commit finished, yet these files are visible: {leftovers}")
        FileWriter(directory / name, shard_num=shards).abort()
        if _visible(directory) != [name + ".mrecord-lock"]:
            raise AssertionError(f"a new writer left files behind: {_visible(directory)}")
    else:
        first = shard_files(directory, shards, name)[0]
        FileWriter.open_for_append(first).abort()
        temps = [n for n in _visible(directory) if n.endswith(_TEMP_SUFFIXES)]
        if temps:
            raise AssertionError(f"the next writer did not clean up {temps}")
    again = _read_total(directory, shards, name)
    if (0 if again is None else again) != total:
        raise AssertionError(f"the dataset changed from {total} to {again} rows after cleanup")
    return total


# -- the parent ------------------------------------------------------------------------------


@dataclass
class CrashTrial:
    """One kill and what was found after it."""

    phase: str
    target: int
    shards: int
    delay: float
    killed: bool = False
    markers: list[str] = field(default_factory=list)
    allowed: set[int] = field(default_factory=set)
    rows: int = -1


def _spawn(
    directory: Path, shards: int, target: int, step: str, hold: str = ""
) -> subprocess.Popen[str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    args = [str(directory), str(shards), str(target), step, hold]
    return subprocess.Popen(
        [sys.executable, "-m", "reliability.crash", *args],
        stdin=subprocess.PIPE,  # a held worker waits on it; closed at the end of the trial
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                out.put(line.strip())
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


def calibrate(directory: Path, shards: int = 2) -> dict[tuple[str, int], float]:
    """Run the worker to the end once; returns the seconds each (marker, commit) phase took."""
    directory.mkdir(parents=True, exist_ok=True)
    proc = _spawn(directory, shards, 0, "")
    stdout, stderr = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"calibration worker failed: {stderr}")
    stamps = [
        (line.split()[0], int(line.split()[1]), float(line.split()[2]))
        for line in stdout.splitlines()
    ]
    return {
        (what, c): max(0.001, stamps[k + 1][2] - t) for k, (what, c, t) in enumerate(stamps[:-1])
    }


def _allowed(markers: list[str]) -> set[int]:
    t = totals()
    done = [int(m.split()[1]) for m in markers if m.startswith("DONE")]
    last = max(done, default=0)
    began = [int(m.split()[1]) for m in markers if m.startswith("BEGIN")]
    allowed = {t[last]}
    if began and max(began) > last:
        allowed.add(t[max(began)])
    return allowed


def run_trial(
    directory: Path,
    rng: random.Random,
    durations: dict[tuple[str, int], float],
    phase: str,
    timeout: float = 60.0,
) -> CrashTrial:
    """Run one worker, kill it in ``phase`` ("write", "commit", "append" or a commit
    step of :data:`STEPS`), check the dataset; raises AssertionError on any violation."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    shards = rng.randint(1, 4)
    step = phase if phase in STEPS else ""
    # marker: the kill's delay counts from it; hold: the worker waits after it, so a
    # delay that outlasts the phase kills at the phase's end instead of missing it.
    hold = ""
    if phase == "write":
        target, marker, span, hold = 1, "WRITE", durations[("WRITE", 1)], "BEGIN"
    elif phase == "commit":
        target, marker, span, hold = 1, "BEGIN", durations[("BEGIN", 1)], "DONE"
    elif phase == "append":
        target = rng.randint(2, len(COMMITS))
        marker, hold = "OPEN", "DONE"
        span = sum(durations[(w, target)] for w in ("OPEN", "WRITE", "BEGIN"))
    elif phase == "tail_part":  # only an append writes a tail into a committed file
        target, marker, span = rng.randint(2, len(COMMITS)), "", 0.0
    else:
        target, marker, span = rng.randint(1, len(COMMITS)), "", 0.0
    trial = CrashTrial(phase, target, shards, rng.uniform(0, span * 1.2))
    proc = _spawn(directory, shards, target, step, hold)
    lines = _lines(proc)
    deadline = time.monotonic() + timeout
    kill_at: float | None = None
    while True:
        wait = deadline - time.monotonic()
        if kill_at is not None:
            wait = min(wait, kill_at - time.monotonic())
        try:
            line = lines.get(timeout=max(0.0, wait))
        except queue.Empty:
            line = ""
        if line is None:
            break
        if line:
            trial.markers.append(line)
            if marker and line.startswith(f"{marker} {target} "):
                kill_at = time.monotonic() + trial.delay
            if hold and line.startswith(f"{hold} {target} "):
                kill_at = time.monotonic()  # the phase ended first: kill the held worker now
        if kill_at is not None and time.monotonic() >= kill_at:
            proc.send_signal(signal.SIGKILL)
            trial.killed = True
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"worker hung: {trial.markers}")
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    proc.wait()
    while line is not None:  # markers printed before the kill landed, up to end of output
        try:
            line = lines.get(timeout=5.0)
        except queue.Empty:
            break
        if line is not None:
            trial.markers.append(line)
    assert proc.stderr is not None
    with proc.stderr:
        errors = proc.stderr.read()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"worker failed ({proc.returncode}): {errors}")
    trial.killed = proc.returncode == -signal.SIGKILL
    trial.allowed = _allowed(trial.markers)
    trial.rows = check_dataset(directory, shards, trial.allowed)
    return trial


if __name__ == "__main__":
    worker(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[5:6])
