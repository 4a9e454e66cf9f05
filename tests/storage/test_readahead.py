"""Read-ahead hints (ShardFile.will_need, storage.readahead) never change what a read returns."""

from __future__ import annotations

import json
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


def test_mrecord_bench_prints_the_device_limit_beside_the_rates(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    path = tmp_path / "d.mrecord"
    _write(path, 300)
    text = CliRunner().invoke(cli, ["bench", str(path), "--max-rows", "100"]).stdout
    assert "device limit:" in text and "rows/s of" in text and "% of it" in text
    result = CliRunner().invoke(cli, ["bench", str(path), "--json", "--max-rows", "100"])
    out = json.loads(result.stdout)
    assert out["device_limit_rows_per_second"] > 0
    assert out["device_limit_row_bytes"] > 0
