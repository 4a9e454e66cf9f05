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
