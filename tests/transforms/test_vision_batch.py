"""Vectorized forms of the image ops: RandomCrop over a batch, flips, Normalize, the seeds.

The contract every batch form keeps: ``op.apply_batch(batch, seeds)[i] == op(batch[i],
seed=seeds[i])``. Expected values below come from that contract, from numpy written out
independently, or from the splitmix64 formula of ``mrecord.transforms.seeding``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mrecord import vision
from mrecord.errors import ArgumentError
from mrecord.pipeline.engine.op_chain import is_batchable, is_offloadable
from mrecord.transforms.seeding import uniforms
from mrecord.vision._crop_box import crop_box_for_seed, random_resized_crop_box

seed_lists = st.lists(st.integers(0, 2**64 - 1), min_size=8, max_size=8)
MASK64 = (1 << 64) - 1


def _rows(op: Any, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    return np.stack([op(batch[i], seed=int(seeds[i])) for i in range(batch.shape[0])])


# ---- RandomCrop --------------------------------------------------------------------------

CROPS = [
    vision.RandomCrop(4, padding=2),
    vision.RandomCrop((3, 5), padding=(1, 2)),
    vision.RandomCrop(5, padding=(0, 1, 2, 3), fill_value=(7, 8, 9)),
    vision.RandomCrop(6, pad_if_needed=True, fill_value=200),
    vision.RandomCrop(4, padding=2, padding_mode=vision.Border.EDGE),
    vision.RandomCrop(4, padding=3, padding_mode=vision.Border.REFLECT),
    vision.RandomCrop(4, padding=3, padding_mode=vision.Border.SYMMETRIC),
    vision.RandomCrop(2),
]

crop_batches = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 8), st.integers(2, 7), st.integers(2, 7), st.sampled_from([1, 3])),
)


@pytest.mark.parametrize("op", CROPS, ids=repr)
@given(batch=crop_batches, seed_values=seed_lists)
def test_random_crop_batch_equals_rows(op: Any, batch: np.ndarray, seed_values: list[int]) -> None:
    seeds = np.array(seed_values[: batch.shape[0]], dtype=np.uint64)
    try:
        expected = _rows(op, batch, seeds)
    except ArgumentError:  # too small for this crop: the batch form says so too
        with pytest.raises(ArgumentError, match="pad_if_needed"):
            op.apply_batch(batch, seeds)
        return
    np.testing.assert_array_equal(op.apply_batch(batch, seeds), expected)


@given(batch=hnp.arrays(np.float32, st.tuples(st.integers(1, 5), st.just(6), st.just(6))))
def test_random_crop_batch_of_grey_float_images(batch: np.ndarray) -> None:
    op = vision.RandomCrop(4, padding=1)
    seeds = np.arange(batch.shape[0], dtype=np.uint64) * np.uint64(977)
    out = op.apply_batch(batch, seeds)
    assert out.shape == (batch.shape[0], 4, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out, _rows(op, batch, seeds))


def test_random_crop_batch_rows_are_windows_of_the_padded_images() -> None:
    """Each output row is the 32x32 window at a corner in [0, 8]^2 of its padded image."""
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 256, (40, 32, 32, 3), dtype=np.uint8)
    padded = np.zeros((40, 40, 40, 3), np.uint8)
    padded[:, 4:36, 4:36] = batch
    out = vision.RandomCrop(32, padding=4).apply_batch(batch, np.arange(40, dtype=np.uint64))
    corners = set()
    for i in range(40):
        found = [
            (t, left)
            for t in range(9)
            for left in range(9)
            if np.array_equal(padded[i, t : t + 32, left : left + 32], out[i])
        ]
        assert found, f"row {i} is not a window of its padded image"
        corners.add(found[0])
    assert len(corners) > 15  # 81 possible corners, 40 draws


def test_random_crop_is_batchable_but_not_offloadable() -> None:
    """It changes the image size, so it must run before batch stacks the rows."""
    op = vision.RandomCrop(32, padding=4)
    assert is_batchable(op) and not is_offloadable(op)
    assert is_batchable(vision.HorizontalFlip()) and not is_offloadable(vision.HorizontalFlip())
    assert not is_batchable(vision.Resize(4)) and not is_batchable(vision.Decode())


# ---- flips, Normalize, Rescale -----------------------------------------------------------

flip_batches = hnp.arrays(
    st.sampled_from([np.uint8, np.float32, np.int64]),
    st.tuples(st.integers(0, 7), st.integers(0, 5), st.integers(0, 5), st.integers(0, 4)),
)


@pytest.mark.parametrize("axis", [0, 1])
@given(batch=flip_batches, seed_values=seed_lists, prob=st.sampled_from([0.0, 0.3, 1.0]))
def test_random_flip_rows_are_flipped_or_kept(
    axis: int, batch: np.ndarray, seed_values: list[int], prob: float
) -> None:
    op = vision.RandomVerticalFlip(prob) if axis == 0 else vision.RandomHorizontalFlip(prob)
    seeds = np.array(seed_values[: batch.shape[0]], dtype=np.uint64)
    flips = uniforms(seeds, 1, op._salt)[:, 0] < prob
    out = op.apply_batch(batch, seeds)
    assert out.flags.c_contiguous and out.dtype == batch.dtype and out.shape == batch.shape
    assert not np.shares_memory(out, batch)
    for i in range(batch.shape[0]):
        want = np.flip(batch[i], axis=axis) if flips[i] else batch[i]
        np.testing.assert_array_equal(out[i], want)


def test_flip_does_not_share_memory_with_a_one_pixel_input() -> None:
    img = np.array([[[5]]], dtype=np.uint8)
    out = vision.HorizontalFlip()(img)
    out[...] = 0
    assert img[0, 0, 0] == 5


@given(
    batch=hnp.arrays(
        st.sampled_from([np.uint8, np.float32, np.float64, np.int16]),
        st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 5), st.just(3)),
        elements=st.integers(0, 255),
    )
)
def test_normalize_hwc_is_the_plain_formula(batch: np.ndarray) -> None:
    """The tiled fast path gives exactly ``(x.astype(float32) - mean) / std``."""
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    out = vision.Normalize(mean, std).apply_batch(batch, np.zeros(batch.shape[0], np.uint64))
    expected = (batch.astype(np.float32) - np.array(mean, np.float32)) / np.array(std, np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)


def test_normalize_one_value_for_every_channel() -> None:
    img = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    out = vision.Normalize([10.0], [4.0])(img)
    np.testing.assert_array_equal(out, (img.astype(np.float32) - 10) / 4)


def test_rescale_is_the_plain_formula_in_float32() -> None:
    img = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = vision.Rescale(1.0 / 255.0, -0.5)(img)
    expected = img.astype(np.float32) * np.float32(1.0 / 255.0) + np.float32(-0.5)
    np.testing.assert_array_equal(out, expected)


# ---- seeds -------------------------------------------------------------------------------


def _splitmix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _uniform_reference(seed: int, i: int, salt: int) -> float:
    """The seeding module's formula, written out with Python ints."""
    base = _splitmix((seed ^ salt) & MASK64)
    state = (base + 0x9E3779B97F4A7C15 * (i + 1)) & MASK64
    return (_splitmix(state) >> 11) * 2.0**-53


@given(
    seeds=st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=20),
    count=st.integers(0, 45),
    salt=st.integers(0, 2**64 - 1),
)
def test_uniforms_follow_the_formula_for_any_shape(seeds: list[int], count: int, salt: int) -> None:
    """Small draws (Python ints) and large ones (numpy) both give the documented values."""
    out = uniforms(np.array(seeds, dtype=np.uint64), count, salt)
    assert out.shape == (len(seeds), count)
    expected = [[_uniform_reference(s, i, salt) for i in range(count)] for s in seeds]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float64).reshape(out.shape))


@given(
    height=st.integers(1, 500),
    width=st.integers(1, 500),
    scale=st.tuples(st.floats(0.01, 1.0), st.floats(0.01, 1.5)).map(sorted),
    ratio=st.tuples(st.floats(0.1, 3.0), st.floats(0.1, 3.0)).map(sorted),
    max_attempts=st.integers(1, 12),
    seed=st.integers(0, 2**64 - 1),
)
def test_crop_box_drawn_on_demand_is_the_full_draw_box(
    height: int,
    width: int,
    scale: list[float],
    ratio: list[float],
    max_attempts: int,
    seed: int,
) -> None:
    seeds = np.array([seed], dtype=np.uint64)
    sc, ra = (scale[0], scale[1]), (ratio[0], ratio[1])
    full = random_resized_crop_box(
        height, width, sc, ra, max_attempts, uniforms(seeds, 4 * max_attempts, 5)[0]
    )
    lazy = crop_box_for_seed(height, width, sc, ra, max_attempts, lambda k: uniforms(seeds, k, 5))
    assert lazy == full
    top, left, crop_h, crop_w = lazy
    assert top >= 0 and left >= 0
    assert top + crop_h <= height and left + crop_w <= width
