"""Recycled memory for large arrays: never shared with a live array, same values as numpy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from mrecord.transforms import buffers


@pytest.fixture(autouse=True)
def _empty_pool() -> None:
    buffers.release()


def _big_shape() -> tuple[int, int]:
    return (buffers.MIN_BYTES // 4 // 1000 + 1, 1000)  # float32, just over the pooling size


def test_recycled_blocks_are_never_shared_with_a_live_array() -> None:
    """A large array's block goes back to the pool only when its last view is gone."""
    shape = _big_shape()
    first = buffers.empty(shape, np.float32)
    first[...] = 7.0
    view = first[1:3].T  # outlives ``first``
    del first
    gc.collect()
    assert buffers.pooled_bytes() == 0  # still in use through ``view``
    second = buffers.empty(shape, np.float32)
    assert not np.shares_memory(second, view)
    second[...] = 0.0
    assert np.all(view == 7.0)
    del view
    gc.collect()
    assert buffers.pooled_bytes() > 0  # back in the pool
    third = buffers.empty(shape, np.float32)  # reuses it
    assert buffers.pooled_bytes() == 0
    assert not np.shares_memory(third, second)
    assert third.flags.c_contiguous and third.flags.writeable and third.shape == shape


def test_small_arrays_are_plain_numpy_arrays() -> None:
    small = buffers.empty((4, 4), np.float32)
    assert small.flags.owndata and small.shape == (4, 4)


def test_pool_is_bounded_and_can_be_released() -> None:
    shape = _big_shape()
    arrays = [buffers.empty(shape, np.float32) for _ in range(buffers.MAX_BLOCKS + 3)]
    size = arrays[0].nbytes
    del arrays
    gc.collect()
    assert buffers.pooled_bytes() == buffers.MAX_BLOCKS * size
    buffers.release()
    assert buffers.pooled_bytes() == 0


@pytest.mark.parametrize("rows", [2, 40])
def test_stack_equals_numpy_stack(rows: int) -> None:
    rng = np.random.default_rng(rows)
    row_shape = (224, 224, 3)  # 40 rows of these are over MIN_BYTES, 2 rows are not
    values = [rng.integers(0, 256, row_shape, dtype=np.uint8) for _ in range(rows)]
    out = buffers.stack(values, np.uint8)
    np.testing.assert_array_equal(out, np.stack(values))
    assert out.dtype == np.uint8 and out.flags.c_contiguous
