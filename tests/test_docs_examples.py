"""The README's quick tour runs as written (docs stay true when behaviour changes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_quick_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md lost its python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert sorted(p.name for p in tmp_path.glob("data.mrecord?")) == [
        f"data.mrecord{i}" for i in range(4)
    ]


def test_slicing_doc_create_dataset_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/SLICING.md's create_dataset (the MindSpore doc's example with mrecord imports)."""
    import numpy as np

    from mrecord import FileWriter

    rng = np.random.default_rng(0)
    with FileWriter(tmp_path / "cifar10.mrecord") as writer:
        writer.add_schema(
            {"image": {"type": "uint8", "shape": [32, 32, 3]}, "label": {"type": "int32"}}
        )
        writer.write_raw_data(
            {
                "image": rng.integers(0, 256, (256, 32, 32, 3), dtype=np.uint8),
                "label": np.arange(256, dtype=np.int32) % 10,
            }
        )
    doc = (README.parent / "docs" / "SLICING.md").read_text()
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "create_dataset" in b
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK_ID", "5")
    monkeypatch.setenv("RANK_SIZE", "8")
    scope: dict[str, object] = {}
    exec(compile(block, "docs/SLICING.md", "exec"), scope)
    batches = list(scope["dataset"].create_dict_iterator(num_epochs=1))  # type: ignore[attr-defined]
    assert len(batches) == 1
    assert set(batches[0]) == {"img5", "label"}
    assert batches[0]["img5"].shape == (256, 3, 224, 28)
