"""Values of one index field, kept on disk until the ``.db`` takes them.

A shard's ``.db`` gets each row's index-field values at the commit (``index_db``), and
until then a writer had to hold them: as Python objects, ~100 bytes a row for a
string, 537 MB for a writer of 4M rows named by ``file_name``. A :class:`ValueSpill`
keeps the newest values in memory and writes each full block to a file of its own:

    block := numbers:            the values' little-endian bytes in the field's dtype
           | strings and bytes:  one msgpack array of the values (str / bin)

The file is unnamed (``O_TMPFILE`` where the file system has it, else removed the moment
it is made), one shared by the spills of a folder (one descriptor, however many shards),
in the dataset's own folder: on the same disk as the shards, never in a memory-backed
``/tmp``, and nothing to clean up after a crash or a kill. Blocks are read
back in row order by slices (what :func:`~mrecord.storage.index_db.write_index_db`
asks for), the last block read kept decoded.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from mrecord.format.schema import Field
from mrecord.storage.shard_output import pwrite_all

__all__ = ["SPILL_BYTES", "SPILL_ROWS", "ValueSpill"]

SPILL_ROWS = 1 << 14
"""Rows of values held in memory before they go to the file as one block."""

SPILL_BYTES = 1 << 18
"""Or about this many bytes of memory, whichever comes first: a writer of ``k`` shards
holds ``k`` spills' newest values (1,000 shards: 256 MB at most)."""

_OBJECT_BYTES = 64
"""A Python ``str`` or ``bytes`` value's memory beyond its characters, and its list slot."""

_MERGE_PARTS = 32
"""Parts held in memory merged into one past this many."""


class _SpillFile:
    """The unnamed file the spills of one folder share, with its end; closed when the last
    spill using it closes. One a folder, not one a spill: a writer of 1,000 shards indexed
    by two fields held 2,000 and failed with ``EMFILE`` under a soft limit of 1,024."""

    def __init__(self, directory: Path):
        # kept open across calls, closed by release(): no context manager can hold it
        self.file = tempfile.TemporaryFile(dir=directory, prefix=".mrecord-index-")  # noqa: SIM115
        self.end = 0
        self.users = 0

    def append(self, data: bytes) -> int:
        """Write ``data`` at the end (under the registry's lock); its offset."""
        with _files_lock:
            offset = self.end
            self.end += len(data)
        pwrite_all(self.file.fileno(), data, offset)
        return offset

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.file.fileno(), length, offset)


_files: dict[Path, _SpillFile] = {}
_files_lock = threading.Lock()


def _attach(directory: Path) -> _SpillFile:
    with _files_lock:
        shared = _files.get(directory)
        if shared is None:
            shared = _files[directory] = _SpillFile(directory)
        shared.users += 1
        return shared


def _release(shared: _SpillFile, directory: Path) -> None:
    with _files_lock:
        shared.users -= 1
        if shared.users or _files.get(directory) is not shared:
            return
        del _files[directory]
    with contextlib.suppress(OSError):
        shared.file.close()


def _after_fork_in_child() -> None:
    global _files_lock
    _files_lock = threading.Lock()
    _files.clear()  # the parent's file: a child's spills make their own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass(frozen=True)
class _Block:
    start: int  # the block's first row
    rows: int
    offset: int  # in the file
    length: int


class ValueSpill:
    """One field's values, appended in row order, read back by slices of rows.

    ``field`` is a scalar number (values as arrays of its dtype), a string or bytes
    (values as Python lists). ``directory`` is where the unnamed file goes (the dataset's
    folder); it is made with the first full block, so a small shard never makes one.
    """

    def __init__(self, directory: Path, field: Field):
        self._directory = directory
        self._dtype = field.dtype if field.is_scalar else None
        self._file: _SpillFile | None = None  # shared with the folder's other spills
        self._release: weakref.finalize[Any, Any] | None = None
        self._blocks: list[_Block] = []
        self._flushed = 0  # rows in the file
        self._held: list[Any] = []  # values not yet in the file, in parts as appended
        self._held_rows = 0
        self._held_bytes = 0
        self._cached: tuple[int, np.ndarray | list[Any]] | None = None  # (block, values)

    def __len__(self) -> int:
        return self._flushed + self._held_rows

    def append(self, values: np.ndarray | list[Any]) -> None:
        """Add ``values`` (an array for numbers, a list of ``str`` or ``bytes``)."""
        n = len(values)
        if n == 0:
            return
        if self._dtype is not None:
            # A copy: a view would keep the caller's whole batch alive until the flush.
            values = np.array(values, dtype=self._dtype)
            self._held_bytes += values.nbytes
        else:
            self._held_bytes += sum(map(len, values)) + _OBJECT_BYTES * n
        self._held.append(values)
        self._held_rows += n
        if len(self._held) >= _MERGE_PARTS:  # many small parts weigh more than their values
            self._held = [self._joined(self._held)]
        if self._held_rows >= SPILL_ROWS or self._held_bytes >= SPILL_BYTES:
            self.flush()

    def __getitem__(self, rows: slice) -> np.ndarray | list[Any]:
        """Values of rows ``rows.start..rows.stop``, in order (the slice's step is not
        looked at: the ``.db`` writer reads contiguous runs)."""
        start, stop, _ = rows.indices(len(self))
        parts: list[Any] = []
        if start < self._flushed:
            first = self._block_of(start)
            for number in range(first, len(self._blocks)):
                block = self._blocks[number]
                if block.start >= stop:
                    break
                values = self._read(number)
                parts.append(values[max(0, start - block.start) : stop - block.start])
        if stop > self._flushed:
            held = self._held_values()
            parts.append(held[max(0, start - self._flushed) : stop - self._flushed])
        return self._joined(parts)

    def close(self) -> None:
        """Drop the values and the file (idempotent)."""
        if self._release is not None:
            self._release()  # once: also what collecting an unclosed spill does
            self._release = None
        self._file = None
        self._blocks, self._held, self._cached = [], [], None
        self._flushed = self._held_rows = self._held_bytes = 0

    # -- internals ------------------------------------------------------------------------

    def _held_values(self) -> np.ndarray | list[Any]:
        if len(self._held) > 1:  # joined once, so that slices of it stay cheap
            self._held = [self._joined(self._held)]
        return self._held[0] if self._held else self._joined([])

    def _joined(self, parts: list[Any]) -> np.ndarray | list[Any]:
        if self._dtype is not None:
            if not parts:
                return np.zeros(0, dtype=self._dtype)
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        out: list[Any] = []
        for part in parts:
            out.extend(part)
        return out

    def flush(self) -> None:
        """Write the values held in memory to the file now, in blocks of at most
        :data:`SPILL_ROWS` rows (one call's 10M strings are not packed at once)."""
        if not self._held_rows:
            return
        values = self._held_values()
        if self._file is None:
            self._file = _attach(self._directory)
            self._release = weakref.finalize(self, _release, self._file, self._directory)
        for lo in range(0, len(values), SPILL_ROWS):
            part = values[lo : lo + SPILL_ROWS]
            if self._dtype is not None:
                data = np.ascontiguousarray(part, dtype=self._dtype).tobytes()
            else:
                data = msgpack.packb(list(part), use_bin_type=True)
            offset = self._file.append(data)
            self._blocks.append(_Block(self._flushed, len(part), offset, len(data)))
            self._flushed += len(part)
        self._held, self._held_rows, self._held_bytes = [], 0, 0

    def _block_of(self, row: int) -> int:
        lo, hi = 0, len(self._blocks)
        while hi - lo > 1:  # the last block starting at or before ``row``
            mid = (lo + hi) // 2
            if self._blocks[mid].start <= row:
                lo = mid
            else:
                hi = mid
        return lo

    def _read(self, number: int) -> np.ndarray | list[Any]:
        if self._cached is not None and self._cached[0] == number:
            return self._cached[1]
        assert self._file is not None  # blocks exist only once the file does
        block = self._blocks[number]
        data = self._file.read(block.offset, block.length)
        values: np.ndarray | list[Any]
        if self._dtype is not None:
            values = np.frombuffer(data, dtype=self._dtype)
        else:
            values = msgpack.unpackb(data, raw=False)
        self._cached = (number, values)
        return values
