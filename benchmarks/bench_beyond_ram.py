"""Reading from a cold disk, a slow volume, and a dataset larger than the reader's memory
(issue 23).

Usage (as root: it drops the page cache and makes cgroups)::

    python -m benchmarks.bench_beyond_ram [--quick] [--workloads images,tabular,varshape]
        [--modes global,partial,block,none] [--devices local,cloud,hdd] [--[no-]fits]
        [--seconds S] [--no-mindspore] [--mindspore-python PATH] [--dir DIR] [--json FILE]

One run, side by side, mrecord and MindSpore (in its own interpreter; "not installed" when
there is none; MindSpore has no block mode, so BLOCK rows show "-" on its side):

- workloads (``benchmarks.workloads``, both sides write the same rows to one shard):
  ``images`` (100 KB bytes values, one row per step), ``tabular`` (76-byte rows, batches
  of 256), ``varshape`` (float32[k, 3], k in 1..64, one row per step);
- devices: ``local`` (the disk as it is), ``cloud`` (a blkio group throttling the disk's
  ``major:minor`` to 3,000 IOPS / 250 MB/s) and ``hdd`` (200 IOPS / 150 MB/s);
- memory: the reader in a cgroup v1 memory group of a third of the dataset (never less
  than ``_MIN_GROUP``: the interpreter, numpy and the library take ~100 MB of it), and,
  on the local device only, without a memory group (``fits``; not in ``--quick`` unless
  ``--fits``);
- modes: ``Shuffle.GLOBAL``, ``Shuffle.PARTIAL``, ``Shuffle.BLOCK``, ``shuffle=False``;
- per run: rows/s over the first 4,000 rows and over the first epoch, the same for the
  second epoch (same process: chunks checked in the first need no checksum again), each
  epoch read for at most ``--seconds`` (``stopped`` when cut; the second epoch only
  follows a whole first one); the group's peak memory (``memory.max_usage_in_bytes``)
  and ``memory.failcnt`` (how often it hit its limit); an OOM kill is reported;
- the limits, in the same run and under the same throttle (a child in the same groups):
  random reads of the row size at queue depth 32 (32 threads of ``pread``,
  ``POSIX_FADV_RANDOM``, no place read twice) and a sequential read (1 MiB ``pread``s,
  32 in flight), each from a cold cache.
  GLOBAL and PARTIAL are compared with the random limit, BLOCK and ``shuffle=False``
  with the sequential one (rows/s = MB/s / mean row bytes);
- the consumer alone, once a workload (``consumer_alone``): the same loop over rows held
  in memory. On two cores small rows can cost this consumer more than the device's
  limit allows a row (variable-shape rows on the cloud throttle): the table then also
  gives each run against the lower of the two.

Before each step ``sync; echo 1 > /proc/sys/vm/drop_caches``. Every consumer reads what it
gets (:func:`benchmarks.measure.touch`: one byte per 4 KiB page of each value; a view
nobody reads measures nothing). Readers run in child processes (``--child``), which the
MindSpore interpreter runs too: the module imports only numpy and ``benchmarks`` at the
top. Groups are named ``beyondram-<pid>-<n>`` and removed in ``finally``.

``--quick``: images 6,000 rows (600 MB), tabular 4M rows (300 MB), varshape 600k rows
(230 MB), each epoch at most 4 s, GLOBAL, BLOCK and ``shuffle=False`` in the memory group
only (45 readers; the first run also writes the data, MindSpore's tabular rows take
minutes). The full run: 24,000 /
8M / 2M rows (2.4 GB / 610 MB / 780 MB), at most 20 s an epoch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.measure import PAGE, touch

__all__ = ["DEVICES", "device_limits", "main"]

REPO = Path(__file__).resolve().parent.parent
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_FIRST = 4000
_QUEUE_DEPTH = 32
_MIN_GROUP = 200 << 20
_BATCH = 256
_GROUP_PREFIX = "beyondram"

DEVICES: dict[str, tuple[int, int] | None] = {
    "local": None,
    "cloud": (3000, 250_000_000),
    "hdd": (200, 150_000_000),
}
"""Device situations: (read IOPS, read bytes/s) of the blkio throttle, None: none."""

_QUICK_ROWS = {"images": 6000, "tabular": 4_000_000, "varshape": 600_000}
_FULL_ROWS = {"images": 24_000, "tabular": 8_000_000, "varshape": 2_000_000}
_BATCHED = {"tabular"}
_RANDOM_MODES = {"global", "partial"}


def drop_caches() -> None:
    """Write back and drop the page cache (root only)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


# -- the limits ----------------------------------------------------------------------------


def _parallel_reads(fd: int, places: list[int], nbytes: int, seconds: float) -> tuple[int, float]:
    """``pread``s of ``nbytes`` at ``places`` (in this order) from ``_QUEUE_DEPTH`` threads
    until done or ``seconds`` have passed: (reads done, seconds taken)."""
    todo = iter(places)
    lock = threading.Lock()
    done = [0]
    start = time.perf_counter()
    deadline = start + seconds

    def work() -> None:
        while time.perf_counter() < deadline:
            with lock:
                offset = next(todo, None)
            if offset is None:
                return
            os.pread(fd, nbytes, offset)
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=work) for _ in range(_QUEUE_DEPTH)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0], time.perf_counter() - start


def device_limits(path: Path, row_bytes: int, seconds: float = 3.0) -> dict[str, float]:
    """What the device under ``path`` delivers to this process (throttled when it is in
    a blkio group), each from a cold page cache, each for at most ``seconds``:

    - random: ``row_bytes`` reads at queue depth 32 (threads of ``pread``,
      ``POSIX_FADV_RANDOM``), each at its own page-aligned place, none read twice (a
      read the page cache answers would measure memory, not the device);
    - sequential: the file from its start in 1 MiB reads, 32 in flight (a reader that
      streams at full bandwidth keeps a queue too; one read at a time measures latency).

    Rows/s and MB/s of each."""
    size = path.stat().st_size
    row_bytes = max(1, row_bytes)
    stride = -(-row_bytes // 4096) * 4096  # whole pages: no two reads share one
    drop_caches()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no kernel read-around
        slots = np.random.default_rng(0).permutation(max(1, (size - row_bytes) // stride))
        random_n, random_s = _parallel_reads(fd, (slots * stride).tolist(), row_bytes, seconds)
        drop_caches()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        piece = 1 << 20
        seq_n, seq_s = _parallel_reads(fd, list(range(0, size, piece)), piece, seconds)
    finally:
        os.close(fd)
    seq_bytes = min(size, seq_n * piece)
    return {
        "row_bytes": row_bytes,
        "random_rows_s": random_n / random_s,
        "random_mb_s": random_n * row_bytes / random_s / 1e6,
        "random_reads": random_n,
        "sequential_mb_s": seq_bytes / seq_s / 1e6,
        "sequential_rows_s": seq_bytes / seq_s / row_bytes,
    }


# -- the reader, in a child process ----------------------------------------------------------


def _dataset(side: str, path: str, mode: str, verify: str = "once") -> Any:
    if side == "mrecord":
        from mrecord import MindDataset, Shuffle

        mine: dict[str, Any] = {
            "global": Shuffle.GLOBAL,
            "partial": Shuffle.PARTIAL,
            "block": Shuffle.BLOCK,
            "none": False,
        }
        return MindDataset(path, shuffle=mine[mode], verify=verify)
    msds = importlib.import_module("mindspore.dataset")  # its own interpreter
    theirs: dict[str, Any] = {
        "global": msds.Shuffle.GLOBAL,
        "partial": msds.Shuffle.PARTIAL,
        "none": False,
    }
    return msds.MindDataset(path, shuffle=theirs[mode])


def _read(item: Any) -> int:
    """Read every value of ``item`` (MindSpore's bytes values as arrays first), as
    :func:`benchmarks.measure.touch` does.

    The small arrays of variable-shape rows, one row a step, are read here (their first
    and last items, every page such a value spans): through ``touch`` a row of two
    values cost 3.9 us, more than the reader took to produce it (1.7 us), so both sides'
    rates were this consumer's.
    """
    total = 0
    for value in item:
        if type(value) is np.ndarray:
            nbytes = value.nbytes
            if nbytes <= PAGE and value.flags.c_contiguous and not value.dtype.hasobject:
                if nbytes:
                    total += value.item(0) == value.item(-1)
                continue
        elif isinstance(value, (bytes, np.bytes_)):
            value = np.frombuffer(value, dtype=np.uint8)
        total += touch(value)
    return total


def _read_bytes() -> float:
    """Bytes this process has had read from storage so far (``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return float(line.split()[1])
    return 0.0


def _system_seconds() -> float:
    """CPU seconds this process has spent in the kernel so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


_CONSUMER_BYTES = 256 << 20
"""At most this much of the dataset is held in memory to time the consumer alone."""


def consumer_alone(path: str, batched: bool, seconds: float) -> dict[str, float]:
    """The consumer's own rate: the rows of the start of ``path`` (up to
    ``_CONSUMER_BYTES``), read once in file order and held in a list, then handed to
    ``_read`` by the loop ``_child`` runs, for about ``seconds``. No reader can hand
    this consumer rows faster on this machine: where it is below the device's limit,
    it is the limit a run can reach (the cores', not the device's)."""
    ds = _dataset("mrecord", path, "none")
    size = ds.get_dataset_size()
    if batched:
        ds = ds.batch(_BATCH)
    keep = max(1, int(size * min(1.0, _CONSUMER_BYTES / max(1, Path(path).stat().st_size))))
    items: list[Any] = []
    held = 0
    for item in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
        items.append(item)
        held += len(item[0]) if batched else 1
        if held >= keep:
            break
    rows = total = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        countdown = 0
        for item in items:  # the loop of _child, clock and all
            total += _read(item)
            rows += len(item[0]) if batched else 1
            countdown -= 1
            if countdown > 0:
                continue
            countdown = 1 if batched else 64
            time.perf_counter()
    return {"consumer_rows_s": rows / (time.perf_counter() - start), "touched": float(total)}


def _child(
    side: str, path: str, mode: str, batched: bool, seconds: float, verify: str = "once"
) -> dict[str, Any]:
    """Read up to two epochs of ``path`` (each for at most ``seconds``) and time them.

    A reader that hands out nothing for ``seconds`` + 30 s (thrashing in its group) is
    cut by a watchdog, which prints what was read so far and ends the process."""
    ds = _dataset(side, path, mode, verify)
    size = ds.get_dataset_size()
    if batched:
        ds = ds.batch(_BATCH)
    iterator = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
    epochs: list[dict[str, Any]] = []
    state = {"rows": 0, "first": 0.0, "first_rows": 0, "start": 0.0, "read": 0.0, "cpu": 0.0}
    state["sys"] = 0.0

    def summary(stopped: bool) -> dict[str, Any]:
        elapsed = time.perf_counter() - state["start"]
        rows, first, first_rows = int(state["rows"]), state["first"], state["first_rows"]
        return {
            "disk_mb": (_read_bytes() - state["read"]) / 1e6,
            "cpu_s": time.process_time() - state["cpu"],
            "system_cpu_s": _system_seconds() - state["sys"],
            "rows": rows,
            "first4000_rows_s": rows and (first_rows if first else rows) / (first or elapsed),
            "rows_s": rows / elapsed,
            "stopped": stopped,
        }

    def watchdog() -> None:
        while True:
            time.sleep(1.0)
            if time.perf_counter() - state["start"] > seconds + 30:
                epochs.append(summary(True))
                print(json.dumps({"epoch_rows": size, "epochs": epochs, "hung": True}))
                sys.stdout.flush()
                os._exit(0)

    total = 0
    state["start"] = time.perf_counter()
    threading.Thread(target=watchdog, daemon=True).start()
    for _ in range(2):
        state.update(rows=0, first=0.0, first_rows=0, start=time.perf_counter())
        state["read"] = _read_bytes()
        state.update(cpu=time.process_time(), sys=_system_seconds())
        stopped = False
        rows = countdown = 0
        for item in iterator:
            total += _read(item)
            rows += len(item[0]) if batched else 1
            # The clock and the shared state every 64 rows read one by one (each batch
            # when batched): a dict update and a clock read a row were ~1 us of a
            # variable-shape row's few.
            countdown -= 1
            if countdown > 0:
                continue
            countdown = 1 if batched else 64
            state["rows"] = rows
            now = time.perf_counter()
            if not state["first"] and rows >= _FIRST:
                state["first"], state["first_rows"] = now - state["start"], rows
            if now - state["start"] > seconds:
                stopped = True
                break
        state["rows"] = rows
        epochs.append(summary(stopped))
        if stopped:
            break
    return {"epoch_rows": size, "epochs": epochs, "touched": total}


# -- groups --------------------------------------------------------------------------------


def device_of(directory: Path) -> str:
    """``major:minor`` of the disk holding ``directory`` (throttles apply to the disk)."""
    dev = os.stat(directory).st_dev
    node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if (node / "partition").exists():
        return (node.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


_serial = iter(range(1 << 30))


@contextmanager
def groups(
    device: str, throttle: tuple[int, int] | None, memory: int | None
) -> Iterator[list[Path]]:
    """Fresh cgroup v1 groups ``beyondram-<pid>-<n>`` (blkio with ``throttle`` on
    ``device``, memory of ``memory`` bytes; either may be absent): their directories,
    removed on the way out whatever happens (after their processes have gone)."""
    name = f"{_GROUP_PREFIX}-{os.getpid()}-{next(_serial)}"
    made: list[Path] = []
    try:
        if throttle is not None:
            group = _CGROUP_ROOT / "blkio" / name
            group.mkdir()
            made.append(group)
            iops, bps = throttle
            (group / "blkio.throttle.read_iops_device").write_text(f"{device} {iops}")
            (group / "blkio.throttle.read_bps_device").write_text(f"{device} {bps}")
        if memory is not None:
            group = _CGROUP_ROOT / "memory" / name
            group.mkdir()
            made.append(group)
            (group / "memory.limit_in_bytes").write_text(str(memory))
        yield made
    finally:
        for group in made:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def _in_groups(argv: list[str], made: list[Path]) -> list[str]:
    """``argv`` run by a shell that first moves itself into ``made``."""
    if not made:
        return argv
    moves = " && ".join(f"echo $$ > {g / 'cgroup.procs'}" for g in made)
    return ["sh", "-c", f'{moves} && exec "$@"', "sh", *argv]


def _memory_stats(made: list[Path]) -> dict[str, Any]:
    for group in made:
        if group.parent.name == "memory":
            return {
                "peak_mb": int((group / "memory.max_usage_in_bytes").read_text()) >> 20,
                "failcnt": int((group / "memory.failcnt").read_text()),
            }
    return {}


def _run_child(argv: list[str], made: list[Path], timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env.setdefault("GLOG_v", "3")
    drop_caches()
    try:
        proc = subprocess.run(
            _in_groups(argv, made),
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout:.0f} s", **_memory_stats(made)}
    out: dict[str, Any]
    if proc.returncode != 0:
        killed = proc.returncode in (-9, 137)
        out = {"error": ("OOM-killed: " if killed else "") + proc.stderr.strip()[-300:]}
    else:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(_memory_stats(made))
    return out


# -- the datasets ----------------------------------------------------------------------------


def _write(python: str, side: str, workload: str, rows: int, path: Path) -> str | None:
    """Write ``rows`` rows of ``workload`` with ``side``'s FileWriter; None or why not."""
    scale = rows / W.get(workload).full_rows
    module = (
        "bench_format import write_mrecord"
        if side == "mrecord"
        else ("mindspore_side import write_mindrecord as write_mrecord")
    )
    extra = ", True" if side == "mrecord" else ""
    code = (
        f"from benchmarks.{module}\n"
        f"from pathlib import Path\n"
        f"write_mrecord({workload!r}, {scale!r}, Path({str(path)!r}){extra})\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), GLOG_v="3")
    proc = subprocess.run(
        [python, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return proc.stderr.strip()[-300:]
    _done_mark(path).write_text(_mark_text(side))
    return None


def _mark_text(side: str) -> str:
    """What a finished write leaves in its mark: mrecord's says the format version, so
    data of an older version (without value tables, say) is written again. (Imported
    here: MindSpore's child process runs this module without mrecord's dependencies.)"""
    from mrecord.format.layout import FORMAT_MAJOR, FORMAT_MINOR

    return f"written {FORMAT_MAJOR}.{FORMAT_MINOR}\n" if side == "mrecord" else "written\n"


def _done_mark(path: Path) -> Path:
    return path.with_name(path.name + ".written")


def _written(path: Path, side: str) -> bool:
    """Whether ``path`` was written whole by an earlier run of this version (a write cut
    short, by a kill or a full disk, leaves no mark and is written again)."""
    mark = _done_mark(path)
    return path.exists() and mark.exists() and mark.read_text() == _mark_text(side)


def written_dataset(directory: Path, workload: str, quick: bool) -> tuple[Path, int]:
    """mrecord's dataset of ``workload`` under ``directory`` (written now unless a finished
    one is there) and its rows."""
    rows = (_QUICK_ROWS if quick else _FULL_ROWS)[workload]
    path = directory / f"{workload}{rows}.mrecord"
    if not _written(path, "mrecord"):
        print(f"writing {rows:,} {workload} rows with mrecord ...", flush=True)
        failed = _write(sys.executable, "mrecord", workload, rows, path)
        if failed:
            raise SystemExit(f"mrecord's writer failed: {failed}")
    return path, rows


def _mindspore_python(option: str | None) -> tuple[str | None, str]:
    from benchmarks.run import find_mindspore

    if option is None and not os.environ.get("MRECORD_BENCH_MINDSPORE_PYTHON"):
        default = Path("/work/venvs/mindspore/bin/python")
        option = str(default) if default.exists() else None
    return find_mindspore(option)


# -- the table -------------------------------------------------------------------------------


def _rate(run: dict[str, Any] | None, epoch: int, key: str) -> str:
    if run is None:
        return "-"
    if "error" in run:
        return "OOM-killed" if run["error"].startswith("OOM") else "error"
    if run.get("hung"):
        return "hung"  # nothing handed out for the epoch's time + 30 s
    epochs = run.get("epochs", [])
    if epoch >= len(epochs):
        return "-"
    value = epochs[epoch][key]
    cut = "*" if epochs[epoch]["stopped"] and key == "rows_s" else ""
    return f"{value:,.0f}{cut}"


def _share(run: dict[str, Any] | None, limit: float) -> str:
    if run is None or {"error", "hung"} & set(run) or not run.get("epochs") or not limit:
        return "-"
    return f"{run['epochs'][0]['rows_s'] / limit:.0%}"


def _disk(run: dict[str, Any]) -> str:
    epochs = run.get("epochs", [])
    return " / ".join(f"{e['disk_mb']:,.0f}" for e in epochs) or "-"


def _print_table(report: dict[str, Any]) -> None:
    print()
    print(
        "rows/s; first epoch = first 4,000 rows / the epoch (* = cut at the time limit), "
        "second epoch likewise; disk MB = what the reader had read from storage; "
        "'limit' = the device's random-read limit of the row size "
        "for GLOBAL/PARTIAL, its sequential limit for BLOCK/none, under the same throttle; "
        "'consumer alone' = the bench's consumer over rows held in memory (no reader can "
        "go faster on these cores; where it is the lower one, the run is at the cores' "
        "limit, not the device's); every value read; cold cache before each run"
    )
    head = (
        "| workload | device | memory | mode | mrecord 1st epoch | mrecord 2nd epoch "
        "| MindSpore 1st epoch | MindSpore 2nd epoch | limit | mrecord / limit "
        "| consumer alone | mrecord / lower of the two "
        "| mrecord / MindSpore | mrecord disk MB 1st / 2nd | mrecord peak MB / failcnt |"
    )
    print(head)
    print("| --- | --- | --- | --- |" + " ---: |" * 11)
    for run in report["runs"]:
        ours, theirs = run["mrecord"], run.get("mindspore")
        limits = run["limits"]
        key = "random_rows_s" if run["mode"] in _RANDOM_MODES else "sequential_rows_s"
        limit = float(limits.get(key, 0.0))
        consumer = float(run.get("consumer_rows_s", 0.0))
        versus = "-"
        if theirs and not {"error", "hung"} & (set(theirs) | set(ours)):
            mine, other = ours["epochs"][0]["rows_s"], theirs["epochs"][0]["rows_s"]
            other_rows = theirs["epochs"][0]["rows"]
            # a side that handed out almost nothing in the time has no meaningful rate
            if other_rows < 64:
                versus = f"- (MindSpore: {other_rows} rows)"
            else:
                versus = f"{mine / other:.2f}x"
        cells = [
            run["workload"],
            run["device"],
            run["memory"],
            run["mode"],
            f"{_rate(ours, 0, 'first4000_rows_s')} / {_rate(ours, 0, 'rows_s')}",
            f"{_rate(ours, 1, 'first4000_rows_s')} / {_rate(ours, 1, 'rows_s')}",
            f"{_rate(theirs, 0, 'first4000_rows_s')} / {_rate(theirs, 0, 'rows_s')}",
            f"{_rate(theirs, 1, 'first4000_rows_s')} / {_rate(theirs, 1, 'rows_s')}",
            f"{limit:,.0f}",
            _share(ours, limit),
            f"{consumer:,.0f}" if consumer else "-",
            _share(ours, min(limit, consumer) if consumer else limit),
            versus,
            _disk(ours),
            f"{ours.get('peak_mb', '-')} / {ours.get('failcnt', '-')}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")


# -- main ------------------------------------------------------------------------------------


def _situations(devices: list[str], fits: bool) -> list[tuple[str, bool]]:
    """(device, memory-capped) pairs: the local device also uncapped when ``fits``."""
    out = []
    for device in devices:
        if device == "local" and fits:
            out.append((device, False))
        out.append((device, True))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); print a table, write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, 4 s an epoch")
    parser.add_argument("--workloads", default="images,tabular,varshape")
    parser.add_argument(
        "--modes",
        default=None,
        help="default global,partial,block,none (--quick: global,block,none)",
    )
    parser.add_argument("--devices", default="local,cloud,hdd")
    parser.add_argument(
        "--fits",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also read without a memory group on the local device (default: not --quick)",
    )
    parser.add_argument("--seconds", type=float, default=None, help="cap per epoch")
    parser.add_argument(
        "--verify",
        default="once",
        choices=["once", "always", "never"],
        help="mrecord's checksum policy (default once, the library's default)",
    )
    parser.add_argument("--no-mindspore", action="store_true")
    parser.add_argument("--mindspore-python", default=None)
    parser.add_argument("--dir", type=Path, default=Path("bench_out/beyond_ram"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=["mrecord", "mindspore"], help=argparse.SUPPRESS)
    parser.add_argument("--limits", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--consumer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--row-bytes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    seconds = args.seconds or (4.0 if args.quick else 20.0)
    if args.limits:
        print(json.dumps(device_limits(Path(args.path), args.row_bytes, min(seconds, 3.0))))
        return 0
    if args.consumer:
        print(json.dumps(consumer_alone(args.path, args.batched, min(seconds, 3.0))))
        sys.stdout.flush()
        os._exit(0)
    if args.child:
        out = _child(args.child, args.path, args.mode, args.batched, seconds, args.verify)
        print(json.dumps(out))
        sys.stdout.flush()
        os._exit(0)  # no waiting on a pipeline's teardown: the numbers are out
    # A kill (SIGTERM) unwinds like an error: every group is removed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0 or not (_CGROUP_ROOT / "memory").is_dir():
        print("needs root and the cgroup v1 memory and blkio controllers under /sys/fs/cgroup")
        return 2
    workloads = args.workloads.split(",")
    modes = args.modes or ("global,block,none" if args.quick else "global,partial,block,none")
    modes = modes.split(",")
    fits = not args.quick if args.fits is None else args.fits
    devices = args.devices.split(",")
    for name in devices:
        if name not in DEVICES:
            parser.error(f"unknown device {name!r}; choose from {sorted(DEVICES)}")
    if any(DEVICES[d] for d in devices) and not (_CGROUP_ROOT / "blkio").is_dir():
        print("the throttled devices need the cgroup v1 blkio controller at /sys/fs/cgroup/blkio")
        return 2
    args.dir.mkdir(parents=True, exist_ok=True)
    device = device_of(args.dir)
    ms_python, ms_note = (
        (None, "--no-mindspore") if args.no_mindspore else _mindspore_python(args.mindspore_python)
    )
    print(ms_note, flush=True)
    report: dict[str, Any] = {
        "device": device,
        "seconds_per_epoch": seconds,
        "mindspore": ms_note,
        "verify": args.verify,
        "loadavg_at_start": os.getloadavg(),
        "workloads": {},
        "runs": [],
    }
    me = [sys.executable, "-m", "benchmarks.bench_beyond_ram", "--seconds", str(seconds)]
    me += ["--verify", args.verify]
    timeout = 4 * seconds + 120
    for workload in workloads:
        ours, rows = written_dataset(args.dir, workload, args.quick)
        theirs = args.dir / f"{workload}{rows}.mindrecord"
        side_python = ms_python
        if side_python is not None and not _written(theirs, "mindspore"):
            print(f"writing {rows:,} {workload} rows with MindSpore (minutes) ...", flush=True)
            failed = _write(side_python, "mindspore", workload, rows, theirs)
            if failed:
                print(f"MindSpore's writer failed: {failed}")
                side_python = None
        size = ours.stat().st_size
        row_bytes = size // rows
        memory = max(_MIN_GROUP, size // 3)
        report["workloads"][workload] = {"rows": rows, "mb": size >> 20, "group_mb": memory >> 20}
        print(
            f"{workload}: {rows:,} rows, {size >> 20} MB, ~{row_bytes:,} B a row; "
            f"memory group {memory >> 20} MB",
            flush=True,
        )
        alone_argv = [*me, "--consumer", "--path", str(ours)]
        alone_argv += ["--batched"] if workload in _BATCHED else []
        with groups(device, None, None) as made:
            alone = _run_child(alone_argv, made, timeout)
        consumer_rate = float(alone.get("consumer_rows_s", 0.0))
        report["workloads"][workload]["consumer_rows_s"] = consumer_rate
        print(f"the consumer alone (rows held in memory): {consumer_rate:,.0f} rows/s", flush=True)
        for device_name, capped in _situations(devices, fits):
            throttle = DEVICES[device_name]
            limit_argv = [*me, "--limits", "--path", str(ours), "--row-bytes", str(row_bytes)]
            with groups(device, throttle, None) as made:
                limits = _run_child(limit_argv, made, timeout)
            for mode in modes:
                began = time.perf_counter()
                run: dict[str, Any] = {
                    "workload": workload,
                    "device": device_name,
                    "memory": f"{memory >> 20} MB" if capped else "fits",
                    "mode": mode,
                    "limits": limits,
                    "consumer_rows_s": consumer_rate,
                }
                batched = ["--batched"] if workload in _BATCHED else []
                child = [*me, "--child", "mrecord", "--path", str(ours), "--mode", mode]
                with groups(device, throttle, memory if capped else None) as made:
                    run["mrecord"] = _run_child(child + batched, made, timeout)
                if side_python is not None and mode != "block":
                    child = [side_python, *me[1:], "--child", "mindspore", "--path", str(theirs)]
                    child += ["--mode", mode, *batched]
                    with groups(device, throttle, memory if capped else None) as made:
                        run["mindspore"] = _run_child(child, made, timeout)
                run["wall_s"] = round(time.perf_counter() - began, 1)
                report["runs"].append(run)
                print(json.dumps(run), flush=True)
    report["loadavg_at_end"] = os.getloadavg()
    _print_table(report)
    print(f"load average at start {report['loadavg_at_start']}, at end {report['loadavg_at_end']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
