"""The README's quick tour runs as written (docs stay true when behaviour changes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


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
    """docs/SLICING.md's create_dataset: the tutorial's code with mrecord imports (seed 000).

    Cifar10Dataset over real binary files, rank 5 of 8, 1x8 patches.
    """
    from mrecord.testing.rawdata import write_cifar10

    folder = tmp_path / "cifar-10-batches-bin"
    write_cifar10(folder, {"data_batch_1.bin": 200, "test_batch.bin": 56})
    doc = (README.parent / "docs" / "SLICING.md").read_text()
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "create_dataset" in b
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK_ID", "5")
    monkeypatch.setenv("RANK_SIZE", "8")
    monkeypatch.setenv("DATA_PATH", str(folder))
    scope: dict[str, object] = {}
    exec(compile(block, "docs/SLICING.md", "exec"), scope)
    batches = list(scope["dataset"].create_dict_iterator(num_epochs=1))  # type: ignore[attr-defined]
    assert len(batches) == 1
    assert set(batches[0]) == {"img5", "label"}
    assert batches[0]["img5"].shape == (256, 3, 224, 28)
    assert str(batches[0]["label"].dtype) == "int32" and batches[0]["label"].shape == (256,)


def test_sink_doc_fake_dataset_example_runs_as_written() -> None:
    """docs/SINK.md's FakeDataset example (a public test kit for users' callbacks)."""
    doc = (README.parent / "docs" / "SINK.md").read_text()
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "FakeDataset" in b
    ]
    scope: dict[str, object] = {}
    exec(compile(block, "docs/SINK.md", "exec"), scope)  # the block asserts what the step saw
    assert scope["steps"] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
