"""``MindDataset(..., on_error="skip" | "warn")``: the rows of a damaged chunk are skipped,
counted and reported; the default (``"raise"``) still ends the epoch with the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import FileWriter, MindDataset
from mrecord.errors import ArgumentError, ChecksumError
from mrecord.storage.shard import ShardFile

ROWS = 64


def damaged_dataset(tmp_path: Path) -> tuple[Path, list[int]]:
    """A 2-shard dataset whose shard 1 has one damaged page; returns (shard 0, its row ids)."""
    with FileWriter(tmp_path / "d.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(2048)
        writer.write_raw_data([{"id": i, "blob": bytes([i]) * 200} for i in range(ROWS)])
    files = writer.files
    with ShardFile(files[1]) as shard:
        page = 1
        at = int(shard.meta.chunks[page, 1]["offset"]) + 3
        starts = np.concatenate([[0], np.cumsum(shard.meta.page_rows)])
        base = ROWS - shard.meta.num_rows  # shard 1's rows follow shard 0's
        lost = list(range(base + int(starts[page]), base + int(starts[page + 1])))
    data = bytearray(files[1].read_bytes())
    data[at] ^= 0xFF
    files[1].write_bytes(bytes(data))
    return files[0], lost


def ids_of(ds: MindDataset) -> list[int]:
    return [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1, output_numpy=True)]


@pytest.mark.parametrize("workers", [1, 3])
def test_skip_drops_the_damaged_chunks_rows_and_reports_them(tmp_path: Path, workers: int) -> None:
    first, lost = damaged_dataset(tmp_path)
    assert lost
    ds = MindDataset(str(first), shuffle=False, num_parallel_workers=workers, on_error="skip")
    assert ids_of(ds) == [i for i in range(ROWS) if i not in lost]
    assert ds.skipped_rows == lost
    assert "d.mrecord1" in ds.skip_report() and f"{len(lost)} row" in ds.skip_report()


def test_warn_warns_once_per_damaged_read(tmp_path: Path) -> None:
    first, lost = damaged_dataset(tmp_path)
    ds = MindDataset(str(first), shuffle=False, on_error="warn")
    with pytest.warns(RuntimeWarning, match="skipped"):
        got = ids_of(ds)
    assert len(got) == ROWS - len(lost)


def test_default_raises_and_bad_values_are_refused(tmp_path: Path) -> None:
    first, _ = damaged_dataset(tmp_path)
    with pytest.raises(ChecksumError):
        ids_of(MindDataset(str(first), shuffle=False))
    bad: Any = "ignore"
    with pytest.raises(ArgumentError, match="on_error"):
        MindDataset(str(first), on_error=bad)
