"""Power cuts: every crash state a file system may show after one keeps the last commit.

The quick version of ``python -m reliability.powerloss_campaign`` (docs/RELIABILITY.md).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from reliability import powerloss as pl


def test_recorder_sees_syncs_renames_and_sqlite_writes(tmp_path: Path) -> None:
    """The log holds each file's data sync before the journal's rename, the folder syncs,
    and the .db's bytes though SQLite writes them from C."""
    live = tmp_path / "live"
    live.mkdir()
    rec = pl.record_workload(live, 1, [[10]])
    names: dict[int, str] = {}  # file id -> its first name
    for op in rec.ops:
        if isinstance(op, pl.Names):
            for name, fid in op.changes:
                if fid is not None:
                    names.setdefault(fid, name)
    journal = next(
        i
        for i, op in enumerate(rec.ops)
        if isinstance(op, pl.Names) and ("data.mrecord-journal", op.changes[0][1]) in op.changes
    )
    synced = {names.get(op.fid) for op in rec.ops[:journal] if isinstance(op, pl.Sync)}
    assert {"data.mrecord-partial", "data.db.mrecord-partial"} <= synced
    assert any(isinstance(op, pl.DirSync) for op in rec.ops[journal:])
    db_writes = [op for op in rec.ops if isinstance(op, pl.Write) and op.data[:6] == b"SQLite"]
    assert db_writes
    assert os.fsync is rec._real["fsync"]  # the wrappers are gone after the block


def test_crash_states_keep_synced_data_and_drop_the_rest() -> None:
    """On a hand-made log: synced bytes survive every state; un-synced bytes and an
    un-synced rename appear in some states and not in others."""
    old, new = b"a" * 5000, b"b" * 9000
    ops: list[pl.Op] = [
        pl.Names((("f", 0),), "open"),
        pl.Write(0, old),
        pl.Sync(0),
        pl.DirSync(),
        pl.Write(0, new),
        pl.Names((("g", 0), ("f", None)), "replace"),
    ]
    states = list(pl.crash_states(ops, {}, random.Random(1)))
    final = [s for s in states if s.cut == len(ops)]
    contents = {next(iter(s.files.values())) for s in final}
    assert old in contents and new in contents
    assert any(len(c) == len(new) and c[:4096] == old[:4096] for c in contents)  # torn
    assert {tuple(s.files) for s in final} == {("f",), ("g",)}
    after_sync = [s for s in states if s.cut == 4]
    assert all(s.files == {"f": old} for s in after_sync)


def test_every_ordered_crash_state_keeps_the_last_commit(tmp_path: Path) -> None:
    """Create + append, 1 shard: after a power cut at every op, with un-synced data
    lost, kept or torn and name changes kept in order, the dataset holds the last commit
    that returned or the one in flight, verifies, and the next writer cleans up."""
    result = pl.run_campaign(tmp_path, 1, [[12, 8], [9]], random_per_cut=1, unordered=False)
    assert result.defects == {}
    assert result.outcomes[("ordered", "last finished commit")] > 10
    assert result.outcomes[("ordered", "the commit in flight")] > 2


def test_a_commit_without_folder_fsync_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tester can fail: with the folder fsyncs removed from the commit, a power cut
    after commit() returned loses the commit, and the campaign reports it."""
    from mrecord.storage import commit

    monkeypatch.setattr(commit, "fsync_dir", lambda directory: None)
    result = pl.run_campaign(tmp_path, 1, [[12]], random_per_cut=1, unordered=False)
    defects = result.defects.get("ordered", [])
    assert any("DONE 1" in d and "rows; allowed" in d for d in defects), defects


def test_a_data_file_never_fsynced_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tester sees lost data too: with the shard writer's fsync removed, a power cut
    after the journal is durable publishes a data file whose pages never reached the disk."""
    from mrecord.storage import shard_output

    class NoSync:
        """``os`` for the shard output, less its syncs (looked up late: the recorder wraps)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def fsync(self, fd: int) -> None:
            pass

        def fdatasync(self, fd: int) -> None:
            pass

    monkeypatch.setattr(shard_output, "os", NoSync())
    result = pl.run_campaign(tmp_path, 1, [[12]], random_per_cut=1, unordered=False)
    defects = result.defects.get("ordered", [])
    assert any("data: all lost" in d or "data: only file" in d for d in defects), defects


def test_out_of_order_name_changes_keep_the_last_commit(tmp_path: Path) -> None:
    """As above with name changes persisted in any order (POSIX allows it without an fsync
    of the folder between them): the folder is fsynced before the journal is renamed into
    place, so the names it points to are durable first (this tester found the missing one)."""
    result = pl.run_campaign(tmp_path, 2, [[12], [9]], random_per_cut=1)
    assert result.defects == {}


@pytest.mark.parametrize(("synchronous", "durable"), [("FULL", True), ("OFF", False)])
def test_a_sqlite_commit_is_durable_only_when_sqlite_syncs(
    tmp_path: Path, synchronous: str, durable: bool
) -> None:
    """SQLite fsyncs in C, unseen by the os wrappers: a committed transaction with a journal
    and synchronous=FULL is logged as synced (append grows the .db that way); with
    synchronous=OFF it is not."""
    import sqlite3

    with pl.Recorder(tmp_path) as rec:
        conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE t (v)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("COMMIT")
        conn.close()
    assert any(isinstance(op, pl.Sync) for op in rec.ops) is durable
    assert sqlite3.connect is rec._real_connect
