"""Fixtures shared by the storage tests."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mrecord.storage.readahead as readahead
from mrecord.storage import kernel_aio
from mrecord.storage.verified import clear_verified


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every block is taken as cold (hinted, its chunks checksummed as they arrive, its
    values copied out), with no chunk verified before or after."""
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    clear_verified()
    yield
    clear_verified()


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every ``os.preadv`` of this process as (offset, bytes read), from any thread, and
    every direct read batched through native AIO (``kernel_aio.read_batch``, counted as
    asked when the batch read them all)."""
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    real = os.preadv
    real_batch = kernel_aio.read_batch

    def spy(fd: int, buffers: list[memoryview], offset: int, *rest: int) -> int:
        got = real(fd, buffers, offset, *rest)
        with lock:
            seen.append((offset, got))
        return got

    def spy_batch(fd: int, buffer: Any, places: list[tuple[int, int, int, int]]) -> bool | None:
        done = real_batch(fd, buffer, places)
        if done:
            with lock:
                seen.extend((offset, span) for _, offset, span, _ in places)
        return done

    monkeypatch.setattr(os, "preadv", spy)
    monkeypatch.setattr(readahead, "read_batch", spy_batch)
    return seen


class FakeGlibc:
    """What the allocator asked of a fake glibc: ``mallopt`` calls as ``(param, value)``,
    ``malloc_trim`` calls as their pad argument."""

    def __init__(self) -> None:
        self.mallopt_calls: list[tuple[int, int]] = []
        self.trim_calls: list[int] = []
        self.mallopt = self._Recorder(lambda *args: self.mallopt_calls.append(args))
        self.malloc_trim = self._Recorder(lambda pad: self.trim_calls.append(pad))

    class _Recorder:
        argtypes: object = None
        restype: object = None

        def __init__(self, record: Any) -> None:
            self._record = record

        def __call__(self, *args: int) -> int:
            self._record(*args)
            return 1


@pytest.fixture
def fake_glibc(monkeypatch: pytest.MonkeyPatch) -> FakeGlibc:
    """The C library is a :class:`FakeGlibc` (glibc 2.36), with none of the user's
    ``MALLOC_*`` or ``MRECORD_KEEP_FREED_MEMORY`` settings; set the memory budget with
    ``monkeypatch.setattr(probe, "memory_budget", ...)``."""
    libc = FakeGlibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    for name in (
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TOP_PAD_",
        "MRECORD_KEEP_FREED_MEMORY",
    ):
        monkeypatch.delenv(name, raising=False)
    return libc
