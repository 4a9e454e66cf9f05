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
