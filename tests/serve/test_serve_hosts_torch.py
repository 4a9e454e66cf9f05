"""A two-host torchrun job trains from ``mrecord serve`` on a third host (issue 28).

The emulated cluster (:mod:`harness.netns`, 10 Gbit/s links): the server host runs
``mrecord serve`` with a token; each of two client hosts runs one torchrun node
(``--nnodes 2``, one rank each, gloo between the hosts over their own addresses) of
``harness/served_train.py``: docs/TORCH.md's recipe with the served dataset's URL where
the file was, 2 DataLoader workers per rank, a DDP model, the visitation audit. What a
user relies on: the audit is clean (every row once per epoch over both ranks), each rank
got exactly the rows, in the order, that the same job on the files gives it, and the
all-reduces went through (the same weights on both ranks).

The cluster needs root: without it this test fails with the reason (never skips).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.netns import cluster
from harness.serve_cluster import PORT, TOKEN, start_server
from mrecord import Shuffle
from mrecord.testing.mixed import write_mixed

torch = pytest.importorskip("torch")

from mrecord.torch import StreamingDataset, audit  # noqa: E402

ROWS = 240
EPOCHS = 2
BATCH = 16
SEED = 7
SCRIPT = Path(__file__).resolve().parents[2] / "harness" / "served_train.py"


def _file_ids(data: Path, rank: int, epoch: int) -> list[int]:
    """The ids rank ``rank`` of 2 gets in ``epoch`` from the files, same arguments."""
    ds = StreamingDataset(
        data, columns=["id"], shuffle=Shuffle.GLOBAL, seed=SEED, batch_size=BATCH,
        rank=rank, world_size=2,
    )  # fmt: skip
    ds.set_epoch(epoch)
    return [int(s["id"]) for s in ds]


def test_two_host_torchrun_job_trains_from_the_service_and_audits_clean(tmp_path: Path) -> None:
    data = write_mixed(tmp_path / "mixed.mrecord", ROWS, seed=4)
    audit_dir, out = tmp_path / "audit", tmp_path / "out"
    out.mkdir()
    with cluster(clients=2, servers=1, rate="10gbit") as net:
        start_server(net, net.server, {"mixed": data})
        url = f"http://{net.server.ip}:{PORT}/api/datasets/mixed"
        master = net.clients[0].ip
        env = {"MRECORD_SERVE_TOKEN": TOKEN, "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        nodes = []
        for node, host in enumerate(net.clients):
            argv = [
                sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--node-rank", str(node), "--nproc-per-node", "1", "--master-addr", master,
                "--master-port", "29531", str(SCRIPT), "--url", url, "--audit", str(audit_dir),
                "--out", str(out), "--epochs", str(EPOCHS), "--batch-size", str(BATCH),
                "--seed", str(SEED),
            ]  # fmt: skip
            log = open(tmp_path / f"node{node}.log", "wb")  # noqa: SIM115 - closed below
            proc = net.popen(host, argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            nodes.append((proc, log))
        for node, (proc, log) in enumerate(nodes):
            try:
                code = proc.wait(timeout=400)
            except subprocess.TimeoutExpired:
                code = None
            log.close()
            text = (tmp_path / f"node{node}.log").read_text(errors="replace")[-3000:]
            assert code == 0, f"torchrun node {node} ended with {code}:\n{text}"

    report = audit(audit_dir)
    assert report.ok, report.summary()
    records = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["world"] for r in records] == [2, 2]
    for rank, record in enumerate(records):
        for epoch in range(EPOCHS):
            assert record["ids"][epoch] == _file_ids(data, rank, epoch), (rank, epoch)
    for epoch in range(EPOCHS):  # both ranks together: every row, once (tail="pad": none short)
        both = records[0]["ids"][epoch] + records[1]["ids"][epoch]
        assert sorted(both) == list(range(ROWS))
    assert records[0]["weights"] == records[1]["weights"]  # gloo's all-reduce went through
