"""The scripts in examples/ run as a user runs them, and print what they promise.

An adapter's example is skipped only while its module (``mrecord.torch``,
``mrecord.ray``, ``mrecord.serve``) does not exist in this checkout.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# script -> (module it needs, or None; lines its output must contain)
CASES: dict[str, tuple[str | None, list[str]]] = {
    "write_dataset.py": (
        None,
        ["wrote 1000 rows in 4 shards", "rows per shard: [250, 250, 250, 250]"],
    ),
    "read_sharded.py": (
        None,
        ["rank 3: 5 batches, 250 rows, image batch (50, 3, 32, 32) float32",
         "rows over all ranks: 1000", "label 7, first 3 rows: ['sample 7', 'sample 17', "],
    ),
    "arrow_parquet.py": (
        None,
        ["parquet -> mrecord: 100 rows in 2 shards", "embedding batch: (3, 8)",
         "to_arrow: fixed_size_list<item: float>[8]", "from_hf -> to_hf: 6 rows"],
    ),
    "torch_training.py": ("mrecord.torch", ["epoch 1: 512 samples", "map-style: 512 rows"]),
    "ray_data.py": ("mrecord.ray", ["ray rows: 400", "written: 400 rows in 2 shards"]),
    "serve_remote.py": ("mrecord.serve", ["same as local: True"]),
}


def test_every_example_has_a_case() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts == set(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs(script: str, tmp_path: Path) -> None:
    module, expected = CASES[script]
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not in this checkout yet")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in expected:
        assert line in proc.stdout, proc.stdout
