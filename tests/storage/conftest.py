"""Fixtures shared by the storage tests."""

from __future__ import annotations

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
