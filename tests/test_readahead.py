"""Read-ahead hints (ShardFile.will_need, storage.readahead) never change what a read returns."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mrecord import DatasetReader, FileWriter
from mrecord.storage.shard import ShardFile

SCHEMA = {"x": {"type": "int64"}, "blob": {"type": "bytes"}}


def _write(path: Path, rows: int, shards: int = 1) -> None:
    writer = FileWriter(str(path), shard_num=shards)
    writer.add_schema(SCHEMA)
    writer.set_page_size(1 << 12)
    writer.write_raw_data(
        [{"x": i, "blob": bytes([i % 251]) * (100 + 37 * (i % 50))} for i in range(rows)]
    )
    writer.commit()


def test_will_need_accepts_any_ranges_and_reads_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, 300)
    with DatasetReader.open(path) as reader:
        before = list(reader.read_rows(np.arange(300)).iter_rows())
    with ShardFile(path) as shard:
        size = shard.size
        shard.will_need([(0, size), (size - 1, 10), (size + 100, 5), (17, 0), (4095, 2)])
        shard.will_need([])
        assert shard.hinted
    with DatasetReader.open(path) as reader:
        for shard in reader.shards:
            shard.will_need([(0, shard.size)])
        after = list(reader.read_rows(np.arange(300)).iter_rows())
    assert after == before


def test_will_need_on_a_closed_shard_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, 10)
    shard = ShardFile(path)
    shard.close()
    shard.will_need([(0, 100)])  # a hint may be ignored; it never raises
