"""Cifar10Dataset, MnistDataset, ImageFolderDataset and padded_batch against MindSpore 2.10.

``tests/cases/source_cases.json`` was produced by ``tools/gen_source_cases.py`` running
MindSpore on the same raw files (written by ``mrecord.testing.rawdata``); each case is
replayed here through the same code with ``mrecord`` in place of ``mindspore.dataset``.
Row ids (stored in the pixels) and labels must come out in the same order, sizes, column
names, dtypes and shapes must agree, and argument conflicts must raise the same builtin
class (and, where marked, the same message). Differences that are deliberate are listed
in ``DIFFERENCES`` with their reason (docs/MINDSPORE_DIFFERENCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mrecord
from mrecord.testing.rawdata import observe, write_case_sources

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "cases" / "source_cases.json").read_text()
)
BUILTINS = {"ValueError": ValueError, "RuntimeError": RuntimeError, "TypeError": TypeError}

_SIZE_REASON = (
    "MindSpore's get_dataset_size counts every class folder (12) while only the 9 images "
    "of the folders in class_indexing come out"
)
# name -> (what mrecord gives instead, why)
DIFFERENCES: dict[str, tuple[dict[str, Any], str]] = {
    "imagefolder_class_indexing": ({"size": 9}, _SIZE_REASON),
    "imagefolder_class_indexing_meta": ({"size": 9}, _SIZE_REASON),
    "padded_batch_too_small": (
        {"error": "RuntimeError"},
        "MindSpore silently cuts rows longer than the pad shape; mrecord refuses to drop data",
    ),
    "padded_batch_unnamed_column": (
        {"pads": True},
        "MindSpore's docs say columns missing from pad_info are padded to the largest with 0, "
        "but it raises; mrecord does what the docs say",
    ),
}
PK_REASON = (
    "MindSpore's PKSampler on these sources picks random rows even with shuffle=False and "
    "repeats rows; mrecord takes the first num_val rows of each class (same classes, counts)"
)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_case_sources(tmp_path_factory.mktemp("raw"))


def _by_name(case: dict[str, Any]) -> str:
    return str(case["name"])


@pytest.mark.parametrize("case", [c for c in CASES if "expect" in c], ids=_by_name)
def test_output_matches_mindspore(case: dict[str, Any], paths: dict[str, Path]) -> None:
    expect = dict(case["expect"])
    name = case["name"]
    if name in DIFFERENCES:
        override, _why = DIFFERENCES[name]
        if "error" in override:
            with pytest.raises(BUILTINS[override["error"]]):
                observe(mrecord, paths, case["args"])
            return
        expect.update(override)
    got = observe(mrecord, paths, case["args"])
    if name.endswith("_sampler_pk"):  # see PK_REASON
        assert (got["size"], got["labels"]) == (expect["size"], expect["labels"])
        return
    assert got == expect


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=_by_name)
def test_errors_match_mindspore(case: dict[str, Any], paths: dict[str, Path]) -> None:
    name = case["name"]
    if name in DIFFERENCES:
        override, _why = DIFFERENCES[name]
        assert override == {"pads": True}
        got = observe(mrecord, paths, case["args"])
        assert got["batches"][0]["b"] == [[[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]
        return
    with pytest.raises(BUILTINS[case["error"]]) as info:
        observe(mrecord, paths, case["args"])
    if case["error"] != "TypeError":  # a wrong argument type stays a plain TypeError
        assert isinstance(info.value, mrecord.MrecordError)
    if case["match"]:
        assert case["message"] in str(info.value)


def test_the_cases_cover_every_source_and_kind() -> None:
    names = {c["name"] for c in CASES}
    for source in ("cifar10", "mnist", "imagefolder"):
        for kind in ("meta", "order", "use_sampler", "sampler_child", "err_sampler_shards"):
            assert f"{source}_{kind}" in names
    assert sum(n.startswith("padded_batch_") for n in names) >= 5
