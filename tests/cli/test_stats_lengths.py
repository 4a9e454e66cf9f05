"""``mrecord stats``: the lengths of strings, bytes and variable-shape values are counted
by length, not kept one per row.

Each row's length was kept (8 bytes a row) and the percentiles sorted all of them: over
6M rows of file names ``mrecord stats`` was OOM-killed in a 150 MB memory group. The
percentiles come from the counts, the same numbers ``np.percentile`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mrecord.block import Block
from mrecord.maintenance.stats import compute_stats
from tests.tracing import traced_peak


def _name_blocks(rows: int, size: int = 65_536) -> Iterator[Block]:
    for lo in range(0, rows, size):
        ids = range(lo, min(rows, lo + size))
        yield Block({"name": [f"img_{i % 9_999:x}_{'x' * (i % 37)}" for i in ids]})


def test_lengths_of_two_million_strings_are_counted_not_kept() -> None:
    rows = 2_000_000
    stats, peak = traced_peak(lambda: compute_stats([("name", "string", None)], _name_blocks(rows)))
    # one int64 a row kept, then joined and sorted: 48 MB and more
    assert peak < 16 << 20, f"stats held {peak >> 20} MB"
    lengths = np.array([len(f"img_{i % 9_999:x}_{'x' * (i % 37)}") for i in range(rows)])
    want = np.percentile(lengths, [50, 90, 99]).tolist()
    got = stats["name"]["length"]
    assert [got["p50"], got["p90"], got["p99"]] == want
    assert (got["min"], got["max"]) == (int(lengths.min()), int(lengths.max()))
    assert got["mean"] == pytest.approx(float(lengths.mean()))


@pytest.mark.parametrize("seed", range(6))
def test_percentiles_from_counts_are_those_of_the_values(seed: int) -> None:
    """Linear interpolation between the order statistics, as ``np.percentile`` does, for
    bytes and variable-shape values, odd and even counts, one row, repeats and gaps."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    sizes = rng.choice([0, 1, 2, 3, 10, 1000], size=n) + rng.integers(0, 3, size=n)
    blobs = [bytes(int(s)) for s in sizes]
    arrays = [np.zeros((int(s), 2), np.float32) for s in sizes]
    cut = int(rng.integers(0, n + 1))
    blocks = [
        Block({"blob": blobs[:cut], "pts": arrays[:cut]}),
        Block({"blob": blobs[cut:], "pts": arrays[cut:]}),
    ]
    stats = compute_stats([("blob", "bytes", None), ("pts", "float32", (-1, 2))], blocks)
    for name, lengths in (("blob", sizes), ("pts", sizes * 2)):
        got = stats[name]["length"]
        want = np.percentile(lengths, [50, 90, 99]).tolist()
        assert [got["p50"], got["p90"], got["p99"]] == pytest.approx(want, abs=1e-9)
        assert (got["min"], got["max"]) == (int(lengths.min()), int(lengths.max()))
        assert got["mean"] == pytest.approx(float(lengths.mean()))


def test_the_text_histogram_of_many_classes_is_summarized(tmp_path: Path) -> None:
    """A label of 1,000 classes printed one 14 KB line; past 20 classes the text says how
    many there are and how their rows spread, and --json has them all."""
    from click.testing import CliRunner

    from mrecord import FileWriter
    from mrecord.cli.main import cli

    path = tmp_path / "labels.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"label": {"type": "int32"}})
        writer.write_raw_data({"label": np.arange(3_000, dtype=np.int32) % 300})
    few = tmp_path / "few.mrecord"
    with FileWriter(few) as writer:
        writer.add_schema({"label": {"type": "int32"}})
        writer.write_raw_data({"label": np.array([1, 2, 2], dtype=np.int32)})
    runner = CliRunner()
    text = runner.invoke(cli, ["stats", str(path), "-q"]).stdout
    (line,) = [t for t in text.splitlines() if t.strip().startswith("histogram")]
    assert "300 classes" in line and "10 rows each" in line and "--json" in line
    assert len(line) < 200
    full = json.loads(runner.invoke(cli, ["stats", str(path), "--json", "-q"]).stdout)
    assert len(full["fields"]["label"]["histogram"]) == 300
    small = runner.invoke(cli, ["stats", str(few), "-q"]).stdout
    assert "histogram: 1: 1, 2: 2" in small
