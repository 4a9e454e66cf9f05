"""A bounded local store of pieces of remote shards, evicting by next use.

For a dataset larger than the cache, the shards the cache cannot hold whole are
read by range requests (:mod:`mrecord.remote.ranged`). The bytes of single rows
("pieces": one row's value in one column) that come back are kept here, on local
disk, up to the cache space left for them, and the one dropped when space runs out
is the one read *furthest in the future* (Belady's rule, which is optimal for a
known future), using :class:`~mrecord.remote.plan.ReadPlan`. Under a global shuffle
every row is read once per epoch, so each epoch fetches about ``dataset - cache``
bytes; least-recently-used eviction would drop exactly the rows read soonest.

Layout: one sparse file per shard, each piece at its own offset in the shard, so
no index of where pieces lie is needed beyond which are present. The files are
unlinked as soon as they are made (a crash leaves nothing behind); an evicted
piece's blocks are given back with ``fallocate(PUNCH_HOLE)`` where Linux has it.
Pieces are checked against their digests by the caller, not here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.remote.plan import NEVER, ReadPlan

__all__ = ["Piece", "PieceStore"]

Piece = tuple[int, int, int, Any]
"""(shard number, offset in the shard, global row id, bytes)."""

_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE


def _fallocate() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_FALLOCATE = _fallocate()


class PieceStore:
    """Pieces of remote shards kept under ``folder``, at most ``budget`` bytes."""

    def __init__(self, folder: Path, budget: int, plan: ReadPlan) -> None:
        self.folder = folder
        self.budget = max(0, budget)
        self.plan = plan
        self.used = 0
        self._fds: dict[int, int] = {}
        self._pieces: dict[tuple[int, int], tuple[int, int]] = {}  # -> (row, length)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pieces)

    def get(self, shard: int, offset: int, length: int) -> bytes | None:
        """The stored bytes ``offset:offset + length`` of ``shard``, or None."""
        with self._lock:
            if self._pieces.get((shard, offset), (0, -1))[1] != length:
                return None
            data = os.pread(self._fds[shard], length, offset)
        return data if len(data) == length else None

    def offer(self, pieces: Sequence[Piece]) -> None:
        """Keep what is needed sooner than what is stored (Belady), within the budget."""
        if not self.budget:
            return
        with self._lock:
            fresh = [
                p
                for p in pieces
                if 0 < len(p[3]) <= self.budget and (p[0], p[1]) not in self._pieces
            ]
            if not fresh:
                return
            rows = np.array([p[2] for p in fresh], dtype=np.int64)
            keys = self.plan.next_use(rows)
            fresh = [p for p, k in zip(fresh, keys.tolist(), strict=True) if k != NEVER]
            need = sum(len(p[3]) for p in fresh)
            if self.used + need > self.budget:
                fresh = self._make_room(fresh)
            for shard, offset, row, data in fresh:
                os.pwrite(self._fd(shard), data, offset)
                self._pieces[(shard, offset)] = (row, len(data))
                self.used += len(data)

    def _make_room(self, fresh: list[Piece]) -> list[Piece]:
        """Of the stored and the ``fresh`` pieces, keep those read soonest that fit;
        evict the stored ones that do not; return the fresh ones to write."""
        stored = list(self._pieces.items())
        rows = np.array(
            [row for _, (row, _) in stored] + [p[2] for p in fresh], dtype=np.int64
        )
        sizes = np.array(
            [size for _, (_, size) in stored] + [len(p[3]) for p in fresh], dtype=np.int64
        )
        # Stored first: on equal keys a stable sort keeps what is already here.
        order = np.argsort(self.plan.next_use(rows), kind="stable")
        keep = np.zeros(len(rows), dtype=bool)
        keep[order[np.cumsum(sizes[order]) <= self.budget]] = True
        for (key, (_, size)), kept in zip(stored, keep[: len(stored)].tolist(), strict=True):
            if not kept:
                self._drop(key, size)
        return [p for p, kept in zip(fresh, keep[len(stored) :].tolist(), strict=True) if kept]

    def _drop(self, key: tuple[int, int], size: int) -> None:
        del self._pieces[key]
        self.used -= size
        if _FALLOCATE is not None:
            _FALLOCATE(self._fds[key[0]], _PUNCH_HOLE, key[1], size)  # best effort

    def _fd(self, shard: int) -> int:
        fd = self._fds.get(shard)
        if fd is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f".mrecord-pieces-{os.getpid()}-{id(self)}-{shard}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.unlink(path)  # anonymous from now on: nothing is left after a crash
            self._fds[shard] = fd
        return fd

    def close(self) -> None:
        """Drop every piece and give the disk space back; nothing is kept after this."""
        with self._lock:
            self.budget = 0
            for fd in self._fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()
            self._pieces.clear()
            self.used = 0
