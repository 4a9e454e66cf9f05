"""The fused image tail (flips, Rescale, Normalize, then HWC2CHW in one pass) and where it runs.

Fusion is a pure speed-up: the fused result must equal applying the ops one by one,
bit for bit, for every dtype and shape it accepts, and it must step aside (None) for the
inputs it does not handle so that the ops raise their own errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mrecord import vision
from mrecord.errors import ArgumentError, OperationError
from mrecord.pipeline import NumpySlicesDataset
from mrecord.pipeline.engine.op_chain import ChainSpec
from mrecord.pipeline.engine.seeds import op_seeds
from mrecord.transforms import TypeCast
from mrecord.transforms.fusion import fused_run

POINTWISE: list[Any] = [
    vision.RandomHorizontalFlip(),
    vision.RandomVerticalFlip(prob=0.3),
    vision.HorizontalFlip(),
    vision.VerticalFlip(),
    vision.Rescale(1.0 / 255.0, -0.5),
    vision.Rescale(2.0, 1.0),
    vision.Normalize([0.4914 * 255, 0.4822 * 255, 0.4465 * 255], [51.0, 50.0, 52.0]),
    vision.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    vision.Normalize([10.0], [3.0]),
]

runs = st.lists(st.sampled_from(POINTWISE), min_size=1, max_size=4).map(
    lambda ops: [*ops, vision.HWC2CHW()]
)
image_batches = hnp.arrays(
    st.sampled_from([np.uint8, np.float32]),
    st.tuples(
        st.integers(1, 5),
        st.sampled_from([1, 3, 8, 70]),  # 70 x 70 and more: the row-by-row path
        st.sampled_from([1, 2, 9, 70]),
        st.sampled_from([1, 3, 4]),
    ),
    elements=st.integers(0, 255),
)


def _one_by_one(ops: list[Any], batch: np.ndarray, seeds: list[np.ndarray]) -> np.ndarray:
    out = batch
    for op, s in zip(ops, seeds, strict=True):
        out = op.apply_batch(out, s)
    return out


@given(ops=runs, batch=image_batches, seed=st.integers(0, 2**63))
def test_fused_tail_equals_the_ops_one_by_one(ops: list[Any], batch: np.ndarray, seed: int) -> None:
    found = fused_run(ops, 0)
    assert found is not None and found[0] == len(ops)
    kernel = found[1]
    rng = np.random.default_rng(seed)
    seeds = [rng.integers(0, 2**63, len(batch)).astype(np.uint64) for _ in ops]
    try:
        expected = _one_by_one(ops, batch, seeds)
    except ArgumentError:  # e.g. 3-value Normalize on 4 channels: the kernel steps aside
        assert kernel(batch, seeds) is None
        return
    out = kernel(batch, seeds)
    assert out is not None
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)


def test_fused_tail_on_a_transposed_view() -> None:
    rng = np.random.default_rng(1)
    batch = rng.integers(0, 256, (3, 7, 5, 3), dtype=np.uint8).transpose(0, 2, 1, 3)
    ops = [vision.RandomHorizontalFlip(), vision.Normalize([1.0, 2.0, 3.0], [4, 5, 6]),
           vision.HWC2CHW()]  # fmt: skip
    seeds = [np.arange(3, dtype=np.uint64)] * 3
    found = fused_run(ops, 0)
    assert found is not None
    np.testing.assert_array_equal(found[1](batch, seeds), _one_by_one(ops, batch, seeds))


@pytest.mark.parametrize(
    ("ops", "start", "end"),
    [
        ([vision.Rescale(1, 0), vision.HWC2CHW()], 0, 2),
        ([vision.RandomCrop(2), vision.RandomHorizontalFlip(), vision.HWC2CHW()], 1, 3),
        ([vision.Rescale(1, 0), vision.HWC2CHW(), TypeCast("float16")], 0, 2),
    ],
)
def test_fusion_finds_runs_ending_in_hwc2chw(ops: list[Any], start: int, end: int) -> None:
    found = fused_run(ops, start)
    assert found is not None and found[0] == end


@pytest.mark.parametrize(
    "ops",
    [
        [vision.HWC2CHW()],  # nothing to fuse
        [vision.Rescale(1, 0), vision.Normalize([1.0], [2.0])],  # no HWC2CHW at the end
        [vision.Rescale(1, 0), TypeCast("float32"), vision.HWC2CHW()],  # not an image op
        [vision.Normalize([1.0], [2.0], is_hwc=False), vision.HWC2CHW()],  # CHW Normalize
        [vision.RandomColorAdjust(brightness=0.5), vision.HWC2CHW()],
    ],
    ids=repr,
)
def test_fusion_leaves_other_runs_alone(ops: list[Any]) -> None:
    assert fused_run(ops, 0) is None


def test_fused_tail_steps_aside_for_inputs_it_does_not_handle() -> None:
    ops = [vision.Rescale(1, 0), vision.HWC2CHW()]
    found = fused_run(ops, 0)
    assert found is not None
    kernel = found[1]
    seeds = [np.zeros(2, np.uint64)] * 2
    assert kernel(np.zeros((2, 4, 4, 3), np.int16), seeds) is None  # dtype
    assert kernel(np.zeros((2, 4, 4), np.uint8), seeds) is None  # <H, W> rows
    assert kernel(np.zeros((2, 0, 4, 3), np.uint8), seeds) is None  # empty images


def test_map_chunks_use_the_same_seeds_fused_or_not() -> None:
    """ChainSpec's result (fused tail) equals running each op with the map's op seeds."""
    rng = np.random.default_rng(2)
    chunk = rng.integers(0, 256, (9, 8, 8, 3), dtype=np.uint8)
    ops = (
        vision.RandomCrop(6, padding=1),
        vision.RandomHorizontalFlip(),
        vision.Rescale(1 / 255, 0),
        vision.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
        vision.HWC2CHW(),
    )
    keys = rng.integers(0, 2**63, 9).astype(np.uint64)
    positions = np.arange(9, dtype=np.int64)
    (out,) = ChainSpec(ops, "test map", ("image",), 1)(([chunk], keys, positions, positions))
    expected = chunk
    for j, op in enumerate(ops):
        seeds = op_seeds(keys, j)
        expected = np.stack([op(expected[i], seed=int(seeds[i])) for i in range(9)])
    np.testing.assert_array_equal(out, expected)


def test_pipeline_error_in_a_fused_run_names_the_op_and_row() -> None:
    """A 4-channel image with a 3-value Normalize: the kernel steps aside, the op reports."""
    images = np.zeros((6, 4, 4, 4), np.uint8)
    ds = NumpySlicesDataset({"image": images}, shuffle=False).map(
        [vision.RandomHorizontalFlip(), vision.Normalize([1.0, 2.0, 3.0], [1.0, 1.0, 1.0]),
         vision.HWC2CHW()],
        input_columns="image",
    )  # fmt: skip
    with pytest.raises(OperationError, match=r"Normalize.*row 0"):
        for _ in ds.create_dict_iterator(num_epochs=1):
            pass
