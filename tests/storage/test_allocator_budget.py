"""glibc keeps freed heap for the next batch only where there is memory to spare: under a
memory budget of 1 GiB (a small memory cgroup) bounded memory matters more, and a
server's big blocks go back to the kernel when freed (freed memory is kept per thread
arena)."""

from __future__ import annotations

import os

import pytest

import mrecord.storage.probe as probe
from mrecord.storage import allocator
from tests.storage.conftest import FakeGlibc


@pytest.mark.parametrize(
    ("budget", "small"),
    [
        (None, False),  # not known (not Linux)
        (64 << 30, False),  # plenty
        (4 * allocator.KEEP_BYTES, False),  # the boundary
        (4 * allocator.KEEP_BYTES - 1, True),
        (200 << 20, True),  # a 200 MB group
    ],
)
def test_a_budget_under_1_gib_is_small(
    monkeypatch: pytest.MonkeyPatch, budget: int | None, small: bool
) -> None:
    monkeypatch.setattr(probe, "memory_budget", lambda: budget)
    assert allocator.small_budget() is small


@pytest.mark.parametrize("budget", [100 << 20, 8 << 30])
def test_keep_freed_memory_leaves_glibc_alone_under_a_small_budget(
    monkeypatch: pytest.MonkeyPatch, fake_glibc: FakeGlibc, budget: int
) -> None:
    """With a fake C library: a reader's setting makes no mallopt call under 1 GiB and
    keeps KEEP_BYTES above; a server's (return_freed_blocks) fixes the mmap threshold at
    RETURN_ABOVE under 1 GiB and does nothing above."""
    monkeypatch.setattr(probe, "memory_budget", lambda: budget)
    calls = fake_glibc.mallopt_calls
    applied = allocator._apply()
    if budget < 1 << 30:
        assert not applied and calls == []
    else:
        assert applied and (-1, allocator.KEEP_BYTES) in calls  # M_TRIM_THRESHOLD
    calls.clear()
    returned = allocator.return_freed_blocks()
    if budget < 1 << 30:
        assert returned and calls == [(-3, allocator.RETURN_ABOVE)]  # M_MMAP_THRESHOLD
    else:
        assert not returned and calls == []


def test_a_users_malloc_setting_stands_for_a_server_too(
    monkeypatch: pytest.MonkeyPatch, fake_glibc: FakeGlibc
) -> None:
    monkeypatch.setattr(probe, "memory_budget", lambda: 100 << 20)
    calls = fake_glibc.mallopt_calls
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert not allocator.return_freed_blocks() and calls == []
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("MRECORD_KEEP_FREED_MEMORY", "0")
    assert not allocator.return_freed_blocks() and calls == []


_BIG_BLOCKS = """
import json, os, sys
import numpy as np
import mrecord.storage.probe as probe
from mrecord.storage import allocator
probe.memory_budget = lambda: 200 << 20  # a 200 MB group
allocator.return_freed_blocks()  # as mrecord serve does

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

before = resident()
after = []
for _ in range(4):  # a server's blocks: made, filled, sent, freed
    block = np.ones(25 << 20, dtype=np.uint8)
    del block
    after.append(resident() - before)
print(json.dumps(after))
"""


@pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc only"
)
def test_a_servers_freed_block_leaves_the_process_under_a_small_budget() -> None:
    """A 25 MB block a server freed under a small budget is no longer resident: the next
    ones are not served from arena heaps that keep them (with glibc's dynamic threshold,
    the second block onwards came from the heap and stayed: 26 MB resident after each)."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("MRECORD_KEEP_FREED_MEMORY", None)
    out = subprocess.run(
        [sys.executable, "-c", _BIG_BLOCKS],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    growth = json.loads(out.stdout.strip().splitlines()[-1])
    assert max(growth) < 5 << 20, growth
