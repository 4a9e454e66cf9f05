"""``mrecord audit`` checks an epoch at a time, its record files a piece at a time: its
memory is a count per row, whatever the epochs and ranks recorded, and what it reports
does not depend on where the pieces are cut. (No torch needed: the audit reads files.)"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from mrecord.errors import CorruptFileError
from mrecord.torch.audit import audit
from tests.tracing import traced_peak


def _records(path: Path, positions: np.ndarray, ids: np.ndarray) -> None:
    np.stack([positions, ids], axis=1).astype("<i8").tofile(path)


def test_an_audit_holds_a_count_per_row_not_every_record(tmp_path: Path) -> None:
    """Three epochs of 1M rows on two ranks (48 MB of records). The audit read every
    epoch's files before checking the first and copied an epoch's records four times
    over: 761 MB resident for three epochs of 6M rows on four ranks (~15 GB for a 90-epoch
    run of ImageNet); now a 4-byte count per row beside one piece of a file."""
    rows = 1_000_000
    (tmp_path / "audit.json").write_text(json.dumps({"version": 1, "num_rows": rows}))
    for epoch in range(3):
        order = np.random.default_rng(epoch).permutation(rows)
        for rank in range(2):
            positions = np.arange(rank, rows, 2)
            _records(tmp_path / f"epoch{epoch:05d}-rank{rank:05d}.ids", positions, order[positions])
    report, peak = traced_peak(lambda: audit(tmp_path))
    assert report.ok, report.summary()
    assert [e.delivered for e in report.epochs] == [rows] * 3
    assert peak < 24 << 20, peak  # 123 MB before; 20 MB now


def test_pieces_count_as_whole_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A duplicate, a missing row, padding, a resumed run that replays the last records
    of the first, and a row skipped as damaged, read three records at a time."""
    monkeypatch.setattr(importlib.import_module("mrecord.torch.audit"), "_RECORDS_PER_READ", 3)
    rows = 50
    order = np.random.default_rng(7).permutation(rows)
    ids = np.concatenate([order, order[:10]])  # positions 50-59: padding wraps around
    ids[7] = ids[8]  # order[8] delivered twice, order[7] never
    (tmp_path / "audit.json").write_text(json.dumps({"version": 1, "num_rows": rows}))
    for rank in range(2):
        first = np.arange(rank, 60, 2)  # the first run delivered every position...
        _records(tmp_path / f"epoch00000-rank{rank:05d}.ids", first, ids[first])
        # ...and was killed; the next resumed from position 40 and delivered 40-59 again
        again = np.arange(40 + rank, 60, 2)
        name = f"epoch00000-rank{rank:05d}-from00000.000000000040.ids"
        _records(tmp_path / name, again, ids[again])
    skip = {"positions": [45], "ids": [int(ids[45])], "substituted": None, "errors": ["p3"]}
    name = "skipped-epoch00000-rank00001-from00000.000000000040-pid1.jsonl"
    (tmp_path / name).write_text(json.dumps(skip) + "\n")
    (epoch,) = audit(tmp_path).epochs
    assert epoch.replayed == 20
    assert epoch.delivered == 40 + 9  # positions 0-39, then 40-49 but the skipped 45
    assert epoch.padded == 10
    assert epoch.duplicates == {int(order[8]): 2}
    assert epoch.missing == [int(order[7])]
    assert epoch.skipped == [int(order[45])]
    assert epoch.damage == ["p3"]
    assert not epoch.ok


def test_damaged_record_files_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "audit.json").write_text(json.dumps({"version": 1, "num_rows": 10}))
    path = tmp_path / "epoch00000-rank00000.ids"
    _records(path, np.arange(3), np.array([1, 2, 10]))
    with pytest.raises(CorruptFileError, match=r"epoch00000-rank00000\.ids: row id 10 is outside"):
        audit(tmp_path)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptFileError, match="cut short"):
        audit(tmp_path)
