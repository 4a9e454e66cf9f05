"""A shard's chunk directory, kept as Python values for per-row reads, leaves nothing per
page for the garbage collector to walk: a full collection stops every reading thread
(~10 ms for 44K tracked objects on the development machine), and a 140 GB dataset of
1 MiB pages has ~140K pages per column table."""

from __future__ import annotations

import gc
from pathlib import Path

from mrecord import FileWriter
from mrecord.storage.shard import ShardFile


def _tracked_after_open(path: Path) -> int:
    with ShardFile(path) as shard:
        shard.index_part(0, 0)  # the head index too (format 1.4): its starts per page
        gc.collect()  # a first collection stops tracking what needs no walk
        return len(gc.get_objects())


def test_a_shards_directory_adds_no_tracked_object_per_page(tmp_path: Path) -> None:
    counts = {}
    for pages in (20, 400):
        path = tmp_path / f"d{pages}.mrecord"
        with FileWriter(path) as writer:
            writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
            writer.set_page_size(4096)
            writer.write_raw_data([{"id": i, "blob": bytes(5000)} for i in range(pages)])
        with ShardFile(path) as shard:
            assert shard.meta.num_pages >= pages  # one row a page
        _tracked_after_open(path)  # imports and caches of a first open out of the count
        counts[pages] = _tracked_after_open(path)
    assert counts[400] - counts[20] < 100, counts
