"""A writer of many shards holds a bounded amount of rows waiting for their page.

Each ``write_raw_data`` call spreads its rows over every shard, and a shard writes a
page once a page's worth of rows is there: a writer of 1,000 shards held up to 1,000
pages of rows (1 GiB at the default page size). 20,000 images of 50 KB into 1,000 shards
peaked at 1,003 MB resident, the whole 985 MB dataset, since no shard filled a page.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter
from mrecord.writer import file_writer
from tests.tracing import traced_peak

SHARDS = 64
ROW_BYTES = 16 << 10
ROWS = 2_048  # 32 MiB: 32 rows, half a page, a shard


def _rows(lo: int, hi: int) -> list[dict[str, object]]:
    return [{"image": bytes([i % 251]) * ROW_BYTES, "label": i} for i in range(lo, hi)]


def test_rows_waiting_for_their_page_stay_within_the_writers_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_writer, "PENDING_BYTES", 4 << 20)
    path = tmp_path / "many.mrecord"
    writer = FileWriter(path, shard_num=SHARDS)
    writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int64"}})
    writer.set_page_size(1 << 20)

    def write() -> None:
        for lo in range(0, ROWS, SHARDS):  # one row a shard a call
            writer.write_raw_data(_rows(lo, lo + SHARDS))

    _, peak = traced_peak(write)
    # every row waited for the commit: 32 MiB
    assert peak < 10 << 20, f"the writer held {peak >> 20} MB of rows"
    writer.commit()
    with DatasetReader.open(f"{path}00") as reader:
        assert reader.num_rows == ROWS
        block = reader.read_rows(np.arange(ROWS, dtype=np.int64))
    labels = [int(v) for v in block.columns["label"]]
    assert sorted(labels) == list(range(ROWS))
    for label, image in zip(labels, block.columns["image"], strict=True):
        assert image == bytes([label % 251]) * ROW_BYTES


def test_a_few_shards_keep_their_full_pages(tmp_path: Path) -> None:
    """Within the budget (the default 64 MiB, or four pages) nothing is cut short: the
    pages of a writer of a few shards are as before."""
    path = tmp_path / "few.mrecord"
    with FileWriter(path, shard_num=4) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int64"}})
        writer.set_page_size(1 << 20)
        for lo in range(0, 1_024, 64):
            writer.write_raw_data(_rows(lo, lo + 64))
    from mrecord.storage.shard import read_shard_metadata

    for shard in range(4):
        pages = read_shard_metadata(Path(f"{path}{shard}")).page_rows.tolist()
        # 256 rows of 16 KiB a shard: 63 rows fill a 1 MiB page (the last one crosses it)
        assert pages[:-1] == [64] * (len(pages) - 1), pages


def test_small_rows_spread_over_many_shards_are_weighed_with_their_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of a number and a short string, a few a shard a call: a part per call and an
    object per string weigh more than the values' bytes, which alone let a conversion of
    2M such rows into 1,000 shards reach 560 MB resident (now 160 MB)."""
    monkeypatch.setattr(file_writer, "PENDING_BYTES", 2 << 20)
    path = tmp_path / "small.mrecord"
    writer = FileWriter(path, shard_num=SHARDS)
    writer.add_schema({"id": {"type": "int64"}, "name": {"type": "string"}})
    writer.add_index(["name"])
    rows = 120_000

    def write() -> None:
        for lo in range(0, rows, 4 * SHARDS):  # four rows a shard a call
            hi = min(rows, lo + 4 * SHARDS)
            writer.write_raw_data(
                {
                    "id": np.arange(lo, hi, dtype=np.int64),
                    "name": [f"n{i:020d}" for i in range(lo, hi)],
                }
            )

    _, peak = traced_peak(write)
    assert peak < 8 << 20, f"the writer held {peak >> 20} MB"
    writer.commit()
    with DatasetReader.open(f"{path}00") as reader:
        block = reader.read_rows(np.arange(rows, dtype=np.int64))
    pairs = sorted(zip((int(i) for i in block.columns["id"]), block.columns["name"], strict=True))
    assert pairs == [(i, f"n{i:020d}") for i in range(rows)]
