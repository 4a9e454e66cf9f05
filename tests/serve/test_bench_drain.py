"""The reading loop every served-versus-local benchmark uses (``harness.remote_reader.drain``):
it reads epoch after epoch until its time or row budget is spent. It once stopped after the
first epoch (a ``for`` over a pipeline iterator is one epoch), so a 200 MB epoch read in a
fraction of a second was timed with its ramp-up and the "seconds" asked for were ignored."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.remote_reader import drain
from mrecord import FileWriter, MindDataset, Shuffle

ROWS = 20
VALUE_BYTES = 10


def _dataset(tmp_path: Path) -> Path:
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "data": {"type": "bytes"}})
        writer.write_raw_data(
            {"id": np.arange(ROWS), "data": [bytes([i]) * VALUE_BYTES for i in range(ROWS)]}
        )
    return path


def test_drain_reads_past_the_first_epoch(tmp_path: Path) -> None:
    """Asked for more rows than an epoch holds, it goes on into the next epochs."""
    ds = MindDataset(_dataset(tmp_path), columns_list=["data"], shuffle=Shuffle.GLOBAL)
    nbytes, rows, _seconds = drain(ds, "data", seconds=600, max_rows=2 * ROWS + 5)
    assert rows == 2 * ROWS + 5
    assert nbytes == rows * VALUE_BYTES


def test_drain_stops_when_its_time_is_spent(tmp_path: Path) -> None:
    """With no time left after the first row it stops there, mid-epoch."""
    ds = MindDataset(_dataset(tmp_path), columns_list=["data"], shuffle=Shuffle.GLOBAL)
    nbytes, rows, _seconds = drain(ds, "data", seconds=0)
    assert rows == 1 and nbytes == VALUE_BYTES
