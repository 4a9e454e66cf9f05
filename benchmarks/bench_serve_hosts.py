"""``mrecord serve`` across hosts, on the emulated cluster (issue 28): MB/s as a fraction
of the link.

Run as root: ``python -m benchmarks.bench_serve_hosts [--scale 0.25] [--seconds 5]
[--rates 1gbit,10gbit] [--clients 3] [--workload images|tabular] [--server-memory-mb N]
[--hints on,off]``.

``--workload tabular`` reads the ``vector`` column (float32[16]) of the ``tabular``
workload instead of the images' ``data``. ``--server-memory-mb N`` puts the server in a
memory cgroup (v1, ``hosts-bench-<pid>``, removed afterwards) of N MB after dropping the
page cache: its reads are charged there, so a dataset larger than N is read beyond RAM
(the server's read-ahead, fed by the clients' hints, is what keeps up). ``--hints on,off``
measures each client count with and without those hints (``RemoteDataset(read_ahead_hints=
False)``; default: ``on`` only).

For each link rate (``tc tbf`` on both ends of every veth, :mod:`harness.netns`), one
server host and ``--clients`` client hosts:

1. raw TCP: a Python socket sender in the server host, one receiver (then all clients
   at once) in client hosts, ``--seconds`` each: what the link carries for Python;
2. ``mrecord serve`` (token, HTTP, no TLS) of the ``images`` workload (90-110 KB
   incompressible blobs; warm: the files are in the page cache after the first pass);
   ``RemoteDataset(transport="http")`` reading the ``data`` column, GLOBAL shuffle, in
   one client host, then in every client host at once (MB/s of values delivered, timed
   from the iterator's creation: ramp-up included), and p50 / p99 of one 256-row
   ``read_rows`` request.

3. local reading: ``MindDataset`` of the same files in a fresh process on this machine
   (no network), the same column, GLOBAL shuffle and loop, ``--seconds``, from the same
   cache state as the remote runs (dropped first under ``--server-memory-mb``).

Printed: MB/s, the fraction of raw TCP in the same run, of the nominal link, and of
local reading (``n`` clients against ``n`` local readers' worth), and the fraction of
issue 28's target for rows, "what the link allows or local reading, whichever is lower"
(``of target``: RemoteDataset against the lower of raw TCP and local). The numbers
depend on the CPU left over: say whether the machine was shared when you quote them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import workloads as W
from harness.netns import Cluster, cluster, rate_bytes_per_s
from harness.serve_cluster import PORT, TOKEN, finish_reader, start_reader, start_server

_SENDER = """
import socket, sys, threading
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
payload = bytes(1 << 20)
def send(conn):
    try:
        while True:
            conn.sendall(payload)
    except OSError:
        pass
while True:
    conn, _ = srv.accept()
    threading.Thread(target=send, args=(conn,), daemon=True).start()
"""

_RECEIVER = """
import json, socket, sys, time
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
buf = bytearray(1 << 20)
view = memoryview(buf)
end = time.perf_counter() + float(sys.argv[3])
got, start = 0, None
while True:
    n = sock.recv_into(view)
    if not n:
        break
    now = time.perf_counter()
    if start is None:
        start = now
    got += n
    if now > end:
        break
print(json.dumps({"mb_s": got / (now - start) / 1e6}))
"""


COLUMNS = {"images": "data", "tabular": "vector"}
"""The column each workload's readers read."""
_CGROUP = Path("/sys/fs/cgroup/memory")


def _write(workload: str, scale: float, folder: Path) -> Path:
    from mrecord import FileWriter

    w = W.get(workload)
    path = folder / f"{workload}.mrecord"
    with FileWriter(str(path), shard_num=1, overwrite=True) as writer:
        writer.add_schema(w.schema, workload)
        for chunk in w.chunks(scale):
            writer.write_raw_data(chunk)
    return path


def _raw_tcp(c: Cluster, clients: int, seconds: float) -> list[float]:
    """MB/s each of ``clients`` receivers gets from the sender (started by the caller)."""
    port = PORT + 1
    procs = [
        c.popen(
            host,
            [sys.executable, "-c", _RECEIVER, c.server.ip, str(port), str(seconds)],
            stdout=subprocess.PIPE,
        )
        for host in c.clients[:clients]
    ]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=seconds + 120)
        out.append(float(json.loads(stdout.decode().strip().splitlines()[-1])["mb_s"]))
    return out


def _remote(
    c: Cluster, clients: int, seconds: float, workload: str, hints: bool = True
) -> list[dict[str, Any]]:
    spec = {
        "hints": hints,
        "urls": [f"http://{c.server.ip}:{PORT}"],
        "dataset": workload,
        "token": TOKEN,
        "workers": 4,
        "bench": {"column": COLUMNS[workload], "seconds": seconds, "latency_blocks": 30},
    }
    procs = [start_reader(c, host, spec) for host in c.clients[:clients]]
    results = [finish_reader(p, timeout=seconds + 300) for p in procs]
    for r in results:
        if "error" in r:
            raise RuntimeError(f"reader failed: {r['error']}\n{r['stderr']}")
    return [r["bench"] for r in results]


@contextlib.contextmanager
def _memory_cgroup(megabytes: int | None) -> Iterator[Path | None]:
    """A v1 memory cgroup of ``megabytes`` (page cache dropped first) for the server to
    start in (it sizes its memory use from the limit it starts under); removed afterwards,
    whatever happens, once its processes are gone. None when ``megabytes`` is None."""
    if megabytes is None:
        yield None
        return
    group = _CGROUP / f"hosts-bench-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(megabytes << 20))
        Path("/proc/sys/vm/drop_caches").write_text("1")
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # back to the root group, so rmdir can work
                (_CGROUP / "cgroup.procs").write_text(pid)
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def bench_rate(
    rate: str,
    data: Path,
    clients: int,
    seconds: float,
    workload: str = "images",
    server_memory_mb: int | None = None,
    hints: tuple[bool, ...] = (True,),
) -> list[dict[str, Any]]:
    rows = []
    link = rate_bytes_per_s(rate) / 1e6
    with cluster(clients=clients, rate=rate) as c, _memory_cgroup(server_memory_mb) as group:
        start_server(c, c.server, {workload: data}, extra=["--workers", "4"], cgroup=group)
        c.popen(c.server, [sys.executable, "-c", _SENDER, c.server.ip, str(PORT + 1)])
        rows += _measure(
            c, rate, link, clients, seconds, workload, server_memory_mb, hints, data
        )
    return rows


_LOCAL = """
import json, sys
from harness.remote_reader import drain
from mrecord import MindDataset, Shuffle
path, column, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
ds = MindDataset(path, columns_list=[column], shuffle=Shuffle.GLOBAL)
nbytes, _rows, elapsed = drain(ds, column, seconds)
print(json.dumps({"mb_s": nbytes / elapsed / 1e6}))
"""


def _local(data: Path, workload: str, seconds: float, cold: bool) -> float:
    """MB/s of one local reader of ``data`` with the remote readers' loop (see the module
    docstring, step 3)."""
    if cold:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1")
    out = subprocess.run(
        [sys.executable, "-c", _LOCAL, str(data), COLUMNS[workload], str(seconds)],
        capture_output=True, text=True, check=True, timeout=seconds + 300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])["mb_s"])


def _measure(
    c: Cluster,
    rate: str,
    link: float,
    clients: int,
    seconds: float,
    workload: str,
    server_memory_mb: int | None,
    hints: tuple[bool, ...],
    data: Path,
) -> list[dict[str, Any]]:
    rows = []
    if server_memory_mb is None:
        _remote(c, 1, 2.0, workload)  # warm the page cache and the server (and the sender)
    else:
        # Warm the server's processes (imports, opened dataset, memory probe), not its
        # cache (dropped before each run below): without this the first run of a set
        # carried the server's start whatever its hints (197 MB/s with hints off, then
        # 464-660 with or without them, at 10 Gbit/s), and read as "hints cost".
        _remote(c, 1, 1.0, workload, False)
    for n, hinted in [(n, h) for n in sorted({1, clients}) for h in hints]:
        if server_memory_mb is not None:  # each run from a cold server cache
            Path("/proc/sys/vm/drop_caches").write_text("1")
        raw = sum(_raw_tcp(c, n, seconds))
        got = _remote(c, n, seconds, workload, hinted)
        mb_s = sum(g["mb_s"] for g in got)
        local = n * _local(data, workload, seconds, cold=server_memory_mb is not None)
        row = {
            "workload": workload,
            "server_memory_mb": server_memory_mb,
            "hints": hinted,
            "rate": rate,
            "clients": n,
            "link_MB_s": link,
            "raw_tcp_MB_s": round(raw, 1),
            "remote_MB_s": round(mb_s, 1),
            "of_raw": round(mb_s / raw, 3),
            "of_link": round(mb_s / link, 3),
            "local_MB_s": round(local, 1),
            "of_local": round(mb_s / local, 3),
            "of_target": round(mb_s / min(raw, local), 3),
            "p50_ms_256": round(max(g["p50_ms"] for g in got), 1),
            "p99_ms_256": round(max(g["p99_ms"] for g in got), 1),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print one JSON line per (rate, clients) and a table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.25)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rates", default="1gbit,10gbit")
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--workload", choices=sorted(COLUMNS), default="images")
    p.add_argument("--server-memory-mb", type=int, default=None)
    p.add_argument("--hints", default="on", help="on, off or on,off: the clients' read-ahead hints")
    args = p.parse_args(argv)
    hints = tuple(h.strip() == "on" for h in args.hints.split(","))
    rows = []
    with tempfile.TemporaryDirectory(prefix="mrh-bench-") as tmp:
        data = _write(args.workload, args.scale, Path(tmp))
        for rate in args.rates.split(","):
            rows += bench_rate(
                rate, data, args.clients, args.seconds, args.workload, args.server_memory_mb,
                hints,
            )
    print()
    print("| link | clients | hints | raw TCP MB/s | RemoteDataset MB/s | of raw TCP | of link |"
          " local MB/s | of local | of target | p50 / p99 ms (256 rows) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['rate']} ({r['link_MB_s']:.0f} MB/s) | {r['clients']} | "
            f"{'on' if r['hints'] else 'off'} | "
            f"{r['raw_tcp_MB_s']:.0f} | {r['remote_MB_s']:.0f} | {r['of_raw']:.0%} | "
            f"{r['of_link']:.0%} | {r['local_MB_s']:.0f} | {r['of_local']:.0%} | "
            f"{r['of_target']:.0%} | {r['p50_ms_256']:.0f} / {r['p99_ms_256']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
