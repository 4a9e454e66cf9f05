"""mrecord.transforms (TypeCast, Compose, OneHot, Fill, Duplicate) and the per-row seeding."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import transforms, vision
from mrecord.errors import ArgumentError
from mrecord.transforms import seeding


def test_type_cast_follows_numpy_astype() -> None:
    out = transforms.TypeCast(np.int32)(np.array([1.7, -2.2, 3.0]))
    assert out.dtype == np.int32
    assert out.tolist() == [1, -2, 3]
    assert transforms.TypeCast("float16")(np.array([1], np.uint8)).dtype == np.float16
    assert repr(transforms.TypeCast(np.float32)) == "TypeCast(data_type='float32')"
    scalar = transforms.TypeCast(np.int32)(np.array(7, dtype=np.int64))
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar.dtype == np.int32


def test_type_cast_rejects_non_dtypes() -> None:
    with pytest.raises(TypeError, match="data_type"):
        transforms.TypeCast(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data_type"):
        transforms.TypeCast("no-such-type")


def test_one_hot_encodes_labels() -> None:
    out = transforms.OneHot(4)(np.array([2, 0], dtype=np.int32))
    assert out.dtype == np.int32
    assert out.tolist() == [[0, 0, 1, 0], [1, 0, 0, 0]]
    smooth = transforms.OneHot(4, smoothing_rate=0.2)(np.array(1))
    np.testing.assert_allclose(smooth, [0.05, 0.85, 0.05, 0.05], rtol=1e-6)


def test_one_hot_out_of_range_label_is_named() -> None:
    with pytest.raises(ArgumentError, match=r"label 5 is outside \[0, 3\)"):
        transforms.OneHot(3)(np.array([1, 5]))


def test_fill_keeps_shape_and_dtype() -> None:
    out = transforms.Fill(7)(np.zeros((2, 3), np.uint8))
    assert out.dtype == np.uint8 and out.shape == (2, 3)
    assert np.all(out == 7)


def test_duplicate_returns_an_independent_copy() -> None:
    x = np.arange(4)
    a, b = transforms.Duplicate()(x)
    b[0] = 99
    assert a[0] == 0 and x[0] == 0


def test_compose_chains_ops_and_tuples() -> None:
    op = transforms.Compose([vision.Rescale(2.0, 1.0), transforms.Duplicate()])
    a, b = op(np.array([[1, 2]], np.uint8))
    np.testing.assert_array_equal(a, [[3.0, 5.0]])
    np.testing.assert_array_equal(b, a)
    merge = transforms.Compose([lambda x, y: x + y])
    assert merge(np.array(1), np.array(2)) == 3


def test_compose_random_ops_get_independent_sub_seeds() -> None:
    """Two identical random ops in one Compose must not make the same draw on every row."""
    op = transforms.Compose([vision.RandomHorizontalFlip(), vision.RandomHorizontalFlip()])
    assert op.is_random
    img = np.array([[[1], [2]]], np.uint8)
    outcomes = {op(img, seed=s).tobytes() for s in range(64)}
    assert len(outcomes) == 2  # flipped an odd number of times in some rows, even in others
    np.testing.assert_array_equal(op(img, seed=5), op(img, seed=5))


def test_compose_argument_checks() -> None:
    with pytest.raises(TypeError, match="transforms"):
        transforms.Compose(vision.HWC2CHW())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        transforms.Compose([])
    with pytest.raises(TypeError, match="not callable"):
        transforms.Compose([1])  # type: ignore[list-item]


def test_ops_take_one_input_and_validate_seed() -> None:
    with pytest.raises(TypeError, match="takes 1 input array"):
        vision.HWC2CHW()(np.zeros((2, 2, 3)), np.zeros((2, 2, 3)))
    with pytest.raises(TypeError, match="seed must be an int"):
        vision.RandomHorizontalFlip()(np.zeros((2, 2, 3)), seed="1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "op",
    [
        vision.Normalize([1, 2, 3], [1, 2, 3]),
        vision.RandomColorAdjust(0.2, 0.2, 0.2, 0.1),
        vision.RandomCrop(4, padding=(1, 2)),
        vision.SlicePatches(2, 2),
        transforms.TypeCast(np.int8),
        transforms.Compose([vision.RandomSharpness(), vision.HWC2CHW()]),
    ],
    ids=repr,
)
def test_ops_pickle_for_worker_processes(op: Any) -> None:
    """python_multiprocessing=True sends ops to worker processes by pickling them."""
    img = np.random.default_rng(0).integers(0, 256, (6, 6, 3), dtype=np.uint8)
    clone = pickle.loads(pickle.dumps(op))
    kwargs = {"seed": 11} if op.is_random else {}
    a, b = op(img, **kwargs), clone(img, **kwargs)
    for x, y in zip(
        a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True
    ):
        np.testing.assert_array_equal(x, y)


# ---- seeding -------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20), st.integers(1, 6))
def test_uniforms_are_per_seed_and_in_range(seeds: list[int], count: int) -> None:
    arr = np.array(seeds, dtype=np.uint64)
    batch = seeding.uniforms(arr, count, salt=3)
    assert batch.shape == (len(seeds), count)
    assert np.all((batch >= 0) & (batch < 1))
    for i, s in enumerate(seeds):  # one row at a time gives the same numbers
        np.testing.assert_array_equal(
            seeding.uniforms(np.array([s], np.uint64), count, 3)[0], batch[i]
        )


def test_uniforms_look_uniform_and_salts_differ() -> None:
    u = seeding.uniforms(np.arange(20000, dtype=np.uint64), 2)
    assert abs(u.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.03
    histogram = np.histogram(u[:, 0], bins=10, range=(0, 1))[0]
    assert histogram.min() > 1800 and histogram.max() < 2200
    other = seeding.uniforms(np.arange(20000, dtype=np.uint64), 2, salt=1)
    assert not np.array_equal(u, other)


def test_normalize_seed_wraps_and_rejects_non_ints() -> None:
    assert seeding.normalize_seed(-1) == 2**64 - 1
    assert seeding.normalize_seed(np.uint64(5)) == 5
    with pytest.raises(TypeError):
        seeding.normalize_seed(1.5)
    with pytest.raises(TypeError):
        seeding.normalize_seed(True)
