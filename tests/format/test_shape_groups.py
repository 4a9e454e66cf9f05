"""Variable-shape values cut out of one buffer by shape (``format/shape_groups.py``): the
reader's and the reader service's way to make many small arrays. Each value equals the
bytes it was cut from, at its place in the result, whatever the starts (unaligned,
repeated, overlapping), the shapes (empty, one of a kind, big) and the dtype; small
values are writeable arrays sharing memory with nothing else, big ones copies or, when
asked, views of the buffer."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord.format.shape_groups import (
    GROUP_MAX_BYTES,
    GROUP_MIN_ROWS,
    row_products,
    stable_order,
    values_by_shape,
)

DTYPES = ["uint8", "int16", "float32", "float64"]


@st.composite
def cuts(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype, np.ndarray]:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    # few distinct shapes, so that groups of GROUP_MIN_ROWS and more happen
    kinds = draw(
        st.lists(
            st.tuples(st.integers(0, 6), st.sampled_from([0, 1, 3, 700])), min_size=1, max_size=4
        )
    )
    n = draw(st.integers(0, 4 * GROUP_MIN_ROWS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shapes = np.array([kinds[i] for i in rng.integers(0, len(kinds), n)], dtype=np.int64)
    shapes = shapes.reshape(n, 2)
    sizes = shapes.prod(axis=1) * dtype.itemsize
    data = rng.integers(0, 256, int(sizes.max(initial=0)) + 64, dtype=np.uint8)
    starts = np.array([rng.integers(0, len(data) - s + 1) for s in sizes], dtype=np.int64)
    return data, starts, shapes, dtype, rng.permutation(n)


@settings(max_examples=60, deadline=None)
@given(cut=cuts(), copy_big=st.booleans())
def test_every_value_is_its_bytes_at_its_place(
    cut: tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype, np.ndarray], copy_big: bool
) -> None:
    data, starts, shapes, dtype, where = cut
    result: list[object] = [None] * len(starts)
    values_by_shape(data, starts, shapes, dtype, where, result, copy_big=copy_big)
    for i, (start, shape) in enumerate(zip(starts.tolist(), shapes.tolist(), strict=True)):
        value = result[where[i]]
        size = int(np.prod(shape)) * dtype.itemsize
        want = np.frombuffer(data[start : start + size].tobytes(), dtype=dtype).reshape(shape)
        assert isinstance(value, np.ndarray)
        assert value.dtype == dtype and value.shape == tuple(shape)
        np.testing.assert_array_equal(value, want)
        if size > GROUP_MAX_BYTES and not copy_big:
            assert np.shares_memory(value, data)  # a view of the buffer, as asked
        else:
            assert not np.shares_memory(value, data)
            assert value.flags.writeable


def test_values_of_one_group_share_no_memory_with_each_other() -> None:
    data = np.arange(4096, dtype=np.uint8)
    n = 4 * GROUP_MIN_ROWS
    starts = np.arange(n, dtype=np.int64) * 7  # unaligned, overlapping windows of 12 bytes
    shapes = np.full((n, 2), [1, 3], dtype=np.int64)
    result: list[np.ndarray] = [np.empty(0)] * n
    values_by_shape(data, starts, shapes, np.dtype("float32"), np.arange(n), result)
    result[0][...] = -1.0  # writing one value changes no other and not the buffer
    assert all(not np.any(v == -1.0) for v in result[1:])
    assert np.array_equal(data, np.arange(4096, dtype=np.uint8))
    assert result[3].tobytes() == data[21:33].tobytes()


@settings(max_examples=40, deadline=None)
@given(
    firsts=st.lists(st.integers(0, 64), min_size=1, max_size=3 * GROUP_MIN_ROWS),
    trailing=st.sampled_from([(), (3,), (2, 2)]),
    gaps=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_values_differing_in_their_first_dimension_come_in_their_places_order(
    firsts: list[int], trailing: tuple[int, ...], gaps: bool, seed: int
) -> None:
    """Values whose shapes differ in the first dimension alone (a ``[-1, 3]`` column's, as
    a ``Shuffle.BLOCK`` read takes) are laid out one after another in the order of their
    places, so that a consumer taking the rows in order meets their bytes in order: the
    value at each place starts where the one at the place before ends. Each still equals
    its bytes and shares memory with no other value and not with the buffer."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype("float32")
    n = len(firsts)
    shapes = np.array([(k, *trailing) for k in firsts], dtype=np.int64).reshape(n, -1)
    sizes = shapes.prod(axis=1) * dtype.itemsize
    data = rng.integers(0, 256, int(sizes.max()) + 64, dtype=np.uint8)
    starts = np.array([rng.integers(0, len(data) - s + 1) for s in sizes], dtype=np.int64)
    places = rng.choice(3 * n, n, replace=False) if gaps else rng.permutation(n)
    result: list[object] = [None] * (3 * n if gaps else n)
    values_by_shape(data, starts, shapes, dtype, places, result)
    for i in range(n):
        value = result[places[i]]
        size = int(sizes[i])
        want = np.frombuffer(data[starts[i] : starts[i] + size].tobytes(), dtype=dtype)
        assert isinstance(value, np.ndarray) and value.flags.writeable
        assert value.shape == tuple(shapes[i].tolist())
        np.testing.assert_array_equal(value.reshape(-1), want)
        assert not np.shares_memory(value, data)
    # (an empty value has no bytes to place: numpy gives its slice any address)
    in_place_order = [result[p] for p in sorted(places.tolist())]
    laid_out = [v for v in in_place_order if isinstance(v, np.ndarray) and v.nbytes]
    for before, value in itertools.pairwise(laid_out):
        assert value.ctypes.data == before.ctypes.data + before.nbytes
        assert not np.shares_memory(value, before)


@settings(max_examples=100, deadline=None)
@given(
    keys=st.one_of(
        st.lists(st.integers(-5, 5), max_size=40),
        st.lists(st.integers(0, 2**40), max_size=40),
        st.integers(0, 60).flatmap(lambda n: st.permutations(list(range(7, 7 + n)))),
    )
)
def test_stable_order_is_numpys_stable_argsort(keys: list[int]) -> None:
    """The order ``values_by_shape`` groups and places values in: numpy's stable argsort,
    for permutations of a run, repeated keys and keys far apart alike."""
    array = np.array(keys, dtype=np.int64)
    assert np.array_equal(stable_order(array), np.argsort(array, kind="stable"))


@given(
    ndim=st.integers(0, 3),
    dims=st.lists(st.integers(0, 3000), max_size=60),
)
def test_row_products_are_the_products_of_the_dimensions(ndim: int, dims: list[int]) -> None:
    rows = len(dims) // ndim if ndim else len(dims)
    array = np.array(dims[: rows * ndim], dtype=np.int64).reshape(rows, ndim)
    assert row_products(array).tolist() == [int(np.prod(row)) for row in array.tolist()]


def test_a_repeated_place_is_not_taken_for_a_run() -> None:
    """Places in ascending order that span exactly as many ints as there are values are a
    run only when none repeats: ``[0, 1, 1, 3]`` puts nothing at place 2 and the fourth
    value at place 3."""
    n = 4
    data = np.arange(256, dtype=np.uint8)
    starts = np.arange(n, dtype=np.int64) * 24
    shapes = np.array([[2, 3]] * n, dtype=np.int64)
    result: list[object] = [None] * n
    values_by_shape(data, starts, shapes, np.dtype("float32"), np.array([0, 1, 1, 3]), result)
    assert result[2] is None
    fourth = result[3]
    assert isinstance(fourth, np.ndarray)
    assert fourth.tobytes() == data[72:96].tobytes()
