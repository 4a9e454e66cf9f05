"""Benchmark ``mrecord serve`` beyond its memory: a ``RemoteDataset`` in each order.

Run (root, cgroup v1): ``python -m benchmarks.bench_serve_beyond_ram [--workloads
tabular,varshape] [--modes global,none] [--devices cloud] [--transports http,local]
[--seconds 30]``.

The server (``mrecord serve``, its own process) runs in a memory group of a third of the
dataset (as ``bench_beyond_ram``'s readers) and, per device, a blkio throttle; the page
cache is dropped before it starts. The reader, a ``RemoteDataset`` in another process
outside the groups (a trainer on another host has its own memory), reads one epoch
(``--seconds`` at most) through ``batch(256)`` for tabular rows and row by row for
variable-shape ones, every value read. Each random order is read twice: with the
client's sweep (``serve/client/sweep.py``: a window of the order asked for in ascending
order) and without it (rows asked for as the order comes, as before 2026-11-28), so the
two stand side by side in one run. Printed: seconds to the first batch, rows/s of the
first 4,000 rows and of the epoch, the epoch against the device's sequential limit (the
throttle's rows/s, measured in the same run as ``bench_beyond_ram``), and the server
group's peak memory and how often it hit its limit.

The datasets are ``bench_beyond_ram``'s (``bench_out/beyond_ram``, written on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_beyond_ram import (
    _CGROUP_ROOT,
    _RANDOM_MODES,
    DEVICES,
    REPO,
    _in_groups,
    _memory_stats,
    _read,
    _run_child,
    device_of,
    drop_caches,
    groups,
    written_dataset,
)

_FIRST = 4000
_BATCHED = {"tabular"}
_MIN_GROUP = 200 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(path: Path, made: list[Path]) -> tuple[subprocess.Popen[bytes], int]:
    """``mrecord serve`` of ``path`` in the groups ``made``, the page cache dropped first;
    its process and port once it answers."""
    port = _free_port()
    drop_caches()
    argv = [sys.executable, "-m", "mrecord.cli", "serve", f"d={path}", "--port", str(port)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    proc = subprocess.Popen(
        _in_groups(argv, made), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("mrecord serve did not start") from None
            time.sleep(0.1)


def _stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _child(
    url: str,
    mode: str,
    transport: str,
    sweep: bool,
    batched: bool,
    seconds: float,
    min_windows: int | None = None,
) -> dict[str, Any]:
    """One epoch (``seconds`` at most) from the server at ``url``; timings as JSON."""
    import mrecord.serve.client.dataset as client
    from mrecord import Shuffle

    if not sweep:  # the rows asked for as the order comes, as before the sweep answer
        client.RemoteDataset._sweep_rows = lambda self, rows: 0  # type: ignore[method-assign]
    if min_windows is not None:
        client._MIN_SWEEP_WINDOWS = min_windows
    orders: dict[str, Any] = {
        "global": Shuffle.GLOBAL, "partial": Shuffle.PARTIAL, "block": Shuffle.BLOCK,
        "none": False,
    }
    ds = client.RemoteDataset(url, "d", shuffle=orders[mode], transport=transport)
    size = ds.get_dataset_size()
    pipeline = ds.batch(256) if batched else ds
    state = {"rows": 0, "first_batch": 0.0, "first": 0.0}
    start = time.perf_counter()

    def summary(stopped: bool) -> dict[str, Any]:
        elapsed = time.perf_counter() - start
        rows, first = int(state["rows"]), state["first"]
        return {
            "epoch_rows": size,
            "rows": rows,
            "first_batch_s": state["first_batch"],
            "first4000_rows_s": rows and (_FIRST if first else rows) / (first or elapsed),
            "rows_s": rows / elapsed,
            "stopped": stopped,
            "cpu_s": time.process_time(),
        }

    def watchdog() -> None:  # a reader that hangs still reports what it read
        while time.perf_counter() - start < seconds + 60:
            time.sleep(1.0)
        print(json.dumps({**summary(True), "hung": True}))
        sys.stdout.flush()
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    stopped = False
    for item in pipeline.create_tuple_iterator(num_epochs=1, output_numpy=True):
        _read(item)
        state["rows"] += len(item[0]) if batched else 1
        now = time.perf_counter() - start
        state["first_batch"] = state["first_batch"] or now
        if not state["first"] and state["rows"] >= _FIRST:
            state["first"] = now
        if now > seconds:
            stopped = True
            break
    return summary(stopped)


def _situation_runs(
    args: argparse.Namespace, workload: str, path: Path, memory: int, device: str, throttle: Any
) -> list[dict[str, Any]]:
    """Every mode x transport (x sweep or not, for random orders) against a fresh server
    in fresh groups, each from a cold page cache."""
    me = [sys.executable, "-m", "benchmarks.bench_serve_beyond_ram"]
    runs = []
    batched = workload in _BATCHED
    for mode in args.modes.split(","):
        for transport in args.transports.split(","):
            sweeps = (True, False) if mode in _RANDOM_MODES and args.unswept else (True,)
            for sweep in sweeps:
                with groups(device, throttle, memory) as made:
                    proc, port = _start_server(path, made)
                    try:
                        argv = [*me, "--child", "--url", f"http://127.0.0.1:{port}"]
                        argv += ["--mode", mode, "--transport", transport]
                        argv += ["--seconds", str(args.seconds)]
                        argv += [] if sweep else ["--no-sweep"]
                        if args.min_windows is not None:
                            argv += ["--min-windows", str(args.min_windows)]
                        argv += ["--batched"] if batched else []
                        out = subprocess.run(
                            argv, cwd=REPO, capture_output=True, text=True,
                            timeout=args.seconds + 120, check=False,
                        )
                        run: dict[str, Any]
                        try:
                            run = json.loads(out.stdout.strip().splitlines()[-1])
                        except (IndexError, json.JSONDecodeError):
                            run = {"error": out.stderr.strip()[-300:]}
                    finally:
                        _stop_server(proc)
                    run.update(_memory_stats(made))
                run.update(workload=workload, mode=mode, transport=transport, sweep=sweep)
                print(json.dumps(run), flush=True)
                runs.append(run)
    return runs


def _print_table(device_name: str, limit: dict[str, float], runs: list[dict[str, Any]]) -> None:
    seq = limit.get("sequential_rows_s", 0.0)
    print(f"\n{device_name}: sequential limit {seq:,.0f} rows/s "
          f"({limit.get('sequential_mb_s', 0.0):,.0f} MB/s)")
    print("| workload | mode | transport | sweep | first batch | first 4,000 rows/s | epoch rows/s "
          "| of sequential | server group peak / failcnt |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in runs:
        if "error" in r:
            print(f"| {r['workload']} | {r['mode']} | {r['transport']} | {r['sweep']} | "
                  f"error: {r['error'][:80]} | | | | |")
            continue
        share = f"{r['rows_s'] / seq:.0%}" if seq else "-"
        print(
            f"| {r['workload']} | {r['mode']} | {r['transport']} | "
            f"{'yes' if r['sweep'] else 'no'} | {r['first_batch_s']:.2f} s | "
            f"{r['first4000_rows_s']:,.0f} | {r['rows_s']:,.0f}"
            f"{' (stopped)' if r['stopped'] else ''} | {share} | "
            f"{r.get('peak_mb', '-')} MB / {r.get('failcnt', '-')} |"
        )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); print tables, write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workloads", default="tabular,varshape")
    parser.add_argument("--modes", default="global,none", help="global,partial,block,none")
    parser.add_argument("--devices", default="cloud", help="local,cloud,hdd")
    parser.add_argument("--transports", default="http,local")
    parser.add_argument("--seconds", type=float, default=30.0, help="cap per epoch")
    parser.add_argument("--quick", action="store_true", help="smaller data")
    parser.add_argument(
        "--min-windows", type=int, default=None,
        help="windows an epoch is swept in at least (RemoteDataset's default: 2)",
    )
    parser.add_argument("--dir", type=Path, default=Path("bench_out/beyond_ram"))
    parser.add_argument(
        "--unswept", action=argparse.BooleanOptionalAction, default=True,
        help="also read each random order without the sweep (as before 2026-11-28)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--transport", help=argparse.SUPPRESS)
    parser.add_argument("--no-sweep", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        out = _child(
            args.url, args.mode, args.transport, not args.no_sweep, args.batched, args.seconds,
            args.min_windows,
        )
        print(json.dumps(out))
        sys.stdout.flush()
        os._exit(0)  # no waiting on a pipeline's teardown: the numbers are out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # groups removed on the way out
    if os.geteuid() != 0 or not (_CGROUP_ROOT / "memory").is_dir():
        print("needs root and the cgroup v1 memory and blkio controllers under /sys/fs/cgroup")
        return 2
    args.dir.mkdir(parents=True, exist_ok=True)
    device = device_of(args.dir)
    report: dict[str, Any] = {"loadavg_at_start": os.getloadavg(), "situations": []}
    for workload in args.workloads.split(","):
        path, rows = written_dataset(args.dir, workload, args.quick)
        size = path.stat().st_size
        memory = max(_MIN_GROUP, size // 3)
        print(f"{workload}: {rows:,} rows, {size >> 20} MB; server group {memory >> 20} MB")
        for device_name in args.devices.split(","):
            throttle = DEVICES[device_name]
            limit_argv = [sys.executable, "-m", "benchmarks.bench_beyond_ram", "--limits"]
            limit_argv += ["--path", str(path), "--row-bytes", str(size // rows)]
            with groups(device, throttle, None) as made:
                limit = _run_child(limit_argv, made, 120)
            runs = _situation_runs(args, workload, path, memory, device, throttle)
            report["situations"].append(
                {"workload": workload, "device": device_name, "limit": limit, "runs": runs}
            )
            _print_table(f"{workload} on {device_name}", limit, runs)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
