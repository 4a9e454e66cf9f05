"""Tests for the survivors of the real ``make mutation`` run over format/ (docs/RELIABILITY.md,
"The real run over format/") that no earlier pass had listed: ``ShardMetadata.raw_bytes``
(what ``MindDataset`` sizes its blocks from) and a shape dimension of 1 in the Arrow export."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrecord import FileWriter
from mrecord.format.arrow_types import arrow_type_for_field
from mrecord.format.schema import parse_schema
from mrecord.storage.shard import read_shard_metadata

ROWS = 50


def _value(i: int) -> bytes:
    return bytes([i % 251]) * (100 + 37 * i)


def _write(path: Path, rows: int) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(4096)  # several pages
        if rows:
            writer.write_raw_data([{"id": i, "blob": _value(i)} for i in range(rows)])


def test_raw_bytes_counts_each_column_s_decompressed_bytes(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, ROWS)
    meta = read_shard_metadata(path)
    pages = meta.num_pages
    assert pages > 3
    values = sum(len(_value(i)) for i in range(ROWS))
    # A fixed column: 8 bytes a row, with or without values_only.
    assert meta.raw_bytes(0) == 8 * ROWS
    assert meta.raw_bytes(0, values_only=True) == 8 * ROWS
    # A bytes column: per page, one u64 offset per row plus one, then the values.
    assert meta.raw_bytes(1) == values + 8 * (ROWS + pages)
    assert meta.raw_bytes(1, values_only=True) == values + 8 * pages


def test_raw_bytes_of_a_shard_without_pages_is_zero(tmp_path: Path) -> None:
    path = tmp_path / "empty.mrecord"
    _write(path, 0)
    meta = read_shard_metadata(path)
    assert meta.num_pages == 0
    assert meta.raw_bytes(0) == 0 and meta.raw_bytes(1, values_only=True) == 0


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ([1], "fixed_size_list<item: float>[1]"),
        ([-1, 1], "list<item: fixed_size_list<item: float>[1]>"),
    ],
)
def test_a_dimension_of_1_is_a_fixed_size_list_of_1(shape: list[int], expected: str) -> None:
    (field,) = parse_schema({"x": {"type": "float32", "shape": shape}}).fields
    assert str(arrow_type_for_field(field)) == expected
