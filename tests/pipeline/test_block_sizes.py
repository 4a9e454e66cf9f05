"""Blocks a random-access source reads hold about 4 MiB of rows (READING.md: "a block is
about 4 MB of rows"), small rows included: each block costs a read's fixed work, and
blocks of small rows capped at 8,192 rows (608 KB of tabular rows) made that work most
of a ``Shuffle.BLOCK`` epoch beyond memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord import FileWriter, MindDataset
from mrecord.pipeline.sources import mind_dataset
from mrecord.pipeline.sources.random_access import block_rows_for

MIB = 1 << 20


@given(st.integers(min_value=64, max_value=256 << 10))
def test_a_block_holds_about_four_mib(row_bytes: int) -> None:
    rows = block_rows_for(row_bytes)
    assert 2 * MIB < rows * row_bytes <= 4 * MIB


@given(st.integers(min_value=256 << 10, max_value=1 << 30))
def test_big_rows_still_come_sixteen_to_a_block(row_bytes: int) -> None:
    assert block_rows_for(row_bytes) == 16


@given(st.integers(min_value=0, max_value=63))
def test_tiny_rows_are_bounded_in_count(row_bytes: int) -> None:
    # a block of one-byte rows is not 4M Python objects for a row-at-a-time consumer
    assert block_rows_for(row_bytes) == 65536


def test_a_memory_budget_bounds_blocks_of_small_rows(tmp_path: Path, monkeypatch: Any) -> None:
    """Under a memory budget a MindDataset's blocks of small rows hold at most a 32nd of
    it (4 MiB blocks got a reader in a 100 MB group OOM-killed), and never fewer rows
    than the 8,192 they held before blocks grew."""
    path = tmp_path / "small.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "vec": {"type": "float32", "shape": [16]}})
        writer.write_raw_data({"id": np.arange(1000), "vec": np.zeros((1000, 16), np.float32)})
    reader = MindDataset(str(path), shuffle=False)._reader

    def rows_under(budget: int | None) -> int:
        monkeypatch.setattr(mind_dataset, "memory_budget", lambda: budget)
        return mind_dataset._block_rows(reader, 2)[0]

    assert rows_under(None) == (4 * MIB) // 72  # nothing says: 4 MiB
    assert rows_under(1 << 40) == (4 * MIB) // 72
    assert rows_under(185 << 20) == (4 * MIB) // 72  # a 200 MB group's budget: 4 MiB
    assert rows_under(80 << 20) == (80 << 20) // 32 // 72  # a 100 MB group's: 2.5 MB
    assert rows_under(80 << 20) * 72 <= (80 << 20) // 32
    assert rows_under(16 << 20) == 8192  # a 32nd is fewer rows: the floor
