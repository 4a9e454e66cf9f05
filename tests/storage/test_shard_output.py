"""``storage.shard_output``: the vectored, threaded page writes of every writer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, verify_dataset
from mrecord.storage import shard_output

_FORK_SCRIPT = """
import os, sys
from pathlib import Path
from mrecord import DatasetReader, FileWriter

folder = Path(sys.argv[1])

def write(name):
    with FileWriter(folder / name) as w:
        w.add_schema({"b": {"type": "bytes"}})
        w.set_page_size(1024)
        w.write_raw_data({"b": [bytes([i % 256]) * 3000 for i in range(40)]})

write("parent")
pid = os.fork()
if pid == 0:
    write("child")
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
assert DatasetReader.open(folder / "child").num_rows == 40
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_child_forked_after_its_parent_wrote_can_write(tmp_path: Path) -> None:
    """The writer threads are per process: a forked converter worker does not hang."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(tmp_path)], env=env, timeout=120, check=False
    )
    assert done.returncode == 0


def test_more_blobs_in_a_page_than_one_writev_takes(tmp_path: Path) -> None:
    """A page of 3,000 tiny blobs is more buffers than IOV_MAX: written in groups, whole."""
    blobs = [bytes([i % 251]) * (i % 5) for i in range(3000)]
    with FileWriter(tmp_path / "d") as w:
        w.add_schema({"b": {"type": "bytes"}})
        w.write_raw_data({"b": blobs})
    with DatasetReader.open(tmp_path / "d") as reader:
        got = [bytes(r["b"]) for r in reader.iter_rows()]
    assert got == blobs
    assert verify_dataset(tmp_path / "d").ok


def test_short_writes_are_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``writev`` that writes only part (a signal, a nearly full disk) is finished."""
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)  # writev's own contract
    real = os.writev

    class Short:
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def writev(self, fd: int, buffers: list[Any]) -> int:
            first = memoryview(buffers[0]).cast("B")
            return real(fd, [first[: max(1, len(first) // 2)]])

    monkeypatch.setattr(shard_output, "os", Short())
    rng = np.random.default_rng(0)
    blobs = [rng.bytes(int(n)) for n in rng.integers(0, 5000, 200)]
    with FileWriter(tmp_path / "d") as w:
        w.add_schema({"b": {"type": "bytes"}, "x": {"type": "float32", "shape": [3]}})
        w.set_page_size(4096)
        w.write_raw_data({"b": blobs, "x": np.ones((200, 3), dtype=np.float32)})
    monkeypatch.undo()
    with DatasetReader.open(tmp_path / "d") as reader:
        assert [bytes(r["b"]) for r in reader.iter_rows()] == blobs
    assert verify_dataset(tmp_path / "d").ok
