"""The offload contract: ``apply_batch(batch, seeds)`` equals the per-row calls with those seeds.

The pipeline relies on this to move the tail ops of a map after ``batch`` without changing
any output, so it is checked for every offloadable op, on uint8 and float inputs, over
random shapes and seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mrecord import transforms, vision

OFFLOADABLE: list[Any] = [
    vision.HWC2CHW(),
    vision.Normalize([0.4465 * 255, 0.4822 * 255, 0.4914 * 255], [51.0, 50.0, 52.0]),
    vision.Rescale(1.0 / 255.0, -0.5),
    vision.RandomHorizontalFlip(),
    vision.RandomVerticalFlip(prob=0.3),
    vision.RandomColorAdjust(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1),
    vision.RandomColorAdjust(contrast=(0.2, 1.8)),
    vision.RandomSharpness(),
    vision.RandomSharpness(degrees=(0.0, 0.5)),
    transforms.TypeCast(np.float32),
    transforms.TypeCast("int16"),
]

images = hnp.arrays(
    np.uint8,
    st.tuples(
        st.integers(1, 6),  # batch
        st.integers(1, 9),  # height
        st.integers(1, 9),  # width
        st.just(3),
    ),
)
seed_lists = st.lists(st.integers(0, 2**64 - 1), min_size=6, max_size=6)


def _rows(op: Any, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    return np.stack([op(batch[i], seed=int(seeds[i])) for i in range(batch.shape[0])])


@pytest.mark.parametrize("op", OFFLOADABLE, ids=repr)
def test_every_offloadable_op_declares_the_contract(op: Any) -> None:
    assert op.offloadable is True
    assert callable(op.apply_batch)
    assert isinstance(op.is_random, bool)


@pytest.mark.parametrize("op", OFFLOADABLE, ids=repr)
@given(batch=images, seed_values=seed_lists)
def test_batch_equals_stacked_rows_uint8(
    op: Any, batch: np.ndarray, seed_values: list[int]
) -> None:
    seeds = np.array(seed_values[: batch.shape[0]], dtype=np.uint64)
    out = op.apply_batch(batch, seeds)
    np.testing.assert_array_equal(out, _rows(op, batch, seeds))


@pytest.mark.parametrize("op", OFFLOADABLE, ids=repr)
@given(batch=images, seed_values=seed_lists)
def test_batch_equals_stacked_rows_float(
    op: Any, batch: np.ndarray, seed_values: list[int]
) -> None:
    floats = batch.astype(np.float32) / np.float32(255)
    seeds = np.array(seed_values[: batch.shape[0]], dtype=np.uint64)
    out = op.apply_batch(floats, seeds)
    np.testing.assert_allclose(out, _rows(op, floats, seeds), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "op",
    [
        vision.Normalize([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], is_hwc=False),
        vision.RandomHorizontalFlip(),
        vision.Rescale(2.0, 1.0),
        transforms.TypeCast(np.int32),
    ],
    ids=repr,
)
def test_batch_equals_rows_after_hwc2chw(op: Any) -> None:
    """Offloaded ops may run on CHW batches (after HWC2CHW), as MindSpore's offload does."""
    rng = np.random.default_rng(7)
    batch = vision.HWC2CHW().apply_batch(
        rng.integers(0, 256, (5, 4, 6, 3), dtype=np.uint8), np.zeros(5, np.uint64)
    )
    seeds = rng.integers(0, 2**63, 5).astype(np.uint64)
    np.testing.assert_allclose(op.apply_batch(batch, seeds), _rows(op, batch, seeds))


@pytest.mark.parametrize("op", [op for op in OFFLOADABLE if op.is_random], ids=repr)
def test_same_seed_same_output_and_seeds_matter(op: Any) -> None:
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    np.testing.assert_array_equal(op(img, seed=12345), op(img, seed=12345))
    outputs = {op(img, seed=s).tobytes() for s in range(40)}
    assert len(outputs) > 1, "40 different seeds all gave the same output"


def test_apply_batch_checks_the_number_of_seeds() -> None:
    with pytest.raises(ValueError, match="seeds has 2 entries for a batch of 3 rows"):
        vision.RandomHorizontalFlip().apply_batch(
            np.zeros((3, 2, 2, 3), np.uint8), np.array([1, 2], np.uint64)
        )


def test_flip_probability_is_respected_over_many_rows() -> None:
    """RandomHorizontalFlip(prob=0.3) flips about 30% of rows (2,000 fixed seeds)."""
    batch = np.zeros((2000, 1, 2, 1), np.uint8)
    batch[:, 0, 1, 0] = 1
    seeds = np.arange(2000, dtype=np.uint64) * np.uint64(7919)
    out = vision.RandomHorizontalFlip(prob=0.3).apply_batch(batch, seeds)
    flipped = float(np.mean(out[:, 0, 0, 0] == 1))
    assert 0.25 < flipped < 0.35
    assert not np.any(vision.RandomHorizontalFlip(prob=0.0).apply_batch(batch, seeds)[:, 0, 0, 0])
    assert np.all(vision.RandomHorizontalFlip(prob=1.0).apply_batch(batch, seeds)[:, 0, 0, 0])


def test_non_offloadable_ops_say_so() -> None:
    for op in [
        vision.Decode(),
        vision.Resize(4),
        vision.RandomCrop(2),
        vision.RandomResizedCrop(4),
        vision.CenterCrop(2),
        vision.SlicePatches(2, 2),
        transforms.OneHot(3),
        transforms.Compose([vision.Rescale(1.0, 0.0)]),
    ]:
        assert op.offloadable is False, op
