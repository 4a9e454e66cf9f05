"""Parsed chunk heads shared by the readers of one committed file
(``mrecord.storage.verified.shared_heads``): parsed once per process, never pinning a
closed reader's map, bounded in all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.format.chunks import DecodedVarChunk, decode_var
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import shard as shard_module
from mrecord.storage import verified


def _write(path: Path) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"pts": {"type": "float32", "shape": [-1, 3]}, "b": {"type": "bytes"}})
        writer.set_page_size(4096)
        writer.write_raw_data(
            {
                "pts": [np.full((i % 7, 3), i, np.float32) for i in range(400)],
                "b": [bytes([i % 256]) * 50 for i in range(400)],
            }
        )


def test_a_second_reader_parses_no_head_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    _write(path)
    verified.clear_verified()
    parsed: list[int] = []
    original = decode_var

    def counting(*args: object) -> DecodedVarChunk:
        parsed.append(1)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(shard_module, "decode_var", counting)
    ids = np.random.default_rng(0).permutation(400)
    with DatasetReader.open(path) as first:
        expected = first.read_rows(ids)
    assert parsed
    parsed.clear()
    with DatasetReader.open(path) as second:
        block = second.read_rows(ids)
    assert parsed == []
    assert block.columns["b"] == expected.columns["b"]
    for got, want in zip(block.columns["pts"], expected.columns["pts"], strict=True):
        np.testing.assert_array_equal(got, want)


def test_shared_heads_do_not_keep_a_closed_readers_map_open(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    _write(path)
    verified.clear_verified()
    reader = DatasetReader.open(path)
    reader.read_rows(np.arange(0, 400, 3))  # parses heads, with shapes, from this map
    shard = reader.shards[0]
    reader.close()
    assert shard.mm.closed
    with DatasetReader.open(path) as again:  # and the heads still serve another reader
        assert again.read_row(10)["pts"].shape == (3, 3)


def test_the_store_is_bounded_by_offsets() -> None:
    store = verified._HeadStore(budget=10)
    for page in range(5):
        store.put(("f", page, 0), DecodedVarChunk([0, 1, 2, 3], None, 0))  # 4 offsets each
    assert store.total <= 10
    assert list(store.items) == [("f", 3, 0), ("f", 4, 0)]  # the most recent ones


def test_shapes_weigh_their_bytes_at_what_an_offset_costs() -> None:
    store = verified._HeadStore(budget=24)
    shapes = np.ones((12, 2), dtype=np.int64)  # 12 values of shape (1, 1): 192 bytes
    offsets = list(range(13))
    store.put(("f", 0, 0), DecodedVarChunk(offsets, shapes, 0))  # 13 + 192 // 48
    assert store.total == 17
    store.put(("f", 1, 0), DecodedVarChunk(offsets, None, 0))  # 13 more: over 24
    assert store.total == 13 and list(store.items) == [("f", 1, 0)]


def test_the_shared_budget_is_a_quarter_of_a_small_memory_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verified, "first_memory_budget", lambda: 192 << 20)
    store = verified._HeadStore(None)
    store.put(("f", 0, 0), DecodedVarChunk([0, 1], None, 0))
    assert store.budget == (192 << 20) // (4 * 48)  # 1,048,576 offsets: ~48 MB of heads
    monkeypatch.setattr(verified, "first_memory_budget", lambda: 1 << 40)
    assert verified._head_budget() == verified._HEAD_BUDGET
    monkeypatch.setattr(verified, "first_memory_budget", lambda: None)
    assert verified._head_budget() == verified._HEAD_BUDGET
