"""Tests written for mutants of mrecord/sampling/order.py that survived the sampling tests
(docs/RELIABILITY.md, "Mutation testing"): the orders' exact ids at their edges (empty, one
row, the last window or segment, padded ids), every argument's bound and whole message, and
that what an order hands out cannot change it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mrecord.errors import ArgumentError, RowIndexError, WrongTypeError
from mrecord.sampling.order import (
    ArrayOrder,
    ComposedOrder,
    Order,
    PaddedOrder,
    PartitionedOrder,
    PermutationOrder,
    RangeOrder,
    SegmentOrder,
    ShardView,
    SliceOrder,
    WindowedPermutation,
)


def _message(error: type[BaseException], make: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(error) as info:
        make(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------- argument checks


def test_counts_are_ints_in_0_to_2_to_the_62_with_whole_messages() -> None:
    assert len(RangeOrder(2**62 - 1, 2**62 - 1)) == 0
    assert len(RangeOrder(2**62 - 2, 2**62 - 1)) == 1
    assert _message(ArgumentError, RangeOrder, 0, 2**62) == (
        "stop must be in [0, 2**62), got 4611686018427387904"
    )
    assert _message(ArgumentError, RangeOrder, -1, 3) == "start must be in [0, 2**62), got -1"
    assert _message(WrongTypeError, RangeOrder, 0, True) == "stop must be an int, got True (bool)"
    assert _message(WrongTypeError, PermutationOrder, 2.0, 1) == (
        "n must be an int, got 2.0 (float)"
    )
    numpy_ints: list[Any] = [np.int32(2), np.uint64(5)]  # numpy integers are ints
    assert len(RangeOrder(*numpy_ints)) == 3
    assert _message(ArgumentError, WindowedPermutation, 5, 0, 1) == (
        "window must be in [1, 2**62), got 0"
    )
    assert len(WindowedPermutation(5, 1, 1)) == 5
    assert _message(ArgumentError, WindowedPermutation, -1, 2, 1) == (
        "n must be in [0, 2**62), got -1"
    )


def test_chunk_sizes_start_and_first_size_are_checked() -> None:
    order = RangeOrder(0, 5)
    assert _message(ArgumentError, lambda: list(order.iter_chunks(0))) == (
        "chunk_size must be in [1, 2**62), got 0"
    )
    assert _message(ArgumentError, lambda: list(order.iter_chunks(2, first_size=0))) == (
        "first_size must be in [1, 2**62), got 0"
    )
    assert _message(ArgumentError, lambda: list(order.iter_chunks(2, start=-1))) == (
        "start must be in [0, 2**62), got -1"
    )
    assert [c.tolist() for c in order.iter_chunks(1)] == [[0], [1], [2], [3], [4]]


def test_positions_outside_the_order_are_named_with_the_order() -> None:
    order = RangeOrder(0, 5)
    assert _message(RowIndexError, order.take, [0, 5]) == (
        "position 5 is outside [0, 5) of this RangeOrder(0, 5)"
    )
    assert _message(RowIndexError, order.take, [-1, 7]) == (
        "position -1 is outside [0, 5) of this RangeOrder(0, 5)"
    )
    assert order.take([4, 0]).tolist() == [4, 0]  # both ends of [0, n) are in
    assert _message(WrongTypeError, order.take, np.array([0.5])) == (
        "positions must be an integer array, got dtype float64"
    )
    assert _message(RowIndexError, RangeOrder(0, 0).take, [0]) == (
        "position 0 is outside [0, 0) of this RangeOrder(0, 0)"
    )


def test_empty_positions_of_any_shape_and_dtype_give_int64_ids_of_that_shape() -> None:
    order = PermutationOrder(10, 3)
    empties: list[Any] = [[], np.zeros((2, 0)), np.zeros((0, 3), dtype=np.float32)]
    for empty in empties:
        got = order.take(empty)
        assert got.dtype == np.int64
        assert got.shape == np.asarray(empty).shape
    got = order.take(np.array([[1, 2], [3, 4]], dtype=np.uint8))
    assert got.dtype == np.int64 and got.shape == (2, 2)
    assert got.reshape(-1).tolist() == order.to_array()[[1, 2, 3, 4]].tolist()


# ---------------------------------------------------------------------- iteration


def test_first_size_doubles_up_to_chunk_size() -> None:
    order = RangeOrder(0, 40)
    sizes = [len(c) for c in order.iter_chunks(8, first_size=1)]
    assert sizes == [1, 2, 4, 8, 8, 8, 8, 1]
    sizes = [len(c) for c in order.iter_chunks(8, first_size=3)]
    assert sizes == [3, 6, 8, 8, 8, 7]
    assert [len(c) for c in order.iter_chunks(4, first_size=10)] == [4] * 10
    chunks = list(order.iter_chunks(16, start=30, first_size=2))
    assert [c.tolist() for c in chunks] == [[30, 31], [32, 33, 34, 35], [36, 37, 38, 39]]
    assert list(order.iter_chunks(16, start=40)) == []
    assert list(order.iter_chunks(16, start=99)) == []


def test_reprs_name_the_order_and_its_size() -> None:
    perm = PermutationOrder(10, 1)
    assert repr(perm) == "PermutationOrder(len=10)"
    assert repr(RangeOrder(2, 7)) == "RangeOrder(2, 7)"
    assert repr(ShardView(perm, 3, 1)) == (
        "ShardView(PermutationOrder(len=10), num_shards=3, shard_id=1)"
    )
    assert repr(PartitionedOrder(perm, 4)) == "PartitionedOrder(PermutationOrder(len=10), parts=4)"


# ---------------------------------------------------------------- simple orders


def test_a_range_from_past_its_stop_is_empty() -> None:
    assert len(RangeOrder(5, 3)) == 0
    assert RangeOrder(5, 3).to_array().tolist() == []
    assert RangeOrder(3, 6).take([2, 0, 1]).tolist() == [5, 3, 4]
    assert RangeOrder(3, 6).to_array().dtype == np.int64


def test_an_array_order_is_a_read_only_copy_and_hands_out_copies() -> None:
    ids = np.array([4, 2, 9], dtype=np.int32)
    order = ArrayOrder(ids)
    ids[0] = 7  # the caller's array is not the order
    assert order.to_array().tolist() == [4, 2, 9]
    assert order.ids.dtype == np.int64
    assert not order.ids.flags.writeable
    out = order.to_array()
    out[0] = 0  # nor is what it hands out
    chunk = next(order.iter_chunks(2))
    chunk[1] = 0
    assert order.to_array().tolist() == [4, 2, 9]
    assert ArrayOrder(np.array([[1, 2], [3, 4]])).to_array().tolist() == [1, 2, 3, 4]
    assert ArrayOrder([]).to_array().dtype == np.int64


def test_orders_of_zero_and_one_row() -> None:
    for order in (PermutationOrder(0, 5), WindowedPermutation(0, 3, 5), SegmentOrder([])):
        assert len(order) == 0
        assert order.to_array().tolist() == []
        assert order.to_array().dtype == np.int64
    assert PermutationOrder(1, 5).to_array().tolist() == [0]
    assert PermutationOrder(1, 5).take([0, 0]).tolist() == [0, 0]
    # Two rows are shuffled too: some keys swap them, others do not.
    two = {tuple(PermutationOrder(2, key).to_array().tolist()) for key in range(8)}
    assert two == {(0, 1), (1, 0)}
    assert SegmentOrder([0, 1, 0], key=3).to_array().tolist() == [0]


def test_a_permutation_order_is_the_same_through_take_chunks_and_iteration() -> None:
    order = PermutationOrder(50, 11)
    full = order.to_array()
    assert sorted(full.tolist()) == list(range(50))
    assert order.take(np.arange(49, -1, -1)).tolist() == full[::-1].tolist()
    assert np.concatenate(list(order.iter_chunks(7))).tolist() == full.tolist()


# -------------------------------------------------------------- windows and segments


def _chunked(order: Order, size: int = 13) -> list[int]:
    chunks = [np.zeros(0, dtype=np.int64), *order.iter_chunks(size)]
    ids: list[int] = np.concatenate(chunks).tolist()
    return ids


def test_windows_keep_their_rows_the_last_one_shorter() -> None:
    order = WindowedPermutation(10, 4, 21)
    full = _chunked(order, 3)
    assert [sorted(full[i : i + 4]) for i in (0, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(full[8:]) == [8, 9]
    assert order.take(np.arange(10)).tolist() == full
    exact = WindowedPermutation(12, 4, 21)  # no short window: the last one is full
    assert [sorted(_chunked(exact)[i : i + 4]) for i in (0, 4, 8)] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
    ]  # fmt: skip
    assert exact.take(np.arange(12)).tolist() == _chunked(exact, 5)


def test_a_take_spread_over_many_windows_gives_the_iterated_ids() -> None:
    # Positions far apart take a path of their own (keys of the windows touched only).
    order = WindowedPermutation(201, 2, 8)
    full = np.array(_chunked(order, 64))
    moved = np.flatnonzero(full != np.arange(201))  # in windows whose two rows swap
    assert moved.size > 50
    positions = np.concatenate([moved[::10], [0, 200]])  # 13 positions in 101 windows
    assert positions.size == 13
    assert order.take(positions).tolist() == full[positions].tolist()
    assert order.take(positions[::-1].reshape(13, 1)).tolist() == (
        full[positions[::-1]].reshape(13, 1).tolist()
    )
    assert full[200] == 200  # a last window of one row
    assert sorted(full.tolist()) == list(range(201))


def test_segment_orders_check_their_counts_and_file_order() -> None:
    assert _message(ArgumentError, SegmentOrder, [3, 2, 1], [0, 0, 1]) == (
        "segment_order must be a permutation of range(3), got [0, 0, 1]"
    )
    assert _message(ArgumentError, SegmentOrder, [3, 2], [0, 1, 2]) == (
        "segment_order must be a permutation of range(2), got [0, 1, 2]"
    )
    assert _message(ArgumentError, SegmentOrder, [3, -2]) == (
        "file_row_counts must be >= 0, got [3, -2]"
    )
    assert _message(WrongTypeError, SegmentOrder, [[1, 2]]) == (
        "file_row_counts must be a sequence of ints, got [[1, 2]]"
    )
    assert _message(WrongTypeError, SegmentOrder, [1.5]) == (
        "file_row_counts must be a sequence of ints, got [1.5]"
    )
    assert SegmentOrder(np.array([2, 1], dtype=np.uint8), [1, 0]).to_array().tolist() == [2, 0, 1]
    assert SegmentOrder([2, 1], np.array([[1, 0]])).to_array().tolist() == [2, 0, 1]  # flattened


def test_segments_in_a_given_order_rows_kept_or_permuted_inside() -> None:
    counts = [3, 0, 4, 2]
    files = SegmentOrder(counts, [2, 3, 1, 0])
    assert files.to_array().tolist() == [3, 4, 5, 6, 7, 8, 0, 1, 2]
    assert files.take([8, 0, 5, 6]).tolist() == [2, 3, 8, 0]
    assert _chunked(files, 2) == files.to_array().tolist()
    infile = SegmentOrder(counts, [2, 3, 1, 0], key=4)
    full = _chunked(infile, 2)
    assert sorted(full[:4]) == [3, 4, 5, 6]
    assert sorted(full[4:6]) == [7, 8]
    assert sorted(full[6:]) == [0, 1, 2]
    assert infile.take(np.arange(9)[::-1]).tolist() == full[::-1]
    assert infile.take(np.zeros(0, dtype=np.int64)).tolist() == []
    assert len(infile) == 9


# ------------------------------------------------------------ views of other orders


def test_slices_are_clipped_to_the_base() -> None:
    base = RangeOrder(10, 15)
    assert SliceOrder(base, 1, 4).to_array().tolist() == [11, 12, 13]
    assert SliceOrder(base, 1, 4).take([2, 0]).tolist() == [13, 11]
    assert SliceOrder(base, 2, 99).to_array().tolist() == [12, 13, 14]
    assert len(SliceOrder(base, 7, 99)) == 0
    assert len(SliceOrder(base, 4, 2)) == 0
    assert SliceOrder(base, 5, 5).to_array().tolist() == []
    assert _message(ArgumentError, SliceOrder, base, -1, 2) == (
        "start must be in [0, 2**62), got -1"
    )
    assert _message(ArgumentError, SliceOrder, base, 0, -1) == (
        "stop must be in [0, 2**62), got -1"
    )


def test_composed_orders_read_the_base_through_the_indices() -> None:
    order = ComposedOrder(ArrayOrder([4, 0, 4, 2]), RangeOrder(10, 15))
    assert len(order) == 4
    assert order.to_array().tolist() == [14, 10, 14, 12]
    assert order.take([3, 1]).tolist() == [12, 10]
    assert _chunked(order, 3) == [14, 10, 14, 12]


def test_shard_views_check_the_shard_and_wrap_around() -> None:
    base = RangeOrder(0, 10)
    assert _message(ArgumentError, ShardView, base, 3, 3) == "shard_id must be in [0, 2], got 3"
    assert _message(ArgumentError, ShardView, base, 0, 0) == (
        "num_shards must be in [1, 2**62), got 0"
    )
    assert _message(ArgumentError, ShardView, base, 2, -1) == (
        "shard_id must be in [0, 2**62), got -1"
    )
    assert [ShardView(base, 3, s).to_array().tolist() for s in range(3)] == [
        [0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1],
    ]  # fmt: skip
    assert [len(ShardView(base, k, 0)) for k in (1, 2, 3, 4, 10, 11)] == [10, 5, 4, 3, 1, 1]
    assert ShardView(base, 1, 0).to_array().tolist() == list(range(10))
    assert ShardView(ArrayOrder([7, 8, 9]), 2, 1).take([1, 0]).tolist() == [7, 8]


def test_partitions_are_contiguous_runs_read_round_robin() -> None:
    # Partition j holds ceil((n - j) / parts) consecutive positions: 4, 3, 3 of 10.
    order = PartitionedOrder(RangeOrder(0, 10), 3)
    assert len(order) == 10
    assert order.to_array().tolist() == [0, 4, 7, 1, 5, 8, 2, 6, 9, 3]
    assert [ShardView(order, 3, s).to_array().tolist() for s in range(3)] == [
        [0, 1, 2, 3], [4, 5, 6, 0], [7, 8, 9, 4],
    ]  # fmt: skip
    for n in range(13):
        for parts in range(1, 7):
            got = PartitionedOrder(RangeOrder(0, n), parts).to_array()
            assert got.dtype == np.int64
            ids = got.tolist()
            assert sorted(ids) == list(range(n)), (n, parts)
            first = 0
            for j in range(parts):  # partition j: the next ceil((n - j) / parts) rows
                run = ids[j::parts]
                assert run == list(range(first, first + -(-(n - j) // parts))), (n, parts, j)
                first += len(run)
    assert PartitionedOrder(ArrayOrder([5, 6, 7]), 1).to_array().tolist() == [5, 6, 7]
    assert PartitionedOrder(RangeOrder(0, 2), 4).to_array().tolist() == [0, 1]
    assert _message(ArgumentError, PartitionedOrder, RangeOrder(0, 2), 0) == (
        "parts must be in [1, 2**62), got 0"
    )


def test_padded_ids_follow_the_base_from_pad_start() -> None:
    order = PaddedOrder(ArrayOrder([2, 0, 1]), 2, 3)
    assert len(order) == 5
    assert order.to_array().tolist() == [2, 0, 1, 3, 4]
    assert order.take([4, 0, 3, 2]).tolist() == [4, 2, 3, 1]
    assert order.take([4, 3]).tolist() == [4, 3]  # padded ids only
    assert order.take([1, 0]).tolist() == [0, 2]  # real ids only
    assert [c.tolist() for c in order.iter_chunks(2)] == [[2, 0], [1, 3], [4]]
    assert [c.tolist() for c in order.iter_chunks(4, start=4)] == [[4]]
    assert PaddedOrder(RangeOrder(0, 0), 2, 7).to_array().tolist() == [7, 8]
    assert PaddedOrder(RangeOrder(0, 2), 0, 2).to_array().tolist() == [0, 1]
    assert _message(ArgumentError, PaddedOrder, RangeOrder(0, 2), -1, 2) == (
        "num_padded must be in [0, 2**62), got -1"
    )
    assert _message(ArgumentError, PaddedOrder, RangeOrder(0, 2), 1, -2) == (
        "pad_start must be in [0, 2**62), got -2"
    )


def _every_order() -> list[Order]:
    perm = PermutationOrder(12, 5)
    return [
        RangeOrder(0, 12),
        ArrayOrder(np.arange(12)[::-1]),
        perm,
        PermutationOrder(1, 5),
        WindowedPermutation(12, 5, 5),
        WindowedPermutation(12, 1, 5),
        SegmentOrder([5, 0, 7], [2, 0, 1]),
        SegmentOrder([5, 0, 7], [1, 2, 0], key=5),
        ComposedOrder(ArrayOrder([0, 3, 3]), perm),
        SliceOrder(perm, 2, 9),
        ShardView(perm, 5, 4),
        PartitionedOrder(perm, 1),
        PartitionedOrder(perm, 5),
        PaddedOrder(perm, 3, 12),
    ]


def test_no_positions_give_no_ids_and_ids_are_new_arrays() -> None:
    for order in _every_order():
        empty = order.take(np.zeros(0, dtype=np.int64))
        assert empty.shape == (0,) and empty.dtype == np.int64, order
        positions = np.arange(len(order), dtype=np.int64)
        expected = order.to_array().tolist()
        ids = order.take(positions)
        assert ids.dtype == np.int64, order
        assert ids.tolist() == expected, order
        ids[:] = -1  # writing to the ids changes neither the caller's positions nor the order
        assert positions.tolist() == list(range(len(order))), order
        assert order.to_array().tolist() == expected, order
        assert order.take(positions[:1]).tolist() == expected[:1], order
        assert _chunked(order, 5) == expected, order  # runs from other starts than 0
