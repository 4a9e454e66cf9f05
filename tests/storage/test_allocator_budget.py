"""glibc keeps freed heap for the next batch only where there is memory to spare: under a
memory budget of 1 GiB (a small memory cgroup) bounded memory matters more, and big
blocks go back to the kernel when freed instead (freed memory is kept per thread arena)."""

from __future__ import annotations

import ctypes
import os

import pytest

import mrecord.storage.probe as probe
from mrecord.storage import allocator


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
def test_under_a_small_budget_big_blocks_go_back_instead_of_being_kept(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """With a fake C library: under 1 GiB only a fixed mmap threshold of RETURN_ABOVE
    (glibc's dynamic one kept a server's freed blocks in its arenas until it was
    OOM-killed in a 300 MB group); above, KEEP_BYTES kept."""
    calls: list[tuple[int, int]] = []

    class Mallopt:
        argtypes: object = None
        restype: object = None

        def __call__(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    class FakeLibc:
        mallopt = Mallopt()

    monkeypatch.setattr(probe, "memory_budget", lambda: budget)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    for name in (
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TOP_PAD_",
        "MRECORD_KEEP_FREED_MEMORY",
    ):
        monkeypatch.delenv(name, raising=False)
    applied = allocator._apply()
    if budget < 1 << 30:
        assert not applied and calls == [(-3, allocator.RETURN_ABOVE)]  # M_MMAP_THRESHOLD
    else:
        assert applied and (-1, allocator.KEEP_BYTES) in calls  # M_TRIM_THRESHOLD


_BIG_BLOCKS = """
import json, os, sys
import numpy as np
import mrecord.storage.probe as probe
from mrecord.storage import allocator
probe.memory_budget = lambda: 200 << 20  # a 200 MB group
allocator.keep_freed_memory()

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
def test_under_a_small_budget_a_freed_block_leaves_the_process() -> None:
    """A 25 MB block freed under a small budget is no longer resident: the next ones are
    not served from arena heaps that keep them (with glibc's dynamic threshold, the
    second block onwards came from the heap and stayed)."""
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
