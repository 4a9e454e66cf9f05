"""docs/TORCH.md's preemption recipe (examples/torchrun/preemption.py) under torchrun.

Two ranks with two DataLoader workers each read; SIGTERM goes to every process of the job
(torchrun, the ranks and their workers, as a preemption often does); the ranks save one
checkpoint and exit. Three ranks resume from it and finish the epoch, and the audit
proves each row was delivered once in the committed history.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.torch.audit import audit

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "torchrun" / "preemption.py"
ROWS = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(nproc: int, *args: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(SCRIPT), *args,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: the test signals all of it
    )  # fmt: skip


def test_sigterm_to_every_process_checkpoints_and_another_world_size_resumes(
    tmp_path: Path,
) -> None:
    with FileWriter(tmp_path / "train.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "x": {"type": "float32", "shape": [4]}})
        writer.write_raw_data(
            {"id": np.arange(ROWS), "x": np.ones((ROWS, 4), np.float32)}
        )
    ckpt, log, progress = tmp_path / "ckpt.pt", tmp_path / "audit", tmp_path / "step"
    common = [
        "--data", str(tmp_path / "train.mrecord"), "--checkpoint", str(ckpt),
        "--audit", str(log), "--batch-size", "4",
    ]  # fmt: skip
    first = torchrun(2, *common, "--step-seconds", "0.05", "--progress", str(progress))
    try:
        deadline = time.monotonic() + 240
        while not (progress.exists() and progress.read_text() and int(progress.read_text()) >= 3):
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the job made no progress"
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGTERM)  # torchrun, both ranks and their workers
        out = first.communicate(timeout=120)[0]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert "preempted: checkpoint at" in out, out
    assert "killed by signal" not in out, out
    assert ckpt.exists()
    second = torchrun(3, *common)
    out = second.communicate(timeout=300)[0]
    assert second.returncode == 0, out
    assert "finished: 1 epoch(s)" in out
    report = audit(log)
    assert report.ok, report.summary()
    [epoch] = report.epochs
    assert epoch.delivered == ROWS
