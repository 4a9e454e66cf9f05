"""Fixtures shared by the storage tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mrecord.storage.readahead as readahead
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
