"""Parsed chunk heads shared by the readers of one committed file
(``mrecord.storage.verified.shared_heads``): parsed once per process, never pinning a
closed reader's map, bounded in all."""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.format.chunks import DecodedVarChunk, decode_var, encode_chunk
from mrecord.format.schema import Field, parse_schema
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


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time a shard parses a head (``decode_var``)."""
    parsed: list[int] = []
    original = decode_var

    def counting(*args: object) -> DecodedVarChunk:
        parsed.append(1)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(shard_module, "decode_var", counting)
    return parsed


def test_a_second_reader_parses_no_head_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    _write(path)
    verified.clear_verified()
    parsed = _count_parses(monkeypatch)
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


def test_the_shared_budget_is_a_tenth_of_a_small_memory_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verified, "first_memory_budget", lambda: 192 << 20)
    store = verified._HeadStore(None)
    store.put(("f", 0, 0), DecodedVarChunk([0, 1], None, 0))
    assert store.budget == (192 << 20) // (10 * 48)  # 419,430 offsets: ~19 MB of heads
    monkeypatch.setattr(verified, "first_memory_budget", lambda: 1 << 40)
    assert verified._head_budget() == verified._HEAD_BUDGET
    monkeypatch.setattr(verified, "first_memory_budget", lambda: None)
    assert verified._head_budget() == verified._HEAD_BUDGET


def test_offsets_kept_as_packed_ints_weigh_their_bytes() -> None:
    """A head of 64 rows or more keeps its offsets in an ``array`` of 4-byte ints (a
    chunk under 4 GiB): a twelfth of a list's Python int."""
    many = decode_var(_pts_field(), _pts_chunk(600), 600)
    assert isinstance(many.offsets, array) and many.offsets.itemsize == 4
    store = verified._HeadStore(budget=10_000)
    store.put(("f", 0, 0), many)
    # 601 offsets of 4 bytes (50 list offsets, +1 rounding up) and 600 shapes of two
    # 8-byte dimensions as decode_var parsed them (200): 251, not 601 + 200
    assert store.total == 251


def test_heads_that_fit_the_budget_in_bytes_are_parsed_once_in_a_random_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 small variable-shape rows in pages of 64 KiB: their heads take ~0.5 MB
    (offsets and shapes, 8 bytes a number), under a budget of ~0.8 MB (16,384 list
    offsets); weighed as list offsets they took 1.3 MB, and a random epoch parsed the
    evicted heads again and again."""
    path = tmp_path / "ds"
    with FileWriter(path) as writer:
        writer.add_schema({"pts": {"type": "float32", "shape": [-1, 3]}})
        writer.set_page_size(1 << 16)
        writer.write_raw_data({"pts": [np.full((i % 5, 3), i, np.float32) for i in range(20_000)]})
    monkeypatch.setattr(verified, "_HEAD_BUDGET", 16_384)
    monkeypatch.setattr(verified, "first_memory_budget", lambda: None)
    monkeypatch.setattr(verified, "_shared_store", verified._HeadStore(None))
    verified.clear_verified()
    parsed = _count_parses(monkeypatch)
    ids = np.random.default_rng(0).permutation(20_000)
    with DatasetReader.open(path) as reader:
        pages = len(reader.shards[0].page_starts_list) - 1
        assert pages >= 8
        for start in range(0, len(ids), 64):
            block = reader.read_rows(ids[start : start + 64])
            row = int(ids[start])
            assert block.columns["pts"][0].shape == (row % 5, 3)
    assert len(parsed) <= 2 * pages  # each head at most twice (its index copy, the chunk's)


def _pts_field() -> Field:
    return parse_schema({"pts": {"type": "float32", "shape": [-1, 3]}}).fields[0]


def _pts_chunk(rows: int) -> bytes:
    return encode_chunk(_pts_field(), [np.ones((1, 3), np.float32)] * rows)
