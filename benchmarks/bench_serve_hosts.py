"""``mrecord serve`` across hosts, on the emulated cluster (issue 28): MB/s as a fraction
of the link.

Run as root: ``python -m benchmarks.bench_serve_hosts [--scale 0.25] [--seconds 5]
[--rates 1gbit,10gbit] [--clients 3]``.

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

Printed: MB/s, the fraction of raw TCP in the same run, and of the nominal link. The
numbers depend on the CPU left over: say whether the machine was shared when you quote
them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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


def _write_images(scale: float, folder: Path) -> Path:
    from mrecord import FileWriter

    w = W.get("images")
    path = folder / "images.mrecord"
    with FileWriter(str(path), shard_num=1, overwrite=True) as writer:
        writer.add_schema(w.schema, "images")
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


def _remote(c: Cluster, clients: int, seconds: float) -> list[dict[str, Any]]:
    spec = {
        "urls": [f"http://{c.server.ip}:{PORT}"],
        "dataset": "images",
        "token": TOKEN,
        "workers": 4,
        "bench": {"column": "data", "seconds": seconds, "latency_blocks": 30},
    }
    procs = [start_reader(c, host, spec) for host in c.clients[:clients]]
    results = [finish_reader(p, timeout=seconds + 300) for p in procs]
    for r in results:
        if "error" in r:
            raise RuntimeError(f"reader failed: {r['error']}\n{r['stderr']}")
    return [r["bench"] for r in results]


def bench_rate(rate: str, data: Path, clients: int, seconds: float) -> list[dict[str, Any]]:
    rows = []
    link = rate_bytes_per_s(rate) / 1e6
    with cluster(clients=clients, rate=rate) as c:
        start_server(c, c.server, {"images": data}, extra=["--workers", "4"])
        c.popen(c.server, [sys.executable, "-c", _SENDER, c.server.ip, str(PORT + 1)])
        _remote(c, 1, 2.0)  # warm the page cache and the server (and the sender starts)
        for n in sorted({1, clients}):
            raw = sum(_raw_tcp(c, n, seconds))
            got = _remote(c, n, seconds)
            mb_s = sum(g["mb_s"] for g in got)
            row = {
                "rate": rate,
                "clients": n,
                "link_MB_s": link,
                "raw_tcp_MB_s": round(raw, 1),
                "remote_MB_s": round(mb_s, 1),
                "of_raw": round(mb_s / raw, 3),
                "of_link": round(mb_s / link, 3),
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
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mrh-bench-") as tmp:
        data = _write_images(args.scale, Path(tmp))
        for rate in args.rates.split(","):
            rows += bench_rate(rate, data, args.clients, args.seconds)
    print()
    print("| link | clients | raw TCP MB/s | RemoteDataset MB/s | of raw TCP | of link |"
          " p50 / p99 ms (256 rows) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['rate']} ({r['link_MB_s']:.0f} MB/s) | {r['clients']} | "
            f"{r['raw_tcp_MB_s']:.0f} | {r['remote_MB_s']:.0f} | {r['of_raw']:.0%} | "
            f"{r['of_link']:.0%} | {r['p50_ms_256']:.0f} / {r['p99_ms_256']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
