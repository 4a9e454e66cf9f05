"""``MindPage`` pages of a large category: each page asks the ``.db`` files for its own
rows (``LIMIT`` / ``OFFSET`` over the field's index), never for the whole category. It
fetched every id of the category for each page: a page of 256 rows of a 2M-row category
took 2.5 s and ~180 MB, and paging got a reader in a 200 MB memory group killed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage
from tests.tracing import traced_peak

BIG = 400_000


def _labels(n: int) -> np.ndarray:
    """Label 0 for most rows, 1-4 for every ninth (categories of very different sizes)."""
    ids = np.arange(n, dtype=np.int64)
    return np.where(ids % 9 == 4, 1 + ids % 4, 0).astype(np.int32)


def _write(path: Path, rows: int, shards: int, batch: int) -> None:
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        for lo in range(0, rows, batch):
            ids = np.arange(lo, min(rows, lo + batch), dtype=np.int64)
            writer.write_raw_data({"id": ids, "label": _labels(rows)[lo : lo + len(ids)]})


def test_a_page_of_a_large_category_holds_only_its_own_ids(tmp_path: Path) -> None:
    path = tmp_path / "big.mrecord"
    _write(path, BIG, shards=1, batch=BIG)
    pager = MindPage(path)
    pager.set_category_field("label")
    want = np.flatnonzero(_labels(BIG) == 0)  # ~355K rows
    pager.read_ids_at_page_by_name(0, 0, 10)  # the first query opens what it needs
    ids, peak = traced_peak(lambda: pager.read_ids_at_page_by_name(0, 1000, 256))
    # the whole category as Python ints: ~355K tuples of one int, ~30 MB
    assert peak < 2 << 20, f"a page held {peak >> 20} MB"
    assert ids.tolist() == want[256_000:256_256].tolist()
    rows = pager.read_at_page_by_name(0, 1000, 256)
    assert [int(r["id"]) for r in rows] == want[256_000:256_256].tolist()
    last = len(want) // 256
    assert pager.read_ids_at_page_by_name(0, last, 256).tolist() == want[last * 256 :].tolist()
    assert len(pager.read_ids_at_page_by_name(0, last + 1, 256)) == 0


@pytest.mark.parametrize("num_row", [1, 7, 64, 1000])
def test_every_page_over_several_shards_is_the_categorys_rows_in_order(
    tmp_path: Path, num_row: int
) -> None:
    """Pages that start in one shard and end in another, and past the last row, of each
    category: exactly the category's rows by global row id, each once, in order."""
    path = tmp_path / "sharded.mrecord"
    _write(path, 3_000, shards=3, batch=250)
    pager = MindPage(str(path) + "1")
    pager.set_category_field("label")
    with DatasetReader.open(path) as reader:
        assert len(reader.shards) == 3
        labels = np.asarray(reader.read_rows(np.arange(3_000), ["label"]).columns["label"])
    for label in range(5):
        want = np.flatnonzero(labels == label).tolist()
        got: list[int] = []
        for page in range(len(want) // num_row + 2):  # one page past the end
            ids = pager.read_ids_at_page_by_name(label, page, num_row)
            assert len(ids) == min(num_row, max(0, len(want) - page * num_row))
            got.extend(ids.tolist())
        assert got == want
        rows = pager.read_at_page_by_name(label, 1, num_row)
        assert [int(r["label"]) for r in rows] == [label] * len(rows)
