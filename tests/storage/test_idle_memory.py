"""Memory a reader kept for its next reads goes back when a run ends, under a small
memory budget: the buffer pools' free slabs and glibc's freed heap (``malloc_trim``).
Without it a file-order epoch in a 100 MB group left 46 MB of anonymous memory behind and
the same process's next read crawled (tests/storage/test_beyond_ram.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.storage.probe as probe
from mrecord import FileWriter, MindDataset
from mrecord.pipeline.engine.context import ExecContext
from mrecord.reader import dataset_reader
from mrecord.storage import allocator
from mrecord.storage.buffer_pool import SLAB_ROUND, BufferPool, release_free_slabs
from tests.storage.conftest import FakeGlibc

_GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")


def _pool_with_free_slabs(pool: BufferPool | None = None) -> BufferPool:
    pool = pool or BufferPool(keep_bytes=8 * SLAB_ROUND)
    buffers = [pool.take(SLAB_ROUND) for _ in range(3)]
    del buffers  # their slabs go back to the pool, free
    assert pool.free_bytes == 3 * SLAB_ROUND
    return pool


def test_every_pool_lets_go_of_its_free_slabs_not_of_those_in_use() -> None:
    pool = BufferPool(keep_bytes=8 * SLAB_ROUND)
    held = pool.take(SLAB_ROUND)
    held[:] = 5
    _pool_with_free_slabs(pool)
    released = release_free_slabs()
    assert released >= 3 * SLAB_ROUND and pool.free_bytes == 0
    assert bool((held == 5).all())  # a buffer still viewed is untouched...
    del held
    assert pool.free_bytes == SLAB_ROUND  # ...and comes back, kept, when let go


def test_a_pool_busy_in_this_thread_is_left_as_it_is() -> None:
    """A run can end in a finalizer the garbage collector runs inside the pool's own code,
    its lock held by the same thread: the release gives nothing back there, and returns."""
    pool = _pool_with_free_slabs()
    with pool._lock:
        assert pool.release_free() == 0
    assert pool.free_bytes == 3 * SLAB_ROUND
    assert pool.release_free() == 3 * SLAB_ROUND and pool.free_bytes == 0


def test_idle_memory_goes_back_under_a_small_budget_only(
    monkeypatch: pytest.MonkeyPatch, fake_glibc: FakeGlibc
) -> None:
    """A 200 MB group: free slabs released and the heap trimmed. 8 GiB to spare: both kept
    for the next reads. A user who asked for glibc as it is: slabs released, no trim."""
    calls = fake_glibc.trim_calls
    monkeypatch.setattr(probe, "memory_budget", lambda: 8 << 30)
    pool = _pool_with_free_slabs()
    assert allocator.return_idle_memory() == 0
    assert pool.free_bytes == 3 * SLAB_ROUND and calls == []

    monkeypatch.setattr(probe, "memory_budget", lambda: 200 << 20)
    assert allocator.return_idle_memory() >= 3 * SLAB_ROUND
    assert pool.free_bytes == 0 and calls == [0]

    calls.clear()
    pool = _pool_with_free_slabs()
    monkeypatch.setenv("MRECORD_KEEP_FREED_MEMORY", "0")
    assert allocator.return_idle_memory() >= 3 * SLAB_ROUND
    assert pool.free_bytes == 0 and calls == []


_FREED_HEAP = """
import json, os
import mrecord.storage.probe as probe
from mrecord.storage import allocator
probe.memory_budget = lambda: 100 << 20  # a 100 MB group

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

before = resident()
values = [bytearray(64 << 10) for _ in range(1024)]  # 64 MiB of heap, under the mmap threshold
last = bytearray(64 << 10)  # on top of the heap: its top cannot shrink past it
del values
freed = resident() - before
allocator.return_idle_memory()
print(json.dumps([freed, resident() - before]))
"""


@pytest.mark.skipif(not _GLIBC, reason="malloc_trim is glibc's")
def test_freed_heap_memory_leaves_the_process_under_a_small_budget() -> None:
    """64 MiB of small values freed below a live one stay resident in glibc's heap; given
    back, they leave the process (a process without the trim keeps them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("MRECORD_KEEP_FREED_MEMORY", None)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FREED_HEAP)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    freed, after = json.loads(out.stdout)
    assert freed > 48 << 20  # freed, still resident
    assert after < 16 << 20


def test_a_context_runs_its_close_callbacks_once_after_its_pools() -> None:
    ctx = ExecContext(None)  # type: ignore[arg-type]  # no graph: callbacks only
    events: list[str] = []

    class Pool:
        def shutdown(self) -> None:
            events.append("pool")

    key = object()
    ctx.pool(key, Pool)
    ctx.at_close(key, lambda: events.append("first"))
    ctx.at_close(key, lambda: events.append("second"))  # the same key: once
    ctx.at_close(object(), lambda: events.append("other"))
    ctx.close()
    ctx.close()
    ctx.at_close(object(), lambda: events.append("late"))  # a closed run: nothing
    assert events == ["pool", "first", "other"]


def _dataset(path: Path) -> str:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(100)})
    return str(path)


def _count_returns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(dataset_reader, "return_idle_memory", lambda: calls.append(1))
    return calls


@pytest.mark.parametrize("num_epochs", [1, 2])
def test_a_mind_dataset_run_gives_back_idle_memory_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, num_epochs: int
) -> None:
    """Once, when the last epoch has been read: not between epochs (the next one reuses
    the buffers)."""
    calls = _count_returns(monkeypatch)
    ds = MindDataset(_dataset(tmp_path / "d.mrecord"), shuffle=False).batch(10)
    it = ds.create_tuple_iterator(num_epochs=num_epochs, output_numpy=True)
    seen: list[Any] = []
    for epoch in range(num_epochs):
        seen.extend(it)
        assert calls == ([1] if epoch == num_epochs - 1 else [])
    assert len(seen) == 10 * num_epochs


def test_a_run_stopped_in_the_middle_gives_back_idle_memory_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_returns(monkeypatch)
    ds = MindDataset(_dataset(tmp_path / "d.mrecord"), shuffle=False).batch(10)
    it = ds.create_tuple_iterator(num_epochs=3, output_numpy=True)
    next(it)
    assert calls == []
    it.stop()
    assert calls == [1]
