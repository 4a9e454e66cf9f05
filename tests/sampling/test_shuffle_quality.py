"""Shuffle quality metrics: a uniform permutation's values for GLOBAL, poor mixing caught."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.cli.main import cli
from mrecord.errors import ArgumentError, SchemaError
from mrecord.maintenance.shuffle_report import shuffle_report
from mrecord.sampling.quality import (
    inversions,
    order_metrics,
    shuffle_quality,
    uniform_metrics,
)

FILES = 8
PER_FILE = 2500
CLASSES = 10
N = FILES * PER_FILE


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def sorted_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 shards, rows sorted by label (10 classes of 2000 rows)."""
    path = tmp_path_factory.mktemp("quality") / "sorted.mrecord"
    with FileWriter(path, shard_num=FILES) as writer:
        writer.add_schema({"label": {"type": "int64"}, "name": {"type": "string"}})
        labels = np.repeat(np.arange(CLASSES, dtype=np.int64), N // CLASSES)
        writer.write_raw_data({"label": labels, "name": [f"r{i}" for i in range(N)]})
    return path.with_name(path.name + "0")


@given(st.lists(st.integers(0, 6), max_size=40))
def test_inversions_match_brute_force(values: list[int]) -> None:
    n = len(values)
    brute = sum(values[i] > values[j] for i in range(n) for j in range(i + 1, n))
    assert inversions(values) == brute


def test_uniform_values_match_closed_forms() -> None:
    counts = [1000] * 16
    u = uniform_metrics(counts, batch_size=64, class_counts=np.array([4000] * 4))
    n, s, b = 16000, 16, 64
    assert u["displacement"] == pytest.approx(1 / 3, abs=1e-6)
    assert u["adjacent_gap"] == pytest.approx((n + 1) / 3)
    # Drawing without replacement: a little above the with-replacement S(1-(1-1/S)^B).
    assert u["files_per_batch"] == pytest.approx(s * (1 - (1 - 1 / s) ** b), rel=0.01)
    assert u["files_per_batch"] >= s * (1 - (1 - 1 / s) ** b)
    # Plug-in entropy of 64 draws from 4 equal classes: just under log 4 (Miller-Madow).
    assert u["label_entropy"] == pytest.approx(math.log(4) - 3 / (2 * b), abs=0.01)
    assert u["label_entropy"] < math.log(4)
    assert abs(u["label_autocorr"]) < 1e-3 and u["kendall_tau"] == 0 and u["epoch_corr"] == 0


def test_per_batch_metrics_against_direct_counts() -> None:
    rng = np.random.default_rng(3)
    counts = [30, 50, 20]
    ids = rng.permutation(100)
    labels = rng.integers(0, 4, 100)
    codes = labels.astype(np.int64)
    class_counts = np.bincount(codes, minlength=4)
    got = order_metrics(ids, counts, batch_size=8, codes=codes, class_counts=class_counts)
    file_of = np.repeat([0, 1, 2], counts)
    batches = [ids[i : i + 8] for i in range(0, 96, 8)]
    assert got["files_per_batch"] == pytest.approx(np.mean([len(set(file_of[b])) for b in batches]))
    entropies = [
        -sum(c / 8 * math.log(c / 8) for c in Counter(labels[b].tolist()).values())
        for b in batches
    ]
    assert got["label_entropy"] == pytest.approx(np.mean(entropies))
    assert got["adjacent_gap"] == pytest.approx(np.mean(np.abs(np.diff(ids))))
    assert got["displacement"] == pytest.approx(np.mean(np.abs(ids / 100 - np.arange(100) / 100)))
    brute = sum(ids[i] > ids[j] for i in range(100) for j in range(i + 1, 100))
    assert got["kendall_tau"] == pytest.approx(1 - 4 * brute / (100 * 99))


def test_global_matches_a_uniform_permutation(sorted_dataset: Path) -> None:
    report = shuffle_report(
        sorted_dataset, modes=["global"], batch_size=32, label_column="label", epochs=3
    )
    (mode,) = report.modes
    u = report.uniform
    # Bounds: about 6 standard deviations of each statistic over N = 20,000 rows.
    for epoch in range(3):
        assert mode.values["displacement"][epoch] == pytest.approx(u["displacement"], abs=0.012)
        assert mode.values["adjacent_gap"][epoch] == pytest.approx(u["adjacent_gap"], rel=0.04)
        assert abs(mode.values["kendall_tau"][epoch]) < 0.03
        files = mode.values["files_per_batch"][epoch]
        assert files == pytest.approx(u["files_per_batch"], rel=0.02)
        assert mode.values["label_entropy"][epoch] == pytest.approx(u["label_entropy"], abs=0.03)
        assert abs(mode.values["label_autocorr"][epoch]) < 0.045
    assert all(abs(c) < 0.045 for c in mode.values["epoch_corr"])
    assert len(mode.values["epoch_corr"]) == 2
    assert u["files_per_batch"] == pytest.approx(FILES * (1 - (1 - 1 / FILES) ** 32), rel=0.01)


@pytest.mark.parametrize("mode", ["files", "infile"])
def test_files_and_infile_are_poorly_mixed_on_sorted_labels(
    sorted_dataset: Path, mode: str
) -> None:
    report = shuffle_report(
        sorted_dataset, modes=[mode], batch_size=32, label_column="label", epochs=2
    )
    (q,) = report.modes
    u = report.uniform
    assert q.mean("files_per_batch") < 1.1 < u["files_per_batch"] / 2  # ~1 file of 8
    assert q.mean("label_entropy") < 0.5 * u["label_entropy"]
    assert q.mean("label_autocorr") > 0.3
    if mode == "files":  # rows inside a file stay in stored order
        assert q.mean("adjacent_gap") < 0.01 * u["adjacent_gap"]


def test_sharded_report_measures_one_rank() -> None:
    report = shuffle_quality([1000, 1000], modes=["global", "none"], num_shards=4, epochs=2)
    glob, none = report.modes
    assert none.values["displacement"][0] < 0.01 and none.values["kendall_tau"][0] == 1.0
    assert glob.values["displacement"][0] == pytest.approx(1 / 3, abs=0.05)
    assert report.num_classes is None and glob.values["label_entropy"] == []


def test_bad_arguments_name_what_to_fix(sorted_dataset: Path) -> None:
    with pytest.raises(ArgumentError, match="unknown shuffle mode 'random'"):
        shuffle_quality([10], modes=["random"])
    with pytest.raises(ArgumentError, match="batch_size"):
        shuffle_quality([10], batch_size=0)
    with pytest.raises(SchemaError, match="label column 'nope'"):
        shuffle_report(sorted_dataset, label_column="nope")


def test_cli_json_and_plot(sorted_dataset: Path, tmp_path: Path) -> None:
    png = tmp_path / "mix.png"
    result = run(
        "shuffle-report", sorted_dataset, "--mode", "global", "--mode", "files",
        "--label-column", "label", "--epochs", "2", "--plot", png, "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["modes"]) == {"global", "files"}
    assert data["num_rows"] == N and data["num_classes"] == CLASSES
    assert len(data["modes"]["files"]["epoch_corr"]) == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = run("shuffle-report", sorted_dataset, "--label-column", "label", "--epochs", "2")
    assert text.exit_code == 0, text.output
    assert "uniform" in text.output and "GLOBAL" in text.output and "INFILE" in text.output
    assert "batch label entropy" in text.output
