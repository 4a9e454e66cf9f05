"""glibc keeps freed heap for the next batch only where there is memory to spare: under a
memory budget of 1 GiB (a small memory cgroup) it is left as it is, as bounded memory
matters more there (freed memory is kept per thread arena)."""

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
def test_keep_freed_memory_leaves_glibc_alone_under_a_small_budget(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """With a fake C library: no mallopt call under 1 GiB, KEEP_BYTES above."""
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
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "MRECORD_KEEP_FREED_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    applied = allocator._apply()
    if budget < 1 << 30:
        assert not applied and calls == []
    else:
        assert applied and (-1, allocator.KEEP_BYTES) in calls  # M_TRIM_THRESHOLD
