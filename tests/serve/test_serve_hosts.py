"""``mrecord serve`` and ``RemoteDataset`` across hosts, on the emulated cluster.

Two server "hosts" and two client "hosts" (network namespaces on a private bridge,
10 Gbit/s links: :mod:`harness.netns`). Servers are ``mrecord serve`` processes with a
token, on their host's address; readers are ``RemoteDataset(transport="http")`` in
other hosts (:mod:`harness.remote_reader`). What a user relies on:

- every shuffle mode, sharded, gives MindDataset's rows on the same files;
- a server SIGKILLed mid-epoch and started again costs nothing: exactly the rows of
  the uninterrupted run, none repeated, none missed;
- a reader that names two servers moves to the second when the first dies; when both
  are gone, the error names both;
- a checkpoint taken on one host resumes on another host against another server.

The cluster needs root: without it these tests fail with the reason (never skip).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.certs import self_signed
from harness.netns import Cluster, cluster
from harness.serve_cluster import (
    PORT,
    TOKEN,
    finish_reader,
    read_remote,
    start_reader,
    start_server,
)
from mrecord import MindDataset, RemoteDataset, Shuffle, config
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 400
MODES: list[Any] = ["global", "partial", "files", "infile", "adaptive", "block", False]
"""Every mode. BLOCK's page boundaries come from the server (``GET .../layout``); on two
ranks nothing is measured, so its blocks are the files' alone on either host."""
SEED = 4321


@pytest.fixture(scope="module")
def data(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=3)


@pytest.fixture(scope="module")
def net() -> Iterator[Cluster]:
    with cluster(clients=2, servers=2, rate="10gbit") as c:
        yield c


@pytest.fixture
def servers(net: Cluster, data: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [start_server(net, host, {"mixed": data}) for host in net.servers]
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _url(net: Cluster, i: int) -> str:
    return f"http://{net.servers[i].ip}:{PORT}"


def _local(data: Path, run: dict[str, Any], epochs: int = 1) -> list[Any]:
    """``column`` of MindDataset's rows for the same run, read from the files here."""
    config.set_seed(int(run.get("seed", 1234)))
    shuffle = Shuffle(run["shuffle"]) if isinstance(run["shuffle"], str) else run["shuffle"]
    ds = MindDataset(
        data,
        columns_list=["id"],
        shuffle=shuffle,
        num_shards=run.get("num_shards"),
        shard_id=run.get("shard_id"),
    )
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [int(row[0]) for _ in range(epochs) for row in it]


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in result, result
    return result


def _runs(shard_id: int) -> list[dict[str, Any]]:
    return [
        {"shuffle": mode, "num_shards": 2, "shard_id": shard_id, "seed": SEED, "epochs": 2}
        for mode in MODES
    ]


def test_every_shuffle_mode_sharded_across_hosts_equals_mind_dataset(
    net: Cluster, data: Path, servers: list[subprocess.Popen[bytes]]
) -> None:
    # The two shards are read at once, from the two client hosts.
    readers = [
        start_reader(
            net, host, {"urls": [_url(net, 0)], "token": TOKEN, "runs": _runs(shard)}
        )
        for shard, host in enumerate(net.clients)
    ]
    results = [_ok(finish_reader(r, timeout=180)) for r in readers]
    seen: list[int] = []
    for shard, result in enumerate(results):
        for run, got in zip(_runs(shard), result["runs"], strict=True):
            assert got["values"] == _local(data, run, epochs=2), (shard, run["shuffle"])
        seen += result["runs"][1]["values"][: ROWS // 2]  # partial, first epoch
    assert sorted(seen) == list(range(ROWS))  # the two shards cover the dataset once


def _paused_reader(
    net: Cluster, tmp_path: Path, urls: list[str], run: dict[str, Any], retries: int
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    ready, go = tmp_path / "ready", tmp_path / "go"
    spec = {
        "urls": urls,
        "token": TOKEN,
        "retries": retries,
        "workers": 2,
        "block_rows": 8,
        "runs": [run],
        "pause": {"after": 40, "ready": str(ready), "go": str(go), "wait_s": 90},
    }
    proc = start_reader(net, net.clients[0], spec)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, finish_reader(proc, 10)
        assert time.monotonic() < deadline, "the reader never reached its pause"
        time.sleep(0.05)
    return proc, ready, go


def _metrics(net: Cluster, i: int) -> str:
    code = (
        "import sys, urllib.request\n"
        "r = urllib.request.Request(sys.argv[1] + '/metrics', "
        "headers={'Authorization': 'Bearer ' + sys.argv[2]})\n"
        "print(urllib.request.urlopen(r, timeout=30).read().decode())\n"
    )
    done = net.run_python(net.clients[1], code, _url(net, i), TOKEN, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows_served(metrics: str) -> int:
    for line in metrics.splitlines():
        if line.startswith('mrecord_serve_rows_total{dataset="mixed"}'):
            return int(line.split()[-1])
    return 0


def test_server_killed_mid_epoch_and_restarted_costs_nothing(
    net: Cluster, data: Path, servers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    run = {"shuffle": "global", "num_shards": 2, "shard_id": 1, "seed": SEED, "epochs": 1}
    expected = _local(data, run)
    proc, _, go = _paused_reader(net, tmp_path, [_url(net, 0)], run, retries=8)
    servers[0].send_signal(signal.SIGKILL)
    servers[0].wait(timeout=30)
    go.touch()  # the reader goes on against no server: refused, it backs off...
    time.sleep(0.5)
    servers[0] = start_server(net, net.servers[0], {"mixed": data})  # ...and reconnects
    result = _ok(finish_reader(proc, timeout=180))
    assert result["runs"][0]["values"] == expected  # no repeat, no miss, same order
    assert _rows_served(_metrics(net, 0)) > 0  # the rows after the pause came from the new one


def test_failover_to_the_second_server_and_an_error_naming_both(
    net: Cluster, data: Path, servers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    run = {"shuffle": "infile", "num_shards": 2, "shard_id": 0, "seed": SEED, "epochs": 1}
    urls = [_url(net, 0), _url(net, 1)]
    proc, ready, go = _paused_reader(net, tmp_path, urls, run, retries=1)
    servers[0].kill()
    servers[0].wait(timeout=30)
    go.touch()
    result = _ok(finish_reader(proc, timeout=180))
    assert result["runs"][0]["values"] == _local(data, run)
    assert _rows_served(_metrics(net, 1)) > 0  # the second server took over

    ready.unlink()
    go.unlink()
    proc, _, go = _paused_reader(net, tmp_path, urls[1:] + urls[:1], run, retries=1)
    servers[1].kill()
    servers[1].wait(timeout=30)
    go.touch()
    result = finish_reader(proc, timeout=180)
    assert result.get("error", "").startswith("DatasetServerError"), result
    assert "every server" in result["error"]
    for url in urls:
        assert url in result["error"], result["error"]


def test_checkpoint_resumes_on_another_host_against_another_server(
    net: Cluster, data: Path, servers: list[subprocess.Popen[bytes]]
) -> None:
    run = {"shuffle": "global", "num_shards": 2, "shard_id": 1, "seed": SEED, "epochs": 1}
    expected = _local(data, run)
    first = _ok(
        read_remote(
            net,
            net.clients[0],
            {"urls": [_url(net, 0)], "token": TOKEN, "runs": [{**run, "stop_after": 77}]},
        )
    )["runs"][0]
    state = json.loads(json.dumps(first["state"]))  # as a checkpoint file holds it
    second = _ok(
        read_remote(
            net,
            net.clients[1],
            {"urls": [_url(net, 1)], "token": TOKEN, "runs": [{**run, "state": state}]},
        )
    )["runs"][0]
    assert first["values"] + second["values"] == expected


def test_health_and_token_refusal_across_hosts(
    net: Cluster, servers: list[subprocess.Popen[bytes]]
) -> None:
    code = (
        "import sys, urllib.request, urllib.error\n"
        "print(urllib.request.urlopen(sys.argv[1] + '/healthz', timeout=30).read().decode())\n"
        "try:\n"
        "    urllib.request.urlopen(sys.argv[1] + '/api/datasets', timeout=30)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )
    done = net.run_python(net.clients[0], code, _url(net, 0), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "401"]


def test_tls_across_hosts_with_the_servers_certificate(
    net: Cluster, data: Path, tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path, net.servers[1].ip)
    proc = start_server(
        net,
        net.servers[1],
        {"mixed": data},
        extra=["--tls-cert", str(cert), "--tls-key", str(key)],
    )
    try:
        url = f"https://{net.servers[1].ip}:{PORT}"
        run = {"shuffle": "files", "num_shards": 2, "shard_id": 0, "seed": SEED, "epochs": 1}
        spec: dict[str, Any] = {"urls": [url], "token": TOKEN, "runs": [run]}
        got = _ok(read_remote(net, net.clients[0], {**spec, "cafile": str(cert)}))
        assert got["runs"][0]["values"] == _local(data, run)
        assert "InsecureTokenWarning" not in got["stderr"]
        untrusted = read_remote(net, net.clients[1], {**spec, "retries": 0})
        assert "not trusted" in untrusted.get("error", ""), untrusted
        plain = read_remote(
            net, net.clients[1], {**spec, "urls": [url.replace("https", "http")], "retries": 0}
        )
        assert "did not answer" in plain.get("error", ""), plain  # a DatasetServerError
        assert "InsecureTokenWarning" in plain["stderr"]  # a token in clear to another host
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_block_shuffle_through_the_service_equals_mind_dataset(data: Path) -> None:
    run = {"shuffle": "block", "seed": SEED}
    with ServerThread({"mixed": data}) as server:
        config.set_seed(SEED)
        ds = RemoteDataset(
            server.url, "mixed", columns_list=["id"], shuffle=Shuffle.BLOCK, transport="http"
        )
        got = [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert got == _local(data, run)
