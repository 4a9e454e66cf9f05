"""Which chunks of which shard files this process has already checksummed.

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
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

__all__ = ["FileKey", "clear_verified", "file_key", "shared_verified"]

FileKey = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_mtime_ns, metadata offset, metadata crc32)."""

_MAX_RECORDS = 4096
_records: OrderedDict[FileKey, np.ndarray] = OrderedDict()
_lock = threading.Lock()


def _reset_lock_after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a fork may happen while another thread holds it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_after_fork)


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


def clear_verified() -> None:
    """Forget every record: the next read of each chunk is checksummed again."""
    with _lock:
        _records.clear()
