"""Telling storage (or a server) about blocks before they are read.

A random-access source knows its coming blocks (the order is a pure function), so it
can start what their reads will wait on a few blocks early: ``RemoteDataset`` sends the
server the coming row ids; ``MindDataset`` beyond memory has the chunk heads and label
chunks of the coming rows read into the page cache. :func:`hinting` decides when a
block is announced; :class:`HintThread` runs the announcements off the consumer's thread
(a hint may wait on the disk or the network).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["HintThread", "hinting"]


def hinting(
    chunks: Iterator[np.ndarray], ahead: int, hint: Callable[[np.ndarray], None]
) -> Iterator[np.ndarray]:
    """``chunks`` as they are, pulled ``ahead`` blocks early: each block beyond the first
    ``ahead`` (those are read at once anyway) is passed to ``hint`` when pulled, that is
    ``ahead`` blocks before it is handed on to be read."""
    pending: collections.deque[np.ndarray] = collections.deque()
    pulled = 0
    source = iter(chunks)
    while True:
        while len(pending) <= ahead:
            ids = next(source, None)
            if ids is None:
                break
            if pulled >= ahead:
                hint(ids)
            pulled += 1
            pending.append(ids)
        if not pending:
            return
        yield pending.popleft()


class HintThread:
    """One thread that runs hints in the order they were given, made on first use in each
    process (a forked child makes its own: the parent's thread is not in it)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._executor: tuple[int, ThreadPoolExecutor] | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the thread; a hint is advice, so what it raises is dropped
        (its reads, if they matter, fail again where they are made)."""
        if self._executor is None or self._executor[0] != os.getpid():
            self._executor = (os.getpid(), ThreadPoolExecutor(1, self._name))
        self._executor[1].submit(fn, *args)

    def close(self) -> None:
        """Drop the hints not started and wait for the one running (this process's)."""
        if self._executor is not None and self._executor[0] == os.getpid():
            self._executor[1].shutdown(wait=True, cancel_futures=True)
        self._executor = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_name": self._name, "_executor": None}  # a copy makes its own thread
