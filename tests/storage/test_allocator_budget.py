"""The freed heap glibc keeps for the next batch is bounded by the memory budget: a quarter of
it in a small memory cgroup, ``KEEP_BYTES`` otherwise (``mrecord serve`` in a 300 MB group
kept up to 256 MiB of freed heap and was OOM-killed)."""

from __future__ import annotations

import ctypes
import os

import pytest

import mrecord.storage.probe as probe
from mrecord.storage import allocator


@pytest.mark.parametrize(
    ("budget", "keep"),
    [
        (None, allocator.KEEP_BYTES),  # not known (not Linux)
        (64 << 30, allocator.KEEP_BYTES),  # plenty
        (4 * allocator.KEEP_BYTES, allocator.KEEP_BYTES),  # the boundary
        (200 << 20, 50 << 20),  # a 200 MB group
        (16 << 20, 4 << 20),  # the least budget there is
    ],
)
def test_the_memory_kept_is_a_quarter_of_a_small_budget(
    monkeypatch: pytest.MonkeyPatch, budget: int | None, keep: int
) -> None:
    monkeypatch.setattr(probe, "memory_budget", lambda: budget)
    assert allocator.keep_bytes() == keep


def test_keep_freed_memory_sets_the_bounded_trim_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a fake C library: the trim threshold mallopt gets is keep_bytes()."""
    calls: list[tuple[int, int]] = []

    class Mallopt:
        argtypes: object = None
        restype: object = None

        def __call__(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    class FakeLibc:
        mallopt = Mallopt()

    monkeypatch.setattr(probe, "memory_budget", lambda: 100 << 20)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "MRECORD_KEEP_FREED_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    assert allocator._apply()
    assert (-1, 25 << 20) in calls  # M_TRIM_THRESHOLD
