"""``mrecord.storage.probe.memory_budget``: the one budget read-ahead windows and block
sizes are cut from, and its rule (``budget_from``) over cgroup trees made here.

The rule: the smallest of (each memory cgroup's limit, from the process's own group up to
the root, less the anonymous memory charged to that group) and ``MemAvailable``, at least
``MIN_BUDGET``; None when nothing can be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrecord.errors import ArgumentError
from mrecord.storage import probe
from mrecord.storage.probe import MIN_BUDGET, budget_from
from tests.memory_groups import need_memory_groups

REPO = Path(__file__).resolve().parents[2]
MB = 1 << 20
MEMINFO = "MemTotal:       24000000 kB\nMemAvailable:    4194304 kB\n"  # 4 GiB available


def _group(root: Path, where: str, limit: str | None, stat: str | None) -> None:
    group = root / where
    group.mkdir(parents=True, exist_ok=True)
    name = "memory.max" if root.name == "v2" else "memory.limit_in_bytes"
    if limit is not None:
        (group / name).write_text(limit + "\n")
    if stat is not None:
        (group / "memory.stat").write_text(stat)


def test_v1_the_tightest_group_up_the_hierarchy_less_its_anonymous_memory(
    tmp_path: Path,
) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _group(v1, "", str(1 << 62), "total_rss 999999999\n")  # the root: no limit
    _group(v1, "job", str(200 * MB), f"rss 0\ntotal_rss {150 * MB}\n")  # 50 MB left
    _group(v1, "job/reader", str(300 * MB), f"total_rss {100 * MB}\n")  # 200 MB left
    cgroup = "5:cpu:/elsewhere\n4:memory:/job/reader\n0::/\n"
    assert budget_from(cgroup, MEMINFO, 10 * MB, v1, v2) == 50 * MB


def test_the_machine_s_available_memory_bounds_a_roomy_group(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _group(v1, "big", str(64 << 30), "total_rss 0\n")
    assert budget_from("4:memory:/big\n", MEMINFO, 0, v1, v2) == 4 << 30
    # No group with a limit at all: MemAvailable alone.
    assert budget_from("4:memory:/\n", MEMINFO, 0, v1, v2) == 4 << 30


def test_without_a_stat_the_process_s_own_anonymous_memory_is_subtracted(
    tmp_path: Path,
) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _group(v1, "g", str(300 * MB), None)
    assert budget_from("4:memory:/g\n", MEMINFO, 120 * MB, v1, v2) == 180 * MB


def test_v2_memory_max_less_anon_and_max_means_no_limit(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _group(v2, "a", "max", "anon 1\n")
    _group(v2, "a/b", str(500 * MB), f"file 123\nanon {200 * MB}\n")
    assert budget_from("0::/a/b\n", MEMINFO, 0, v1, v2) == 300 * MB
    assert budget_from("0::/a\n", MEMINFO, 0, v1, v2) == 4 << 30


def test_a_group_already_over_its_limit_still_gets_the_minimum(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _group(v1, "full", str(100 * MB), f"total_rss {140 * MB}\n")
    assert budget_from("4:memory:/full\n", MEMINFO, 0, v1, v2) == MIN_BUDGET


def test_nothing_readable_means_unknown(tmp_path: Path) -> None:
    assert budget_from(None, None, None, tmp_path / "v1", tmp_path / "v2") is None


def test_the_readers_use_the_one_budget() -> None:
    """``DatasetReader``'s module (and so ``MindDataset``'s window) and the block layout
    take ``memory_budget`` from ``storage/probe.py``: there is no second rule."""
    import mrecord.reader.dataset_reader as dataset_reader
    import mrecord.reader.layout as layout
    import mrecord.storage.readahead as readahead

    assert dataset_reader.memory_budget is probe.memory_budget
    assert layout.memory_budget is probe.memory_budget
    assert not hasattr(readahead, "memory_budget")


def test_what_is_sized_once_a_process_takes_its_first_measure_without_reading_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The buffer pool's free slabs and the shared heads' bound are sized once, from the
    budget the process first measured (a reader measures it when it is made): a cold
    epoch's first blocks do not read ``/proc`` and the cgroup files again on their way
    to their first reads."""
    import mrecord.storage.buffer_pool as buffer_pool
    import mrecord.storage.verified as verified

    monkeypatch.setattr(probe, "_first_budget", [])
    monkeypatch.setattr(probe, "budget_from", lambda *args: 400 << 20)  # a 400 MB room
    assert probe.memory_budget() == 400 << 20
    monkeypatch.setattr(probe, "budget_from", lambda *args: 100 << 20)  # the room shrinks
    assert probe.memory_budget() == 100 << 20
    read: list[object] = []
    monkeypatch.setattr(probe, "_read_text", lambda path: read.append(path))
    monkeypatch.setattr(buffer_pool, "_keep", None)
    assert buffer_pool.keep_bytes() == min(buffer_pool.KEEP_MAX, (400 << 20) // 8)
    assert verified._head_budget() == min(
        verified._HEAD_BUDGET,
        (400 << 20) // (verified._HEADS_SHARE * verified._BYTES_PER_OFFSET),
    )
    assert probe.first_memory_budget() == 400 << 20
    assert read == []


_CHILD = """
import json, numpy
from mrecord.storage.probe import memory_budget
filler = numpy.ones(40 << 20, dtype=numpy.uint8)  # 40 MB of anonymous memory, touched
print(json.dumps({"budget": memory_budget()}))
"""


def test_inside_a_real_memory_cgroup_the_budget_leaves_out_what_the_group_holds() -> None:
    root = Path("/sys/fs/cgroup/memory")
    need_memory_groups("a child in a 200 MB memory group")
    group = root / f"beyondram-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(200 * MB))
        proc = subprocess.run(
            [
                "sh",
                "-c",
                f'echo $$ > {group / "cgroup.procs"} && exec "$@"',
                "sh",
                sys.executable,
                "-c",
                _CHILD,
            ],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-800:]
        budget = json.loads(proc.stdout.strip().splitlines()[-1])["budget"]
        # The interpreter, numpy and the 40 MB filler are charged to the group.
        assert MIN_BUDGET <= budget <= 200 * MB - 40 * MB
    finally:
        group.rmdir()


def test_processes_that_share_the_memory_each_get_their_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DataLoader workers (``share_memory_budget``) and a host's ranks (``LOCAL_WORLD_SIZE``)
    each size their read-ahead from their share: 4 workers each sizing from the whole of
    a 300 MB group stalled at its limit (``tests/torch/test_torch_memory.py``)."""
    import mrecord.storage.buffer_pool as buffer_pool

    monkeypatch.setattr(probe, "_first_budget", [])
    monkeypatch.setattr(probe, "_workers", [1])
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(probe, "budget_from", lambda *args: 400 << 20)
    monkeypatch.setattr(buffer_pool, "_keep", None)
    assert probe.memory_budget() == 400 << 20 and probe.budget_sharers() == 1
    assert buffer_pool.keep_bytes() == min(buffer_pool.KEEP_MAX, (400 << 20) // 8)
    probe.share_memory_budget(4)  # a worker of four, after its parent measured
    assert probe.budget_sharers() == 4
    assert probe.memory_budget() == 100 << 20
    assert probe.first_memory_budget() == 100 << 20  # the parent's measure, shared
    assert buffer_pool.keep_bytes() == min(buffer_pool.KEEP_MAX, (100 << 20) // 8)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # eight ranks, four workers each
    assert probe.budget_sharers() == 32
    assert probe.memory_budget() == probe.MIN_BUDGET  # never below a few rows' window
    for unset in ("", "0", "-2", "many"):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", unset)
        assert probe.budget_sharers() == 4
    for bad in (0, -1, True, 2.0, "4"):
        with pytest.raises(ArgumentError, match="processes must be an int >= 1"):
            probe.share_memory_budget(bad)  # type: ignore[arg-type]
    assert probe.budget_sharers() == 4


def test_files_that_fit_the_whole_memory_are_not_beyond_any_sharers_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers and ranks read the same files through one page cache: whether the files are
    beyond memory (and so read around the cache) is asked of the whole memory, not of a
    process's share of it."""
    from mrecord import DatasetReader, FileWriter

    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.write_raw_data([{"id": i, "blob": bytes(10_000)} for i in range(100)])
    size = sum(shard.size for shard in DatasetReader.open(path).shards)
    monkeypatch.setattr(probe, "_workers", [1])
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(DatasetReader, "_memory_budget", lambda self: size // 3)
    assert DatasetReader.open(path).beyond_memory  # a third of the files' size: beyond
    probe.share_memory_budget(4)  # that third is a quarter's share: the whole holds them
    assert not DatasetReader.open(path).beyond_memory
    monkeypatch.setattr(DatasetReader, "_memory_budget", lambda self: size // 5)
    assert DatasetReader.open(path).beyond_memory  # four fifths of them: beyond
