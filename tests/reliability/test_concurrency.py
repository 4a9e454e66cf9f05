"""Readers during commits see whole snapshots; writers exclude each other; dead locks free."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mrecord.errors import DatasetLockedError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.writer.file_writer import FileWriter
from reliability import concurrency

ROOT = Path(__file__).resolve().parents[2]


def _python(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc: subprocess.Popen[str] = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )
    return proc


def test_readers_see_old_or_new_snapshot_never_a_mix(tmp_path: Path) -> None:
    """Two reader processes loop over the dataset while a third appends and commits 6 times:
    every snapshot is the state after some commit, whole, and no read raises."""
    concurrency.create(tmp_path)
    mod = "reliability.concurrency"
    readers = [_python("-m", mod, "reader", str(tmp_path)) for _ in range(2)]
    writer = _python("-m", mod, "writer", str(tmp_path), "6")
    _, werr = writer.communicate(timeout=120)
    assert writer.returncode == 0, werr
    final = concurrency.BASE_ROWS + 6 * concurrency.APPEND_ROWS
    for proc in readers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        summary = json.loads(out)
        assert summary["errors"] == []
        seen = {int(k) for k in summary["seen"]}
        assert str(final) in summary["seen"]
        assert all((n - concurrency.BASE_ROWS) % concurrency.APPEND_ROWS == 0 for n in seen)
    with DatasetReader.open(tmp_path / "data0") as reader:
        assert reader.num_rows == final


def _dataset(tmp_path: Path) -> Path:
    writer = FileWriter(tmp_path / "d")
    writer.add_schema({"x": {"type": "int32"}})
    writer.write_raw_data([{"x": 1}])
    writer.commit()
    return tmp_path / "d"


def test_second_writer_is_refused_in_process(tmp_path: Path) -> None:
    """While one writer holds the dataset, a new writer or appender gets DatasetLockedError."""
    path = _dataset(tmp_path)
    first = FileWriter.open_for_append(path)
    with pytest.raises(DatasetLockedError, match="locked"):
        FileWriter.open_for_append(path)
    with pytest.raises(DatasetLockedError):
        FileWriter(path, overwrite=True)
    first.write_raw_data([{"x": 2}])
    first.commit()
    second = FileWriter.open_for_append(path)
    second.abort()
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == 2


HOLD = """
import sys, time
from mrecord.writer.file_writer import FileWriter
w = FileWriter.open_for_append(sys.argv[1])
w.write_raw_data([{"x": 99}])
print("holding", flush=True)
time.sleep(60)
"""


def test_lock_of_killed_writer_does_not_block(tmp_path: Path) -> None:
    """A writer in another process locks the dataset; SIGKILLed, its lock is gone at once and
    its uncommitted rows are not in the dataset."""
    path = _dataset(tmp_path)
    holder = _python("-c", HOLD, str(path))
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding"
    with pytest.raises(DatasetLockedError):
        FileWriter.open_for_append(path)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)
    writer = FileWriter.open_for_append(path)
    assert not any(p.name.endswith(".mrecord-partial") for p in tmp_path.iterdir())
    writer.abort()
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == 1


def test_reindex_racing_an_appender_never_publishes_an_old_index(tmp_path: Path) -> None:
    """One process appends 5 times while another rebuilds the indexes in a loop: every
    rebuild indexes the generation committed under its lock, so afterwards the dataset opens
    (each .db matches its data file) and verifies (issue 27, D3)."""
    from mrecord import verify_dataset

    concurrency.create(tmp_path)
    mod = "reliability.concurrency"
    reindexer = _python("-m", mod, "reindexer", str(tmp_path))
    writer = _python("-m", mod, "writer", str(tmp_path), "5")
    _, werr = writer.communicate(timeout=300)
    assert writer.returncode == 0, werr
    out, err = reindexer.communicate(timeout=300)
    assert reindexer.returncode == 0, err
    summary = json.loads(out)
    assert summary["errors"] == []
    final = concurrency.BASE_ROWS + 5 * concurrency.APPEND_ROWS
    with DatasetReader.open(tmp_path / "data0", verify="always") as reader:
        assert reader.num_rows == final
    report = verify_dataset(tmp_path / "data0")
    assert report.ok and report.rows == final, report.problems
