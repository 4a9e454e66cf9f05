"""Which chunks of which shard files this process has already checksummed, and the
parsed heads of their variable-size chunks.

``verify="once"`` promises one checksum pass per chunk per process. Each
:class:`~mrecord.storage.shard.ShardFile` used to keep its own record, so a second reader
of the same file (a new ``MindDataset`` per epoch, an evaluation pass, a DataLoader
worker's own reader) paid the whole pass again: for image datasets the checksum is most
of the cost of a first read. Readers of the same committed file now share one record.

A record is keyed by the file's identity *and* its committed contents: device, inode,
modification time, and the trailer's metadata offset and checksum. Replacing the file
(a new inode), writing to it (a new modification time) or appending a commit (new
metadata) gives a new key, so nothing verified against older bytes is trusted for newer
ones. Forked processes (DataLoader workers, pipeline worker processes) inherit the
records of their parent, which describe the same bytes.

The table is bounded (least recently opened records are dropped first); a dropped
record only means those chunks are checked again.

The same key also shares the parsed heads (offsets and shapes) of variable-size chunks
(:func:`shared_heads`): a fresh reader of an images dataset otherwise parses every page's
head again. Shared heads hold no view of any reader's map, and all of them
together hold at most 2M offsets.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from mrecord.storage.probe import first_memory_budget

__all__ = [
    "FileKey",
    "HeadCache",
    "clear_verified",
    "file_key",
    "head_cache_bytes",
    "kept_head_bytes",
    "shared_heads",
    "shared_verified",
]

FileKey = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_mtime_ns, metadata offset, metadata crc32)."""

_MAX_RECORDS = 4096
_records: OrderedDict[FileKey, np.ndarray] = OrderedDict()
_lock = threading.Lock()


def _reset_lock_after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a fork may happen while another thread holds it
    _shared_store.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_after_fork)


class _HeadStore:
    """An LRU of parsed heads bounded by their total number of offsets, a variable-shape
    chunk's shapes counted by their bytes (:func:`_weight`); ``budget`` None: worked out
    from the process's memory budget at the first ``put`` (:func:`_head_budget`)."""

    def __init__(self, budget: int | None) -> None:
        self.items: OrderedDict[tuple[Any, int, int], Any] = OrderedDict()
        self.budget = budget
        self.total = 0
        self.lock = threading.Lock()

    def put(self, key: tuple[Any, int, int], head: Any) -> None:
        with self.lock:
            self._put(key, head)

    def _put(self, key: tuple[Any, int, int], head: Any) -> None:
        """``put``'s work; the caller holds the lock."""
        if self.budget is None:
            self.budget = _head_budget()
        old = self.items.pop(key, None)
        if old is not None:
            self.total -= _weight(old)
        self.items[key] = head
        self.total += _weight(head)
        while self.total > self.budget and len(self.items) > 1:
            _, dropped = self.items.popitem(last=False)
            self.total -= _weight(dropped)

    def put_many(self, items: list[tuple[tuple[Any, int, int], Any]]) -> None:
        """``put`` each ``(key, head)`` of ``items``, in order, under one hold of the lock."""
        with self.lock:
            for key, head in items:
                self._put(key, head)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.total = 0


_HEAD_BUDGET = 2_000_000  # offsets (Python ints) kept in all: ~96 MB at most
_BYTES_PER_OFFSET = 48
"""What one offset of a kept head costs: a Python int in the list and its place in
``offsets_array``."""
_HEADS_SHARE = 10
"""Heads keep at most ``1 / _HEADS_SHARE`` of the process's memory budget, by their bytes
(:func:`_weight`). A quarter, with heads of 64 rows or more weighed as list offsets (six
times their bytes), held about as many small variable-shape heads as a tenth of their true
bytes does; a quarter of their true bytes got a reader of 3M small rows in a 100 MB group
OOM-killed (tests/storage/test_beyond_ram.py)."""


def _weight(head: Any) -> int:
    """A head's cost in offsets of a list (``_BYTES_PER_OFFSET`` bytes each): its offsets at
    what they cost as kept (a list's Python ints, or 4 or 8 bytes each in the ``array`` of a
    head of 64 rows or more, :func:`~mrecord.format.chunks.kept_offsets`), and its shapes (a
    variable-shape chunk's ``shapes`` array, as narrow as its dimensions allow,
    :func:`~mrecord.format.chunks.kept_shapes`) by their bytes. Counting array-kept offsets
    as list ones made the heads of 2M small variable-shape rows (48 MB) weigh 128 MB: a
    quarter of them were parsed again and again in a warm GLOBAL epoch, with memory to
    spare."""
    offsets = head.offsets
    count = len(offsets)
    if not isinstance(offsets, list):
        count = (count * offsets.itemsize) // _BYTES_PER_OFFSET + 1
    shapes = getattr(head, "shapes", None)
    return count + (int(shapes.nbytes) // _BYTES_PER_OFFSET if shapes is not None else 0)


def kept_head_bytes(head: Any) -> int:
    """The bytes the head cache counts ``head`` at (a parsed head, as kept): what it holds
    of the cache's :func:`head_cache_bytes`."""
    return _weight(head) * _BYTES_PER_OFFSET


def _head_budget() -> int:
    """Offsets kept in all: ``_HEAD_BUDGET``, or less where a memory group leaves less
    (a tenth of ``first_memory_budget``). Unbounded by it, the heads of 600K variable-shape
    rows (~75 MB with the tuples their shapes were kept as then) grew a reader in a 200 MB
    group to its limit in its second epoch, where it hit the limit 5.6M times and
    thrashed; at an eighth (heads weighed as list offsets then), GLOBAL reads of them
    parsed most heads again from the cold map for every block, at half the rate."""
    budget = first_memory_budget()
    if budget is None:
        return _HEAD_BUDGET
    return min(_HEAD_BUDGET, budget // (_HEADS_SHARE * _BYTES_PER_OFFSET))


def head_cache_bytes() -> int:
    """The bytes of parsed heads the process-wide cache keeps at most (heads weighed by
    :func:`_weight`): what a reader of rows one by one can count on finding parsed again
    (``DatasetReader.sweep_rows`` weighs the heads it cannot keep)."""
    budget = _shared_store.budget
    return (budget if budget is not None else _head_budget()) * _BYTES_PER_OFFSET


_shared_store = _HeadStore(None)  # its budget set at the first put


class HeadCache:
    """Parsed chunk heads of one file, ``(page, col) -> head``: a window on the
    process-wide store (bounded in all), or a private store for a non-local file."""

    def __init__(self, key: FileKey | None) -> None:
        self._key = key
        self._store = _shared_store if key is not None else _HeadStore(_head_budget())

    def get(self, page_col: tuple[int, int]) -> Any:
        """The head stored for (page, col), or None."""
        return self._store.items.get((self._key, *page_col))

    def put(self, page_col: tuple[int, int], head: Any) -> None:
        """Store ``head`` for (page, col); the least recently stored heads go first."""
        self._store.put((self._key, *page_col), head)

    def put_many(self, items: list[tuple[tuple[int, int], Any]]) -> None:
        """``put`` each ``((page, col), head)`` of ``items`` (one hold of the store's lock)."""
        key = self._key
        self._store.put_many([((key, *page_col), head) for page_col, head in items])


def file_key(stat: os.stat_result, metadata_offset: int, metadata_crc32: int) -> FileKey:
    """The key of one committed state of one file (see the module docstring)."""
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, metadata_offset, metadata_crc32)


def shared_verified(key: FileKey | None, shape: tuple[int, int]) -> np.ndarray:
    """The process-wide ``(pages, columns)`` bool record for ``key`` (new: all False).

    ``key=None`` (bytes that are not a local file) gives a private record.
    """
    if key is None:
        return np.zeros(shape, dtype=bool)
    with _lock:
        record = _records.get(key)
        if record is None or record.shape != shape:
            record = np.zeros(shape, dtype=bool)
            _records[key] = record
            while len(_records) > _MAX_RECORDS:
                _records.popitem(last=False)
        else:
            _records.move_to_end(key)
        return record


def shared_heads(key: FileKey | None) -> HeadCache:
    """The head cache of the file with ``key`` (``None``: a private one)."""
    return HeadCache(key)


def clear_verified() -> None:
    """Forget every record (and every shared head): the next read of each chunk is
    checksummed again."""
    with _lock:
        _records.clear()
    _shared_store.clear()
