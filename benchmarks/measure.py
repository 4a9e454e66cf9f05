"""Timing and memory measurement shared by the mrecord and MindSpore sides (stdlib only).

A :class:`Measurement` is one number of one benchmark: how many rows (or images) were
processed in how many seconds, how many payload bytes that was, and the peak resident
memory of the process tree while it ran. :class:`PeakRss` samples that memory from
``/proc`` in a background thread, so worker processes and threads are counted too.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PAGE",
    "Measurement",
    "PeakRss",
    "Stopwatch",
    "emit",
    "files_size",
    "fsync_tree",
    "guarded",
    "max_rss_mb",
    "measuring",
    "median_of",
    "read_repeats",
    "touch",
    "tree_memory",
    "tree_rss_bytes",
]

_MB = 1 << 20


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc/PID/task/TID/children``)."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        except OSError:
            continue
        kids.extend(int(tok) for tok in text.split())
    return kids


def _rss_bytes(pid: int) -> tuple[int, int]:
    """(resident bytes, private bytes) of one process; private = ``RssAnon + RssShmem``."""
    total = private = 0
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssShmem"):
            kb = int(value.split()[0]) * 1024
            if key == "VmRSS":
                total = kb
            else:
                private += kb
    return total, private


def tree_memory(pid: int | None = None) -> tuple[int, int]:
    """(resident, private) bytes of process ``pid`` (default: this one) and its descendants.

    *Resident* includes file pages mapped with mmap (reclaimable page cache: a reader
    that mmaps a 800 MB file shows up to 800 MB here); *private* counts only anonymous
    and shared-memory pages, the memory a process really holds. Pages shared between
    processes are counted once per process, as ``ps`` does. Zeros where ``/proc`` is
    unavailable.
    """
    root = os.getpid() if pid is None else pid
    total = private = 0
    stack = [root]
    seen: set[int] = set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        rss, priv = _rss_bytes(p)
        total += rss
        private += priv
        stack.extend(_children(p))
    return total, private


def tree_rss_bytes(pid: int | None = None) -> int:
    """Resident bytes of process ``pid`` (default: this one) and its descendants."""
    return tree_memory(pid)[0]


def max_rss_mb() -> float:
    """Peak resident memory of this process over its whole life (``ru_maxrss``), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class PeakRss:
    """Context manager sampling the process tree's resident memory every ``interval`` s.

    ``peak_mb`` is the highest resident total seen (at least the value at entry and
    exit), ``peak_private_mb`` the highest private total (see :func:`tree_memory`),
    ``base_mb`` / ``base_private_mb`` the values at entry.
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.base_mb = self.peak_mb = 0.0
        self.base_private_mb = self.peak_private_mb = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        total, private = tree_memory()
        self.peak_mb = max(self.peak_mb, total / _MB)
        self.peak_private_mb = max(self.peak_private_mb, private / _MB)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakRss:
        total, private = tree_memory()
        self.base_mb = self.peak_mb = total / _MB
        self.base_private_mb = self.peak_private_mb = private / _MB
        self._thread = threading.Thread(target=self._loop, name="PeakRss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class Measurement:
    """One benchmark number: ``rows`` processed in ``seconds``, ``nbytes`` of payload.

    ``extra`` holds free-form notes (e.g. settings used) that end up in the JSON.
    """

    name: str
    rows: int = 0
    seconds: float = 0.0
    nbytes: int = 0
    peak_rss_mb: float = 0.0
    base_rss_mb: float = 0.0
    peak_private_mb: float = 0.0
    base_private_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        """Rows (or images) per second; 0 when nothing was timed."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        """Payload megabytes (2**20 bytes) per second; 0 when nothing was timed."""
        return self.nbytes / _MB / self.seconds if self.seconds > 0 else 0.0

    def record_memory(self, rss: PeakRss) -> None:
        """Copy the peaks and bases measured by ``rss``."""
        self.peak_rss_mb, self.base_rss_mb = rss.peak_mb, rss.base_mb
        self.peak_private_mb, self.base_private_mb = rss.peak_private_mb, rss.base_private_mb

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the derived rates included."""
        out = asdict(self)
        out["rows_per_s"] = round(self.rows_per_s, 1)
        out["mb_per_s"] = round(self.mb_per_s, 1)
        out["seconds"] = round(self.seconds, 4)
        out["peak_rss_mb"] = round(self.peak_rss_mb, 1)
        out["base_rss_mb"] = round(self.base_rss_mb, 1)
        out["peak_private_mb"] = round(self.peak_private_mb, 1)
        out["base_private_mb"] = round(self.base_private_mb, 1)
        return out


class Stopwatch:
    """Accumulates time over several timed sections: ``with sw: ...``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._t0


@contextmanager
def measuring(m: Measurement) -> Iterator[Measurement]:
    """Time the body and record the peak process-tree memory into ``m``."""
    with PeakRss() as rss:
        t0 = time.perf_counter()
        yield m
        m.seconds = time.perf_counter() - t0
    m.record_memory(rss)


def read_repeats() -> int:
    """How many times each read step runs (``MRECORD_BENCH_REPEAT``, default 3); both
    sides of a comparison read the same variable."""
    return max(1, int(os.environ.get("MRECORD_BENCH_REPEAT", "3")))


def median_of(repeats: int, step: Callable[[], Measurement]) -> Measurement:
    """Run ``step`` ``repeats`` times and keep the run with the median rate.

    On a shared machine one run of a sub-second read step can lose half its speed to
    another process or a garbage collection; the median of three is what the step
    costs, and every run's rate stays in ``extra["runs_rows_per_s"]``.
    """
    runs = [step() for _ in range(repeats)]
    runs.sort(key=lambda m: m.rows_per_s)
    kept = runs[len(runs) // 2]
    kept.extra["runs_rows_per_s"] = [round(m.rows_per_s, 1) for m in runs]
    return kept


PAGE = 4096
"""The consumer reads one byte per ``PAGE`` bytes of every value it gets (see :func:`touch`)."""


def touch(value: Any) -> int:
    """Read one byte of every 4 KiB page of ``value``, as a training step that uses it would.

    Every consumer of every side calls this on what it gets: a zero-copy view that nobody
    reads costs its reader nothing, so comparing it against a peer that copies every byte
    would measure not reading at all. Handles bytes-like objects and numpy arrays (any
    buffer), Arrow tables / arrays (their buffers), numpy object arrays, lists, tuples and
    dicts (recursively); strings and scalars are already Python values. Returns a number
    made from the bytes read (a sum of them, or for a value of one page whether its first
    and last items are equal), so the reads cannot be skipped.
    """
    import numpy as np

    if type(value) is np.ndarray and not value.dtype.hasobject and value.flags.c_contiguous:
        # The common case first, without the generic checks below: a per-row consumer
        # of small arrays spent more time here than the reader spent producing them.
        nbytes = value.nbytes
        if nbytes == 0:
            return 0
        if nbytes <= PAGE:
            # Its first and last items: every page a value of at most one page spans
            # (0.4 us, against 0.8 for a byte view of it: variable-shape rows one by one
            # spent more time in this consumer than in the reader).
            return int(value.item(0) == value.item(-1))
        flat = value.reshape(-1).view(np.uint8)
        return int(flat[::PAGE].sum(dtype=np.uint64)) + int(flat[-1])
    if type(value) is bytes:
        if not value:
            return 0
        if len(value) <= PAGE:
            return value[0] + value[-1]
        return int(np.frombuffer(value, np.uint8)[::PAGE].sum(dtype=np.uint64)) + value[-1]
    if type(value) is list or type(value) is tuple:
        return sum(map(touch, value))
    if value is None or isinstance(value, (str, int, float, bool, np.generic)):
        return 0
    if isinstance(value, dict):
        return sum(touch(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(touch(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == object:
        return sum(touch(v) for v in value.ravel().tolist())
    if type(value).__name__ == "RaggedColumn":  # mrecord's read_ragged: its three arrays
        return touch([value.values, value.offsets, value.shapes])
    columns = getattr(value, "columns", None)  # pyarrow Table / RecordBatch
    if columns is not None and hasattr(value, "num_rows") and not isinstance(value, np.ndarray):
        return sum(touch(c) for c in columns)
    chunks = getattr(value, "chunks", None)  # pyarrow ChunkedArray
    if chunks is not None and hasattr(value, "num_chunks"):
        return sum(touch(c) for c in chunks)
    buffers = getattr(value, "buffers", None)  # pyarrow Array
    if callable(buffers) and not isinstance(value, (bytes, bytearray, memoryview, np.ndarray)):
        return sum(touch(memoryview(b)) for b in buffers() if b is not None)
    if isinstance(value, np.ndarray):
        array = value if value.flags.c_contiguous else np.ascontiguousarray(value)
        flat = array.reshape(-1).view(np.uint8)
    else:
        try:
            view = memoryview(value)
        except TypeError:
            return touch(np.asarray(value))  # e.g. a framework tensor: its numpy form
        if not view.c_contiguous:
            return touch(np.ascontiguousarray(value))
        flat = np.frombuffer(view.cast("B"), dtype=np.uint8)
    if flat.size == 0:
        return 0
    return int(flat[::PAGE].sum(dtype=np.uint64)) + int(flat[-1])


def fsync_tree(root: Path) -> int:
    """``fsync`` every file under ``root`` (and ``root`` itself if a file); bytes synced."""
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    total = 0
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        total += p.stat().st_size
    dirs = {p.parent for p in files} | ({root} if root.is_dir() else set())
    for d in dirs:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return total


def files_size(paths: list[Path]) -> int:
    """Total size in bytes of the given files (missing ones count 0)."""
    return sum(p.stat().st_size for p in paths if p.exists())


def guarded(metric: str, fn: Callable[[], Measurement]) -> Measurement:
    """Run one benchmark step; on failure return an empty measurement carrying the error.

    Lets a run report every step that works while a layer under test is unfinished.
    """
    try:
        return fn()
    except Exception as exc:
        m = Measurement(metric)
        m.extra["error"] = f"{type(exc).__name__}: {exc}"
        m.extra["traceback"] = traceback.format_exc(limit=6)
        return m


def emit(
    measurements: list[Measurement],
    *,
    side: str,
    version: str,
    suite: str,
    workload: str,
    scale: float,
    rows: int,
    path: Path | None,
) -> dict[str, Any]:
    """Print one side's result as JSON on the last stdout line; also save it to ``path``."""
    result = {
        "side": side,
        "version": version,
        "suite": suite,
        "workload": workload,
        "scale": scale,
        "rows": rows,
        "metrics": {m.name: m.to_dict() for m in measurements},
        "max_rss_mb": round(max_rss_mb(), 1),
    }
    text = json.dumps(result)
    if path is not None:
        path.write_text(text)
    sys.stdout.write("\n" + text + "\n")
    sys.stdout.flush()
    return result


def workload_main(
    argv: list[str] | None,
    *,
    description: str,
    suite: str,
    workloads: tuple[str, ...],
    run: Callable[[str, float, Path, float], list[Measurement]],
    rows: Callable[[str, float], int],
    version: str,
    max_seconds: float,
) -> int:
    """The shared command line of one side's suite: ``WORKLOAD [--scale] [--out-dir] ...``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("workload", choices=workloads)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out-dir", type=Path, default=Path("bench_out/mrecord"))
    parser.add_argument("--max-seconds", type=float, default=max_seconds)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    measurements = run(args.workload, args.scale, args.out_dir, args.max_seconds)
    emit(
        measurements,
        side="mrecord",
        version=version,
        suite=suite,
        workload=args.workload,
        scale=args.scale,
        rows=rows(args.workload, args.scale),
        path=args.json,
    )
    return 0
