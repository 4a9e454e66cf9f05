"""Dataset slicing: the dataset_strategy rules, per-rank patch choice, and the doc's example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import slicing, vision
from mrecord.errors import ArgumentError

# ---- the two rules of MindSpore's dataset-slicing doc (its own examples) -------------------


@pytest.mark.parametrize(
    "strategy",
    [((1, 1, 1, 8), (8,)), ((1, 1, 1, 8), (1,)), ((1, 1, 1, 1, 1), (1,)), ((1, 1, 8, 1), (2,))],
)
def test_strategies_the_doc_accepts(strategy: tuple[tuple[int, ...], ...]) -> None:
    assert slicing.check_dataset_strategy(strategy) == strategy


def test_rule_1_one_sliced_dimension_per_input() -> None:
    with pytest.raises(ArgumentError, match=r"dataset_strategy\[0\] = \(1, 1, 4, 2\).*at most one"):
        slicing.check_dataset_strategy(((1, 1, 4, 2), (1,)))


def test_rule_2_the_input_with_most_dimensions_has_most_slices() -> None:
    with pytest.raises(ArgumentError, match=r"dataset_strategy\[1\] = \(8,\) cuts input 1 into 8"):
        slicing.check_dataset_strategy(((1, 1, 1, 1), (8,)))


def test_malformed_strategies_are_type_errors() -> None:
    for bad in [None, (), ((),), ((1, "8"),), (8,), ((1, 0),)]:
        with pytest.raises((TypeError, ArgumentError)):
            slicing.check_dataset_strategy(bad)


@given(
    dims=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    slices=st.integers(1, 16),
    axis=st.integers(0, 4),
    label=st.integers(1, 16),
)
def test_rules_as_properties(dims: list[int], slices: int, axis: int, label: int) -> None:
    """A one-dimension strategy passes exactly when the label is cut into no more parts."""
    image = [1] * len(dims)
    image[axis % len(dims)] = slices
    strategy = (tuple(image), (label,))
    # (when the image has one dimension too, the first input counts as the one with the most)
    if label > slices:
        with pytest.raises(ArgumentError):
            slicing.check_dataset_strategy(strategy)
    else:
        assert slicing.check_dataset_strategy(strategy) == strategy


# ---- per-rank patch column -------------------------------------------------------------


def test_each_rank_keeps_patch_rank_mod_n() -> None:
    columns = [slicing.plan_slices(rank, 1, 8).column for rank in range(16)]
    assert columns == [f"img{r % 8}" for r in range(16)]
    plan = slicing.plan_slices(3, 2, 2)
    assert plan.columns == ["img0", "img1", "img2", "img3"] and plan.index == 3


def test_plan_checks_the_strategy_against_the_grid() -> None:
    plan = slicing.plan_slices(5, 1, 8, dataset_strategy=((1, 1, 1, 8), (1,)))
    assert plan.column == "img5"
    assert plan.dataset_strategy == ((1, 1, 1, 8), (1,))
    with pytest.raises(ArgumentError, match=r"use dataset_strategy\[0\] = \(1, 1, 8, 1\)"):
        slicing.plan_slices(0, 8, 1, dataset_strategy=((1, 1, 1, 8), (1,)))
    with pytest.raises(ArgumentError, match="slice along H or W only"):
        slicing.plan_slices(0, 2, 4, dataset_strategy=((1, 1, 1, 8), (1,)))
    with pytest.raises(ArgumentError, match="rank must be >= 0"):
        slicing.plan_slices(-1, 1, 8)


def test_rank_and_group_size_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK_ID", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("RANK_SIZE", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert (slicing.get_rank(), slicing.get_group_size()) == (0, 1)
    monkeypatch.setenv("RANK_ID", "6")
    monkeypatch.setenv("RANK_SIZE", "8")
    assert (slicing.get_rank(), slicing.get_group_size()) == (6, 8)


# ---- the doc's create_dataset, with the ops called eagerly -----------------------------------


def _doc_image_pipeline(
    img: np.ndarray, label: int, rank: int, seed: int
) -> tuple[np.ndarray, int]:
    """One row through the doc's ops: crop, flip, resize, rescale, normalize, slice, HWC2CHW."""
    slice_h_num, slice_w_num = 1, 8
    ops = [
        vision.RandomCrop((32, 32), (4, 4, 4, 4)),
        vision.RandomHorizontalFlip(),
        vision.Resize((224, 224)),
        vision.Rescale(1.0 / 255.0, 0.0),
        vision.Normalize((0.4465, 0.4822, 0.4914), (0.2010, 0.1994, 0.2023)),
    ]
    for i, op in enumerate(ops):
        img = op(img, seed=seed + i) if op.is_random else op(img)
    plan = slicing.plan_slices(
        rank, slice_h_num, slice_w_num, ((1, 1, slice_h_num, slice_w_num), (1,))
    )
    patches = dict(
        zip(plan.columns, vision.SlicePatches(slice_h_num, slice_w_num)(img), strict=True)
    )
    return vision.HWC2CHW()(patches[plan.column]), label


def test_ranks_get_disjoint_patches_that_tile_the_image() -> None:
    """Every rank applies the same random ops (same seed) and keeps its own 224 x 28 strip."""
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    strips = [_doc_image_pipeline(img, 1, rank, seed=77)[0] for rank in range(8)]
    assert all(s.shape == (3, 224, 28) for s in strips)
    whole = np.concatenate(strips, axis=2)  # side by side along W
    full = img
    for i, op in enumerate(
        [
            vision.RandomCrop((32, 32), (4, 4, 4, 4)),
            vision.RandomHorizontalFlip(),
            vision.Resize((224, 224)),
        ]
    ):
        full = op(full, seed=77 + i) if op.is_random else op(full)
    full = vision.Normalize((0.4465, 0.4822, 0.4914), (0.2010, 0.1994, 0.2023))(
        vision.Rescale(1.0 / 255.0, 0.0)(full)
    )
    np.testing.assert_array_equal(whole, vision.HWC2CHW()(full))


def test_doc_example_through_the_pipeline_when_available() -> None:
    """The doc's map -> SlicePatches (1 column -> 8) -> project flow, if the pipeline is there."""
    numpy_slices = pytest.importorskip("mrecord.pipeline.sources.numpy_slices")
    rank, n = 3, 8
    images = np.random.default_rng(1).integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    data = numpy_slices.NumpySlicesDataset(
        {"image": images, "label": np.arange(4, dtype=np.int32)}, shuffle=False
    )
    plan = slicing.plan_slices(rank, 1, n, ((1, 1, 1, n), (1,)))
    data = data.map(
        operations=vision.SlicePatches(1, n), input_columns="image", output_columns=plan.columns
    )
    data = data.project([plan.column, "label"])
    data = data.map(operations=vision.HWC2CHW(), input_columns=plan.column)
    rows = list(data.create_dict_iterator(num_epochs=1))
    assert len(rows) == 4
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row[plan.column], images[i, :, 6:8].transpose(2, 0, 1))
