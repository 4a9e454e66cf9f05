"""A commit that fails after its journal is durable is finished by the next open, not lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, verify_dataset
from mrecord.storage import commit as commit_mod
from mrecord.storage.naming import journal_path


def test_publish_failure_after_the_journal_keeps_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.mrecord"
    with FileWriter(path, shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(10)})

    appender = FileWriter.open_for_append(str(path) + "0")
    appender.write_raw_data({"id": np.arange(10, 16)})

    def failing_roll_forward(directory: Path, names: object) -> None:
        raise OSError(5, "Input/output error (simulated)")

    with monkeypatch.context() as patch:
        patch.setattr(commit_mod, "_roll_forward", failing_roll_forward)
        with pytest.raises(OSError) as info:
            appender.commit()
    assert any("journal" in note for note in getattr(info.value, "__notes__", []))
    assert journal_path(tmp_path, "d.mrecord").exists()

    with DatasetReader.open(str(path) + "1") as reader:  # rolls the journal forward
        column = reader.read_rows(np.arange(reader.num_rows)).columns["id"]
        assert isinstance(column, np.ndarray)
        ids = sorted(column.tolist())
    assert ids == list(range(16))
    assert not journal_path(tmp_path, "d.mrecord").exists()
    assert verify_dataset(str(path) + "0").ok
