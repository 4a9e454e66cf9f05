"""``mrecord serve`` and ``RemoteDataset`` readers on the emulated cluster (:mod:`~harness.netns`).

- :func:`start_server`: ``mrecord serve`` in a host, on its address, with a token;
  returns once it listens (the process is the cluster's: killed at teardown).
- :func:`read_remote`: ``python -m harness.remote_reader SPEC`` in a host, to its end;
  the JSON it printed. :func:`start_reader` starts one without waiting (readers on
  several hosts at once).

Shared by tests/serve/test_serve_hosts.py and benchmarks/bench_serve_hosts.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.netns import Cluster, Host

__all__ = ["PORT", "TOKEN", "finish_reader", "read_remote", "start_reader", "start_server"]

PORT = 8750
TOKEN = "mrh-cluster-token"

_SERVE = "from mrecord.cli.main import main; main()"


def start_server(
    c: Cluster,
    host: Host,
    datasets: dict[str, Path],
    *,
    token: str = TOKEN,
    port: int = PORT,
    extra: Sequence[str] = (),
    timeout: float = 90.0,
    cgroup: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``mrecord serve NAME=PATH... --host IP --port PORT`` (token from the environment)
    in ``host``; returns when uvicorn says it listens (RuntimeError with its log if it
    dies or takes longer than ``timeout``). Its log goes to a file of the cluster's
    ``workdir`` (no pipe to drain). With ``cgroup`` (a cgroup v1 directory) the server
    starts in it, so that it sizes its memory use from that group's limit."""
    argv = [sys.executable, "-c", _SERVE, "serve"]
    argv += [f"{name}={path}" for name, path in datasets.items()]
    argv += ["--host", host.ip, "--port", str(port), "--local-socket", "off", *extra]
    if cgroup is not None:
        # The namespace's /sys hides the cgroup tree: the server waits (in a shell) until
        # this process has moved it into the group, then mounts the memory hierarchy in
        # the namespace's own mount namespace (``ip netns exec`` made it; the host's mounts
        # are untouched) so that the server sees its group's limit, as a server on a host
        # of its own does, and starts. (Without the mount it saw no limit, sized its
        # blocks in flight from the machine's memory and was OOM-killed in a 300 MB group.)
        wait = f"until grep -q 'memory:/{cgroup.name}$' /proc/self/cgroup; do sleep 0.05; done"
        mount = (
            f"[ -e /sys/fs/cgroup/memory/{cgroup.name}/memory.limit_in_bytes ] || "
            "{ mount -t tmpfs cgroup-root /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/memory && "
            "mount -t cgroup -o memory memory /sys/fs/cgroup/memory; }"
        )
        argv = ["sh", "-c", f'{wait}; {mount}; exec "$@"', "sh", *argv]
    log = c.workdir / f"serve-{host.name}-{time.monotonic_ns()}.log"
    with open(log, "wb") as sink:
        proc = c.popen(host, argv, env={"MRECORD_SERVE_TOKEN": token}, stderr=sink)
    if cgroup is not None:
        (cgroup / "cgroup.procs").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while b"Uvicorn running" not in log.read_bytes():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait(timeout=30)
            text = log.read_text(errors="replace")
            raise RuntimeError(f"mrecord serve in {host.name} did not start: {text}")
        time.sleep(0.05)
    return proc


def start_reader(c: Cluster, host: Host, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """``python -m harness.remote_reader SPEC`` in ``host``, stdout and stderr piped."""
    argv = [sys.executable, "-m", "harness.remote_reader", json.dumps(spec)]
    return c.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish_reader(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The JSON a reader printed (it must end within ``timeout`` s and print one)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"the reader ran past {timeout} s: {err.decode()[-2000:]}") from None
    lines = out.decode().strip().splitlines()
    if not lines:
        raise RuntimeError(f"the reader printed nothing (exit {proc.returncode}): {err.decode()}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["stderr"] = err.decode()[-4000:]
    return result


def read_remote(
    c: Cluster, host: Host, spec: dict[str, Any], timeout: float = 120.0
) -> dict[str, Any]:
    """Run a reader in ``host`` to its end; the JSON it printed."""
    return finish_reader(start_reader(c, host, spec), timeout)
