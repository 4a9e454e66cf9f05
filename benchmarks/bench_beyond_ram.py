"""Reading from a cold disk, and a dataset larger than the reader's memory (issue 23).

Usage (as root: it drops the page cache and makes memory cgroups)::

    python -m benchmarks.bench_beyond_ram [--quick] [--rows N] [--modes global,partial,none]
        [--no-mindspore] [--mindspore-python PATH] [--json FILE]

One run, side by side:

- the device's limits, measured here and now: random reads of the row size at queue
  depth 32 (32 threads of ``pread``) and a sequential read, each from a cold cache;
- ``MindDataset`` of mrecord and of MindSpore (in its own interpreter; "not installed"
  when there is none) over the images workload (100 KB rows), per shuffle mode, in two
  situations: cold page cache, data fits in memory; and cold, the reader in a cgroup v1
  memory group of a third of the dataset's size;
- per run: rows/s over the first 4,000 rows and over the whole first epoch, the group's
  peak memory and ``memory.failcnt`` (how often it hit its limit).

Before each step ``sync; echo 1 > /proc/sys/vm/drop_caches``. Every consumer reads one
byte per 4 KiB page of each value (a view nobody reads measures nothing). The reader runs
in a child process (``--child``), which the MindSpore interpreter can run too: it imports
only numpy and the library it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["device_limits", "main"]

REPO = Path(__file__).resolve().parent.parent
_CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
_FIRST = 4000
_ROW = 100_000
_QUEUE_DEPTH = 32


def drop_caches() -> None:
    """Write back and drop the page cache (root only)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def device_limits(path: Path, row_bytes: int = _ROW, reads: int = 6000) -> dict[str, float]:
    """Random ``row_bytes`` reads at queue depth 32 (threads of ``pread``) and one
    sequential read of ``path``, each from a cold page cache: rows/s and MB/s."""
    size = path.stat().st_size
    drop_caches()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no kernel read-around
        offsets = np.random.default_rng(0).integers(0, max(1, size - row_bytes), reads)
        todo = iter((offsets - offsets % 4096).tolist())
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    offset = next(todo, None)
                if offset is None:
                    return
                os.pread(fd, row_bytes, offset)

        start = time.perf_counter()
        threads = [threading.Thread(target=work) for _ in range(_QUEUE_DEPTH)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        random_s = time.perf_counter() - start
        drop_caches()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        start, done = time.perf_counter(), 0
        while chunk := os.pread(fd, 8 << 20, done):
            done += len(chunk)
        seq_s = time.perf_counter() - start
    finally:
        os.close(fd)
    return {
        "random_rows_s": reads / random_s,
        "random_mb_s": reads * row_bytes / random_s / 1e6,
        "sequential_mb_s": done / seq_s / 1e6,
        "sequential_rows_s": done / seq_s / row_bytes,
    }


# -- the reader, in a child process ------------------------------------------------------


def _child(side: str, path: str, mode: str, rows: int) -> dict[str, Any]:
    """Read the first epoch (or ``rows`` rows) of ``path`` and time it."""
    if side == "mrecord":
        from mrecord import MindDataset, Shuffle

        shuffle: Any = {"global": Shuffle.GLOBAL, "partial": Shuffle.PARTIAL, "none": False}
        ds = MindDataset(path, columns_list=["data", "label"], shuffle=shuffle[mode])
    else:
        import mindspore.dataset as msds

        shuffle = {
            "global": msds.Shuffle.GLOBAL,
            "partial": msds.Shuffle.PARTIAL,
            "none": False,
        }
        ds = msds.MindDataset(path, columns_list=["data", "label"], shuffle=shuffle[mode])
    start = time.perf_counter()
    first = 0.0
    n = total = 0
    for data, _label in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
        if isinstance(data, (bytes, np.bytes_)):  # MindSpore's bytes values
            data = np.frombuffer(data, dtype=np.uint8)
        total += int(np.asarray(data).view(np.uint8).reshape(-1)[::4096].sum())  # read it
        n += 1
        if n == _FIRST:
            first = time.perf_counter() - start
        if rows and n >= rows:
            break
    elapsed = time.perf_counter() - start
    return {
        "rows": n,
        "first4000_rows_s": _FIRST / first if first else None,
        "epoch_rows_s": n / elapsed,
        "checksum_of_touched_bytes": total,
    }


def _run_reader(
    python: str, side: str, path: Path, mode: str, limit: int | None, rows: int
) -> dict[str, Any]:
    """Run the reader in a child, in a fresh memory group of ``limit`` bytes (None: no
    group), after dropping the page cache; its numbers, peak memory and failcnt."""
    group = _CGROUP_ROOT / f"mrecord-bench-{os.getpid()}" if limit else None
    argv = [python, "-m", "benchmarks.bench_beyond_ram", "--child", side, "--path", str(path)]
    argv += ["--mode", mode, "--rows", str(rows)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env.setdefault("GLOG_v", "3")
    try:
        if group is not None:
            group.mkdir()
            (group / "memory.limit_in_bytes").write_text(str(limit))
            procs = str(group / "cgroup.procs")
            argv = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]
        drop_caches()
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        out: dict[str, Any]
        if proc.returncode != 0:
            killed = proc.returncode in (-9, 137)
            out = {"error": ("OOM-killed: " if killed else "") + proc.stderr.strip()[-300:]}
        else:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
        if group is not None:
            out["peak_mb"] = int((group / "memory.max_usage_in_bytes").read_text()) >> 20
            out["failcnt"] = int((group / "memory.failcnt").read_text())
        return out
    finally:
        if group is not None and group.exists():
            group.rmdir()


# -- the datasets ------------------------------------------------------------------------


def _images(rows: int) -> Any:
    rng = np.random.default_rng(23)
    for start in range(0, rows, 500):
        n = min(500, rows - start)
        sizes = rng.integers(90_000, 110_001, size=n)
        yield [
            {"data": rng.bytes(int(size)), "label": start + i} for i, size in enumerate(sizes)
        ]


_SCHEMA = {"data": {"type": "bytes"}, "label": {"type": "int32"}}


def _write_mrecord(path: Path, rows: int) -> None:
    from mrecord import FileWriter

    writer = FileWriter(str(path), shard_num=1, overwrite=True)
    writer.add_schema(_SCHEMA)
    for batch in _images(rows):
        writer.write_raw_data(batch)
    writer.commit()


def _write_mindrecord(python: str, path: Path, rows: int) -> str | None:
    """Write the same rows with MindSpore's FileWriter; None, or why it failed."""
    code = (
        "import sys; from benchmarks.bench_beyond_ram import _images, _SCHEMA\n"
        "from mindspore.mindrecord import FileWriter\n"
        f"w = FileWriter({str(path)!r}, shard_num=1, overwrite=True)\n"
        "w.add_schema(_SCHEMA, 'images')\n"
        f"for b in _images({rows}): w.write_raw_data(b)\n"
        "w.commit()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), GLOG_v="3")
    proc = subprocess.run(
        [python, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    return None if proc.returncode == 0 else proc.stderr.strip()[-300:]


def _mindspore_python(option: str | None) -> tuple[str | None, str]:
    from benchmarks.run import find_mindspore

    if option is None and not os.environ.get("MRECORD_BENCH_MINDSPORE_PYTHON"):
        default = Path("/work/venvs/mindspore/bin/python")
        option = str(default) if default.exists() else None
    return find_mindspore(option)


def _rate(run: dict[str, Any], key: str) -> str:
    value = run.get(key)
    if "error" in run:
        return "error"
    return "-" if value is None else f"{value:,.0f}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); print a table, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6,000 rows (600 MB)")
    parser.add_argument("--rows", type=int, default=None, help="rows (default 24,000: 2.4 GB)")
    parser.add_argument("--modes", default="global,partial,none")
    parser.add_argument("--no-mindspore", action="store_true")
    parser.add_argument("--mindspore-python", default=None)
    parser.add_argument("--dir", type=Path, default=Path("bench_out/beyond_ram"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=["mrecord", "mindspore"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.path, args.mode, args.rows or 0)))
        return 0
    if os.geteuid() != 0 or not _CGROUP_ROOT.is_dir():
        print("needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory")
        return 2
    rows = args.rows or (6000 if args.quick else 24000)
    modes = args.modes.split(",")
    args.dir.mkdir(parents=True, exist_ok=True)
    ours = args.dir / f"images{rows}.mrecord"
    if not ours.exists():
        print(f"writing {rows} image rows with mrecord ...", flush=True)
        _write_mrecord(ours, rows)
    ms_python, ms_note = (None, "--no-mindspore") if args.no_mindspore else _mindspore_python(
        args.mindspore_python
    )
    print(ms_note, flush=True)
    theirs = args.dir / f"images{rows}.mindrecord"
    if ms_python is not None and not theirs.exists():
        print(f"writing {rows} image rows with MindSpore ...", flush=True)
        failed = _write_mindrecord(ms_python, theirs, rows)
        if failed:
            print(f"MindSpore's writer failed: {failed}")
            ms_python = None
    size = ours.stat().st_size
    limits = device_limits(ours)
    report: dict[str, Any] = {
        "rows": rows,
        "dataset_mb": size >> 20,
        "limits": limits,
        "mindspore": ms_note,
        "loadavg_1min_at_start": os.getloadavg()[0],
        "runs": [],
    }
    print(
        f"device: random {_ROW:,} B at depth {_QUEUE_DEPTH}: {limits['random_rows_s']:,.0f} rows/s "
        f"({limits['random_mb_s']:,.0f} MB/s); sequential {limits['sequential_mb_s']:,.0f} MB/s",
        flush=True,
    )
    situations = [("cold, fits in memory", None), ("cold, cgroup of 1/3", size // 3)]
    for situation, limit in situations:
        for mode in modes:
            run: dict[str, Any] = {"situation": situation, "mode": mode}
            run["mrecord"] = _run_reader(sys.executable, "mrecord", ours, mode, limit, 0)
            if ms_python is not None:
                run["mindspore"] = _run_reader(ms_python, "mindspore", theirs, mode, limit, 0)
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
    print()
    print(f"images, {rows:,} rows of ~100 KB ({size >> 20} MB), first epoch, every value read")
    header = "| situation | mode | mrecord first 4,000 | mrecord epoch | MindSpore first 4,000 "
    print(header + "| MindSpore epoch | device random limit | mrecord peak MB / failcnt |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run in report["runs"]:
        ours_run, theirs_run = run["mrecord"], run.get("mindspore", {})
        ms = ["not installed"] * 2 if ms_python is None else [
            _rate(theirs_run, "first4000_rows_s"),
            _rate(theirs_run, "epoch_rows_s"),
        ]
        memory = f"{ours_run.get('peak_mb', '-')} / {ours_run.get('failcnt', '-')}"
        print(
            f"| {run['situation']} | {run['mode']} | {_rate(ours_run, 'first4000_rows_s')} "
            f"| {_rate(ours_run, 'epoch_rows_s')} | {ms[0]} | {ms[1]} "
            f"| {limits['random_rows_s']:,.0f} | {memory} |"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
