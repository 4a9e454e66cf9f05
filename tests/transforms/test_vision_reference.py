"""The transforms against MindSpore 2.10's own outputs (tests/cases/transform_cases.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import vision

CASES_FILE = Path(__file__).parents[1] / "cases" / "transform_cases.json"
CASES: dict[str, dict[str, Any]] = {
    case["name"]: case for case in json.loads(CASES_FILE.read_text())["cases"]
}
# The reference floats are rounded to 6 places; float32 arithmetic adds < 1e-6 more.
FLOAT_TOL = 1.5e-6


def _input(case: dict[str, Any]) -> np.ndarray:
    shape = tuple(case["args"]["shape"])
    return (np.arange(int(np.prod(shape))) % 256).astype(np.uint8).reshape(shape)


def test_slice_patches_pad_matches_mindspore() -> None:
    case = CASES["slice_patches_pad"]
    patches = vision.SlicePatches(case["args"]["h"], case["args"]["w"])(_input(case))
    expected = np.array(case["expect"], dtype=np.uint8)
    assert len(patches) == len(expected)
    for got, want in zip(patches, expected, strict=True):
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)


def test_rescale_matches_mindspore() -> None:
    case = CASES["rescale"]
    out = vision.Rescale(case["args"]["rescale"], case["args"]["shift"])(_input(case))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.array(case["expect"]), rtol=0, atol=FLOAT_TOL)


def test_normalize_matches_mindspore() -> None:
    case = CASES["normalize"]
    out = vision.Normalize(case["args"]["mean"], case["args"]["std"])(_input(case))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.array(case["expect"]), rtol=0, atol=FLOAT_TOL)


def test_hwc2chw_matches_mindspore() -> None:
    case = CASES["hwc2chw"]
    out = vision.HWC2CHW()(_input(case))
    np.testing.assert_array_equal(out, np.array(case["expect"], dtype=np.uint8))


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("hflip", vision.HorizontalFlip()),
        ("hflip", vision.RandomHorizontalFlip(prob=1.0)),
        ("vflip", vision.VerticalFlip()),
        ("vflip", vision.RandomVerticalFlip(prob=1.0)),
    ],
    ids=repr,
)
def test_flips_match_mindspore(name: str, op: Any) -> None:
    case = CASES[name]
    np.testing.assert_array_equal(op(_input(case)), np.array(case["expect"], dtype=np.uint8))


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("rescale", vision.Rescale(CASES["rescale"]["args"]["rescale"], -0.5)),
        ("normalize", vision.Normalize([1, 2, 3], [2, 4, 8])),
        ("hwc2chw", vision.HWC2CHW()),
        ("hflip", vision.RandomHorizontalFlip(prob=1.0)),
        ("vflip", vision.RandomVerticalFlip(prob=1.0)),
    ],
    ids=repr,
)
def test_offloaded_batch_matches_mindspore_per_row(name: str, op: Any) -> None:
    """The vectorized batch form gives MindSpore's per-row result for every row."""
    case = CASES[name]
    batch = np.stack([_input(case)] * 3)
    out = op.apply_batch(batch, np.array([1, 2, 3], dtype=np.uint64))
    expected = np.array(case["expect"])
    for row in out:
        np.testing.assert_allclose(row, expected, rtol=0, atol=FLOAT_TOL)
