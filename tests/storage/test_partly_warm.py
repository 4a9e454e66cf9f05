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

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter
from mrecord.storage.readahead import hint_rows, looks_resident, resident_pages
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


def test_a_block_whose_chunk_heads_alone_are_in_memory_is_cold(tmp_path: Path) -> None:
    """The warm test stands in for a row whose chunk head is not parsed yet with a page
    among the chunk's values, not with the head: a lookahead asks for heads alone, and a
    file-order block beyond memory whose heads it had brought in was taken for warm and
    read from the map (a 763 MB group over 2.4 GB hit its limit 6,700-93,000 times an
    epoch, at a third of the rate)."""
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"blob": {"type": "bytes"}})
        writer.set_page_size(1 << 18)  # six 40 KB values a chunk
        writer.write_raw_data([{"blob": bytes([i]) * 40_000} for i in range(60)])
    clear_verified()
    with DatasetReader.open(path, verify="never") as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        chunks = shard.meta.chunks
        fd = os.open(path, os.O_RDONLY)
        try:
            shard.mm.madvise(mmap.MADV_DONTNEED)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            middles = [
                resident_pages(shard, int(c["offset"]) + int(c["length"]) // 2, 1)
                for c in chunks[:, col]
            ]
            if any(pages is None or pages.any() for pages in middles):
                pytest.skip(f"this file system keeps {path} in memory (tmpfs?): nothing to test")
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            for page in range(len(chunks)):  # the heads only, as a lookahead asks for them
                offset, length = shard.head_range(page, col)
                os.pread(fd, length, offset)
        finally:
            os.close(fd)
        ids = np.arange(60)
        pages = np.searchsorted(shard.page_starts, ids, side="right") - 1
        slots = ids - shard.page_starts[pages]
        assert hint_rows(shard, pages, slots, ["blob"], beyond_memory=True) > 0  # cold
        got = reader.read_rows(ids).columns["blob"]
        assert [bytes(v) for v in got] == [bytes([i]) * 40_000 for i in range(60)]
