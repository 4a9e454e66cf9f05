"""A ``reindex`` killed (SIGKILL) at any step of its transaction (issue 24): before the
commit point the old ``.db`` files are untouched and usable; at or after it the next open
finishes the new ones; no committed row is ever lost, and the next run cleans up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mrecord import DatasetReader, FileWriter, MindPage
from mrecord.maintenance.reindex import reindex

ROWS = 60
SHARDS = 3

_KILLER = """
import os, signal, sys
from mrecord.maintenance.reindex import reindex
from mrecord.storage import commit
path, mode, arg = sys.argv[1:4]

def die(*_):
    os.kill(os.getpid(), signal.SIGKILL)

if mode == "build":  # killed after the .db partial of shard `arg` (1-based) is written
    seen = [0]

    def progress(rows):
        seen[0] += 1
        if seen[0] == int(arg):
            die()

    reindex(path, progress=progress)
else:  # killed at a publish step of the commit (journal, renamed_one, renamed_all)
    commit.crash_hook = lambda step: die() if step == arg else None
    reindex(path)
"""


def _dataset(tmp_path: Path) -> list[Path]:
    with FileWriter(tmp_path / "d.mrecord", shard_num=SHARDS) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int64"}})
        writer.add_index(["label"])
        writer.write_raw_data([{"id": i, "label": i % 4} for i in range(ROWS)])
    return list(writer.files)


def _kill(first: Path, mode: str, arg: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILLER, str(first), mode, arg],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == -9, done.stderr  # it was killed where asked, not before


def _check(first: Path) -> None:
    """Every committed row is there and the index answers for every label."""
    with DatasetReader.open(first) as reader:
        col = reader.read_rows(range(reader.num_rows)).columns["id"]
        assert sorted(int(v) for v in col) == list(range(ROWS))
    page = MindPage(str(first))
    page.set_category_field("label")
    for label in range(4):
        rows = page.read_at_page_by_name(label, 0, ROWS)
        assert sorted(int(r["id"]) for r in rows) == list(range(label, ROWS, 4))


@pytest.mark.parametrize("shard", [1, SHARDS])
def test_a_kill_while_building_leaves_the_old_index(tmp_path: Path, shard: int) -> None:
    files = _dataset(tmp_path)
    before = {f: Path(f"{f}.db").read_bytes() for f in files}
    _kill(files[0], "build", str(shard))
    assert {f: Path(f"{f}.db").read_bytes() for f in files} == before
    _check(files[0])
    reindex(files[0])  # the next run takes the lock, clears the partials, and commits
    _check(files[0])
    assert not [p.name for p in tmp_path.iterdir() if "partial" in p.name or "journal" in p.name]


@pytest.mark.parametrize("step", ["journal", "renamed_one", "renamed_all"])
def test_a_kill_while_publishing_is_finished_by_the_next_open(tmp_path: Path, step: str) -> None:
    files = _dataset(tmp_path)
    for f in files:
        Path(f"{f}.db").unlink()  # the new index must be the one that is published
    _kill(files[0], "publish", step)
    _check(files[0])  # the reader rolls the commit forward: every .db complete
    assert all(Path(f"{f}.db").is_file() for f in files)
    assert not [p.name for p in tmp_path.iterdir() if "partial" in p.name or "journal" in p.name]
