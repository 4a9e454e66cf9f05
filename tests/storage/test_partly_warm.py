"""A block is warm only when its rows are in memory, wherever in the file they lie.

The warm test looks up a sample of a block's ranges (``readahead.looks_resident``). The
ranges come in file order; taking the first sixteen of fewer than thirty-two looked at one
part of the file only, so a file whose first half was in the page cache (a pass over part
of it, another reader) had its random blocks taken for warm and read from the map one
4 KiB fault at a time: 15,391 major faults where the same read of a wholly cold file had
none, at 0.6x its rate."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from mrecord import DatasetReader, FileWriter
from mrecord.storage.readahead import looks_resident, resident_pages
from mrecord.storage.verified import clear_verified


def test_a_file_half_in_memory_does_not_look_warm(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.set_page_size(1 << 16)
        writer.write_raw_data([{"blob": bytes([i]) * 40_000} for i in range(31)])
    clear_verified()
    with DatasetReader.open(path, verify="never") as reader:  # nothing read through the map
        shard = reader.shards[0]
        _, offsets, lengths = reader.locate_bytes(list(range(31)), "blob")
        ranges = sorted(zip(offsets.tolist(), lengths.tolist(), strict=True))
        fd = os.open(path, os.O_RDONLY)
        try:
            # Out of this process's page tables (reading the heads mapped their
            # neighbours in), then out of the page cache.
            shard.mm.madvise(mmap.MADV_DONTNEED)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            values = [resident_pages(shard, offset, length) for offset, length in ranges]
            if any(pages is None or pages.any() for pages in values):
                pytest.skip(f"this file system keeps {path} in memory (tmpfs?): nothing to test")
            middle = ranges[16][0]  # the first 16 values in memory, the last 15 not
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead past them
            os.pread(fd, middle, 0)
        finally:
            os.close(fd)
        assert looks_resident(shard, ranges[:16])
        assert not looks_resident(shard, ranges[16:])
        assert not looks_resident(shard, ranges)
