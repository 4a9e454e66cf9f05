"""A shard read with range requests, for a file the cache cannot hold.

:class:`RangeShardFile` is a :class:`~mrecord.storage.shard.ShardFile` whose bytes come
from :class:`RangeBytes` instead of a memory map: the header, trailer and metadata
are read first (three small requests), then each chunk when a row in it is read,
through a small LRU of fixed-size blocks. Checksums are checked exactly as for a
local file. Global whole-file gathers need a map, so every column goes page by page.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from mrecord.errors import CorruptFileError
from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE
from mrecord.format.schema import Field
from mrecord.remote.fs import RemoteFile
from mrecord.storage.shard import ShardFile

__all__ = ["RangeBytes", "RangeShardFile"]

BLOCK_BYTES = 4 << 20
MAX_BLOCKS = 16


class RangeBytes:
    """A remote file's bytes, sliced like a memoryview; fetched block by block on demand."""

    def __init__(self, remote: RemoteFile, block: int = BLOCK_BYTES, max_blocks: int = MAX_BLOCKS):
        self.remote = remote
        self.block = block
        self.max_blocks = max_blocks
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.remote.size

    def __getitem__(self, key: slice) -> bytes | memoryview:
        if not isinstance(key, slice):
            raise TypeError(f"RangeBytes takes slices, got {key!r}")
        start, stop, step = key.indices(self.remote.size)
        if step != 1:
            raise ValueError("RangeBytes slices must be contiguous")
        if stop <= start:
            return b""
        if stop - start >= self.block:
            return self.remote.read_range(start, stop)  # a big chunk: one request, not cached
        # Within one block (most chunks): a view of it, no copy; across blocks: just the range.
        parts = []
        for i in range(start // self.block, (stop - 1) // self.block + 1):
            base = i * self.block
            view = memoryview(self._get_block(i))
            parts.append(view[max(start - base, 0) : min(stop - base, len(view))])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _get_block(self, index: int) -> bytes:
        # One fetch at a time per file: reader threads missing the same block wait for the
        # first one's request instead of each sending their own.
        with self._lock:
            hit = self._blocks.get(index)
            if hit is not None:
                self._blocks.move_to_end(index)
                return hit
            start = index * self.block
            data = self.remote.read_range(start, min(start + self.block, self.remote.size))
            self._blocks[index] = data
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)
            return data

    def release(self) -> None:
        """Nothing to release (the memoryview API ShardFile.close calls)."""

    def close(self) -> None:
        """Drop the cached blocks."""
        with self._lock:
            self._blocks.clear()


class RangeShardFile(ShardFile):
    """A remote shard read by range requests; ``path`` is where its cached ``.db`` lies."""

    def __init__(self, remote: RemoteFile, path: Path, verify: str = "once"):
        self.remote = remote
        super().__init__(path, verify=verify)

    def _open_bytes(self) -> tuple[int, RangeBytes]:
        if self.remote.size < HEADER_SIZE + TRAILER_SIZE:
            raise CorruptFileError(
                f"{self.remote.url!r} is {self.remote.size} bytes, too short to be an mrecord "
                "shard",
                path=self.remote.url,
                offset=0,
            )
        return self.remote.size, RangeBytes(self.remote)

    def _bytes_view(self) -> RangeBytes:
        return self._mm  # type: ignore[return-value]

    def uncompressed_fixed(self, field: Field) -> bool:
        """Always False: whole-file gathers need a memory map; pages are read one by one."""
        return False
