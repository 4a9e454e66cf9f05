"""The value spans the I/O layer hints for rows of variable-size columns: taken a page at a
time for reads of many rows per page (file order, ``Shuffle.BLOCK``), they are exactly
the spans of its row-by-row loop (repeats, any order, heads with offsets kept as lists or
as ``array("q")``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.format.ids import sorted_unique
from mrecord.storage import readahead
from mrecord.storage.shard import ShardFile

ROWS = 3000


def _blob_size(i: int) -> int:
    # small values first (pages of hundreds of rows), then big ones (a few dozen a page)
    return 1 + i % 20 if i < ROWS // 2 else 1 + (i * 37) % 900


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spans") / "v.mrecord"
    with FileWriter(str(path)) as writer:
        writer.add_schema({"pts": {"type": "float32", "shape": [-1, 3]}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 14)
        writer.write_raw_data(
            [
                {
                    "pts": np.full((i % 7, 3), i, dtype=np.float32),
                    "blob": bytes([i % 251]) * _blob_size(i),
                }
                for i in range(ROWS)
            ]
        )
    return path


def _spans(
    shard: ShardFile, column: str, rows: np.ndarray, by_page_from: int
) -> list[tuple[int, int]]:
    col = shard.field_index(column)
    pages = np.searchsorted(shard.page_starts, rows, side="right") - 1
    slots = rows - shard.page_starts[pages]
    unique = sorted_unique(pages)
    whole = np.zeros(len(unique), dtype=bool)
    old = readahead.SPANS_BY_PAGE_FROM
    readahead.SPANS_BY_PAGE_FROM = by_page_from
    try:
        starts, lengths = readahead._var_ranges(shard, col, pages, slots, unique, whole)
    finally:
        readahead.SPANS_BY_PAGE_FROM = old
    return sorted(zip(starts.tolist(), lengths.tolist(), strict=True))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, ROWS - 1), min_size=1, max_size=400),
    st.sampled_from(["pts", "blob"]),
)
def test_spans_by_page_equal_the_row_loop(dataset: Path, ids: list[int], column: str) -> None:
    rows = np.array(ids, dtype=np.int64)
    with ShardFile(dataset, verify="never") as shard:
        page_rows = np.diff(shard.page_starts)
        assert page_rows.max() >= 64 and page_rows.min() < 64, page_rows  # both kinds of head
        by_row = _spans(shard, column, rows, by_page_from=1 << 30)
        assert _spans(shard, column, rows, by_page_from=0) == by_row
        assert len(by_row) == len(rows)


def test_a_run_of_rows_spans_its_values(dataset: Path) -> None:
    """A file-order run's spans, taken by page, lie end to end: each value's bytes."""
    rows = np.arange(1000, 2000, dtype=np.int64)  # both kinds of page
    with ShardFile(dataset, verify="never") as shard:
        spans = _spans(shard, "blob", rows, by_page_from=0)
        assert [n for _, n in spans] == [_blob_size(i) for i in rows.tolist()]
