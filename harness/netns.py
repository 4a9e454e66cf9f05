"""A small emulated cluster on one machine: network namespaces on a private bridge.

::

    with cluster(clients=2, rate="10gbit") as c:          # needs root
        server = c.popen(c.server, [sys.executable, "-m", "http.server", "--bind", c.server.ip])
        out = c.run_python(c.clients[0], "import urllib.request; ...")

One "host" is a network namespace with one veth into a bridge that only these hosts use,
and its own address on a private subnet (``10.231.0.0/24``: the servers are ``.1``, ``.2``...
then the clients). Both ends of every veth are shaped with ``tc qdisc ... tbf``
to ``rate`` (what leaves the host and what reaches it), as a switch port of that speed
would be (``netem`` is not in this kernel, so there is no added delay). The bridge has no
address in the machine's own namespace and nothing is routed: traffic stays between
these namespaces.

Names start with ``mrh-`` and carry the creating process's id, so that leftovers of a
process that died before its ``finally`` (SIGKILL) are recognised and removed the next
time a cluster is made; a cluster of a live process is never touched. ``cluster()``
always tears down what it made (on errors and KeyboardInterrupt too), and kills the
processes it started in its namespaces.

When namespaces cannot be made (not root, no ``ip``, a container without the
capability) :class:`ClusterUnavailable` says so: the tests that need a cluster fail
with that message, they are not skipped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PREFIX",
    "SUBNET",
    "Cluster",
    "ClusterUnavailable",
    "Host",
    "cleanup_leftovers",
    "cluster",
    "rate_bytes_per_s",
]

PREFIX = "mrh-"
"""Every namespace and link of a cluster is named ``mrh-<pid in base 36>-<role>``."""

SUBNET = "10.231.0"
"""The cluster's /24: servers first from ``.1``, then the clients."""

_REPO = Path(__file__).resolve().parent.parent
_NAME = re.compile(rf"^{PREFIX}([0-9a-z]+)-")


class ClusterUnavailable(RuntimeError):
    """This machine cannot make the emulated cluster (the message says why and what to do)."""


@dataclass
class Host:
    """One emulated host: a namespace, its address and the veth that joins it to the bridge."""

    name: str
    """The network namespace (``ip netns exec NAME ...``)."""
    ip: str
    veth: str
    """The veth end on the bridge (in the machine's own namespace); inside the namespace
    the other end is ``eth0``."""


@dataclass
class Cluster:
    """Server hosts and client hosts on one bridge (see the module docstring)."""

    tag: str
    bridge: str
    servers: list[Host]
    clients: list[Host]
    rate: str
    workdir: Path
    """A private temporary folder (logs), removed at teardown."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def server(self) -> Host:
        """The first server host."""
        return self.servers[0]

    @property
    def hosts(self) -> list[Host]:
        """The servers, then the clients."""
        return [*self.servers, *self.clients]

    def command(self, host: Host, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", host.name, *argv]

    def popen(
        self, host: Host, argv: Sequence[str], *, env: dict[str, str] | None = None, **kw: object
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``host`` (killed when the cluster is torn down, if still alive).

        The environment is this process's with ``PYTHONPATH`` set to the repository, so a
        Python child imports this checkout's ``mrecord`` and ``harness``.
        """
        proc = subprocess.Popen(self.command(host, argv), env=_env(env), **kw)  # type: ignore[call-overload]
        self.processes.append(proc)
        return proc  # type: ignore[no-any-return]

    def run(
        self, host: Host, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``host`` to its end (at most ``timeout`` s); output captured."""
        return subprocess.run(
            self.command(host, argv),
            env=_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def run_python(
        self, host: Host, code: str, *args: str, timeout: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run Python ``code`` (with ``sys.argv[1:] == args``) in ``host``; output captured."""
        return self.run(host, [sys.executable, "-c", code, *args], timeout=timeout, env=env)


def rate_bytes_per_s(rate: str) -> float:
    """``"10gbit"`` / ``"1gbit"`` / ``"500mbit"`` as bytes per second."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate.lower())
    if match is None:
        raise ValueError(f"rate must look like 10gbit or 500mbit, got {rate!r}")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]
    return float(match.group(1)) * scale / 8


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise ClusterUnavailable(
            f"`ip {' '.join(args)}` failed: {done.stderr.strip()} (the emulated cluster needs "
            "root with CAP_NET_ADMIN: network namespaces, veth, a bridge and tc)"
        )
    return done


def _tc(*args: str) -> None:
    done = subprocess.run(["tc", *args], capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise ClusterUnavailable(f"`tc {' '.join(args)}` failed: {done.stderr.strip()}")


def _check_possible() -> None:
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        raise ClusterUnavailable(
            f"cannot make the emulated cluster: {missing} not installed (iproute2); the "
            "cross-host tests need root, iproute2 and network namespaces"
        )
    if os.geteuid() != 0:
        raise ClusterUnavailable(
            "cannot make the emulated cluster: network namespaces need root (run the "
            "cross-host tests as root, or in a container with CAP_NET_ADMIN)"
        )


def _tag() -> str:
    digits, n = "", os.getpid()
    while True:
        n, r = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
        if n == 0:
            return digits


def _alive(tag: str) -> bool:
    try:
        os.kill(int(tag, 36), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def cleanup_leftovers() -> list[str]:
    """Remove the ``mrh-`` namespaces and links of processes that no longer exist (a
    cluster whose owner was SIGKILLed); those of a live process stay. Returns what went."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME.match(name)
        if match and not _alive(match.group(1)):
            _kill_in(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        match = _NAME.match(name)
        if match and not _alive(match.group(1)):
            _ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _kill_in(netns: str) -> None:
    """SIGKILL every process still inside namespace ``netns``."""
    pids = _ip("netns", "pids", netns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _shape(device: str, rate: str, netns: str | None = None) -> None:
    """``tbf`` on ``device``'s egress at ``rate``, with a burst of at least one timer tick's
    worth of bytes (less would cap the rate below ``rate``)."""
    burst = max(int(rate_bytes_per_s(rate) / 250), 64 << 10)
    prefix = ["-n", netns] if netns else []
    _tc(*prefix, "qdisc", "replace", "dev", device, "root", "tbf", "rate", rate,
        "burst", str(burst), "latency", "50ms")  # fmt: skip


@contextlib.contextmanager
def cluster(clients: int = 2, rate: str = "10gbit", servers: int = 1) -> Iterator[Cluster]:
    """``servers`` server hosts (1-4) and ``clients`` client hosts (1-8) on a private
    bridge, links shaped to ``rate``; torn down when the block ends, whatever ends it."""
    if not 1 <= clients <= 8 or not 1 <= servers <= 4:
        raise ValueError(f"clients must be 1..8 and servers 1..4, got {clients}, {servers}")
    rate_bytes_per_s(rate)
    _check_possible()
    cleanup_leftovers()
    tag = _tag()
    bridge = f"{PREFIX}{tag}-br"
    made_links: list[str] = []
    made_ns: list[str] = []
    hosts: list[Host] = []
    c = Cluster(tag, bridge, [], [], rate, Path(tempfile.mkdtemp(prefix=f"{PREFIX}{tag}-")))
    try:
        _ip("link", "add", bridge, "type", "bridge")
        made_links.append(bridge)
        _ip("link", "set", bridge, "up")
        for i in range(servers + clients):
            role = f"s{i + 1}" if i < servers else f"c{i - servers + 1}"
            ns = f"{PREFIX}{tag}-{role}"
            veth, peer = f"{PREFIX}{tag}-{role}", f"{PREFIX}{tag}-{role}p"
            _ip("netns", "add", ns)
            made_ns.append(ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            made_links.append(veth)
            _ip("link", "set", peer, "netns", ns)
            _ip("-n", ns, "link", "set", peer, "name", "eth0")
            address = f"{SUBNET}.{i + 1}"
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "set", veth, "master", bridge)
            _ip("link", "set", veth, "up")
            _shape(veth, rate)  # what reaches the host
            _shape("eth0", rate, ns)  # what leaves it
            hosts.append(Host(ns, address, veth))
        c.servers, c.clients = hosts[:servers], hosts[servers:]
        _wait_reachable(c)
        yield c
    finally:
        for proc in c.processes:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        shutil.rmtree(c.workdir, ignore_errors=True)
        for ns in made_ns:
            _kill_in(ns)
            _ip("netns", "del", ns, check=False)
        for link in reversed(made_links):
            _ip("link", "del", link, check=False)


_PROBE_SERVER = """
import socket, sys
srv = socket.create_server((sys.argv[1], 0))
srv.settimeout(float(sys.argv[3]))
print(srv.getsockname()[1], flush=True)
for _ in range(int(sys.argv[2])):
    srv.accept()[0].close()
"""

_PROBE_CLIENT = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[3])
while True:
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
        break
    except OSError as exc:
        if time.monotonic() > deadline:
            sys.exit(f"{type(exc).__name__}: {exc}")
        time.sleep(0.1)
"""


def _wait_reachable(c: Cluster, timeout: float = 30.0) -> None:
    """Wait until every client can open a TCP connection to the server (a bridge port
    takes a moment to forward); ClusterUnavailable if one never can (a host firewall that
    filters bridged traffic, say)."""
    argv = [sys.executable, "-c", _PROBE_SERVER, c.server.ip, str(len(c.clients)), str(timeout)]
    listener = c.popen(c.server, argv, stdout=subprocess.PIPE)
    assert listener.stdout is not None
    port = listener.stdout.readline().decode().strip()
    for client in c.clients:
        done = c.run_python(
            client, _PROBE_CLIENT, c.server.ip, port or "1", str(timeout), timeout=timeout + 30
        )
        if done.returncode != 0:
            raise ClusterUnavailable(
                f"{client.name} ({client.ip}) cannot reach the server {c.server.ip} over "
                f"the bridge {c.bridge}: {done.stderr.strip()[-300:]} (is bridged traffic "
                "filtered by br_netfilter / iptables?)"
            )
    listener.wait(timeout=timeout)
    listener.stdout.close()
