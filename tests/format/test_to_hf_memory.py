"""``mrecord.to_hf`` of a dataset larger than memory: with ``cache_dir`` the rows go to one
Arrow file there a bounded batch at a time, and the ``datasets.Dataset`` maps it; without,
a dataset larger than the memory budget is refused with a message that says what to do."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import mrecord
from mrecord import FileWriter
from mrecord.errors import ArgumentError
from tests.tracing import run_child

datasets = pytest.importorskip("datasets")

ROWS = 1_500
BLOB = 100_000  # 150 MB of values


def _write(path: Path) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        for start in range(0, ROWS, 100):
            writer.write_raw_data(
                [{"id": i, "blob": bytes([i % 251]) * BLOB} for i in range(start, start + 100)]
            )


_TO_HF = textwrap.dedent(
    """
    import json, sys
    import datasets  # imported before the count: its own memory is not the rows'
    import mrecord
    from tests.tracing import resident_anonymous

    before = resident_anonymous()
    hf = mrecord.to_hf(sys.argv[1], cache_dir=sys.argv[2])
    grown = resident_anonymous() - before
    row = hf[1234]
    print(json.dumps({"rows": len(hf), "grown": grown, "id": row["id"],
                      "blob": [len(row["blob"]), row["blob"][0]],
                      "files": [f["filename"] for f in hf.cache_files]}))
    """
)


def test_to_hf_with_a_cache_dir_writes_a_mapped_file_a_batch_at_a_time(tmp_path: Path) -> None:
    """150 MB of 100 KB values. ``to_hf`` read 4,096 rows a call (410 MB of images) and
    held every row in memory: the process grew by the whole dataset. With ``cache_dir``
    it grows by a few batches, and the dataset maps its Arrow file."""
    path = tmp_path / "big.mrecord"
    _write(path)
    result = run_child(_TO_HF, str(path), str(tmp_path / "cache"), timeout=600)
    assert result["rows"] == ROWS
    assert result["id"] == 1234 and result["blob"] == [BLOB, 1234 % 251]
    assert [Path(f).parent for f in result["files"]] == [tmp_path / "cache"]
    assert result["grown"] < 64 << 20, result


def test_to_hf_in_memory_refuses_a_dataset_larger_than_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.mrecord"
    _write(path)
    monkeypatch.setattr("mrecord.hf.memory_budget", lambda: 100 << 20)
    with pytest.raises(ArgumentError, match=r"cache_dir=") as info:
        mrecord.to_hf(path)
    assert "holds 143 MiB of rows, more than the memory this process may fill (100 MiB)" in str(
        info.value
    )
    hf = mrecord.to_hf(path, cache_dir=tmp_path / "cache")  # the way out it names
    assert len(hf) == ROWS and hf[7]["id"] == 7


def test_a_cached_dataset_equals_the_in_memory_one(tmp_path: Path) -> None:
    """Same rows, same features (ClassLabel and Image from the description)."""
    import io

    from PIL import Image

    def png(i: int) -> bytes:
        out = io.BytesIO()
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(out, "PNG")
        return out.getvalue()

    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b", "c"])}
    )
    source = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(i), "path": None} for i in range(9)], "label": [0, 1, 2] * 3},
        features=features,
    )
    mrecord.from_hf(source, tmp_path / "hf.mrecord")
    in_memory = mrecord.to_hf(tmp_path / "hf.mrecord")
    cached = mrecord.to_hf(tmp_path / "hf.mrecord", cache_dir=tmp_path / "cache")
    assert cached.features == in_memory.features == features
    assert cached.info.description == in_memory.info.description
    assert cached.cache_files and not in_memory.cache_files
    for i in (0, 4, 8):
        assert cached[i]["label"] == in_memory[i]["label"] == i % 3
        assert np.asarray(cached[i]["image"]).tolist() == np.asarray(in_memory[i]["image"]).tolist()
