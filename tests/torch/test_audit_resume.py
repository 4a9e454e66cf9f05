"""The visitation audit across a kill and resume (issue 26, item 4).

A run that checkpoints, goes on delivering, and is killed, then resumes from that
checkpoint (on another world size), replays exactly the batches delivered after the
checkpoint. The audit proves "each row once" for the committed history: each run's
deliveries up to the point the next run resumed from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.torch.audit import audit

torch = pytest.importorskip("torch")

from mrecord.torch import StreamingDataLoader, StreamingDataset  # noqa: E402

ROWS = 36


def write(folder: Path) -> str:
    with FileWriter(folder / "rows.mrecord", shard_num=3) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(ROWS)})
    return str(writer.files[0])


def loaders(
    files: str, world: int, audit_dir: Path, state: dict[str, Any] | None = None
) -> list[StreamingDataLoader]:
    out = []
    for rank in range(world):
        ds = StreamingDataset(
            files, batch_size=3, rank=rank, world_size=world, audit_dir=str(audit_dir)
        )
        loader = StreamingDataLoader(ds)
        if state is not None:
            loader.load_state_dict(state)
        out.append(loader)
    return out


def test_audit_of_a_kill_and_resume_counts_the_committed_history(tmp_path: Path) -> None:
    files = write(tmp_path)
    log = tmp_path / "audit"
    first = loaders(files, 2, log)
    iters = [iter(loader) for loader in first]
    checkpoint: dict[str, Any] = {}
    for step in range(4):  # lockstep, as under DDP
        for it in iters:
            next(it)
        if step == 1:
            checkpoint = first[0].state_dict()  # saved after 2 steps ...
    # ... then 2 more steps delivered and the job is killed: they were never checkpointed
    del iters, first
    for loader in loaders(files, 3, log, checkpoint):  # resumed on 3 ranks
        for _ in loader:
            pass
    report = audit(log)
    assert report.ok, report.summary()
    [epoch] = report.epochs
    assert (epoch.delivered, epoch.padded) == (ROWS, 0)
    # 2 steps x 2 ranks x batch 3, delivered again after the resume
    assert epoch.replayed == 2 * 2 * 3
    assert "replayed" in report.summary()


def test_a_second_fresh_start_is_still_a_duplicate(tmp_path: Path) -> None:
    """Starting over without the checkpoint is not a resume: the audit says so."""
    files = write(tmp_path)
    log = tmp_path / "audit"
    for _ in range(2):
        for loader in loaders(files, 1, log):
            next(iter(loader))
    [epoch] = audit(log).epochs
    assert not epoch.ok and len(epoch.duplicates) == 3
