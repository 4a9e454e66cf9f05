"""mrecord.sampling.order: lazy orders are what they claim, chunk by chunk or all at once."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ArgumentError
from mrecord.sampling.order import (
    ArrayOrder,
    ComposedOrder,
    Order,
    PaddedOrder,
    PermutationOrder,
    RangeOrder,
    SegmentOrder,
    ShardView,
    SliceOrder,
    WindowedPermutation,
)
from mrecord.sampling.permutation import ceil_sqrt, derive_key, feistel_side, round_keys

PRIMES = [2, 3, 5, 7, 11, 13, 97, 101, 1009, 7919, 65537]
# Around perfect squares the Feistel side a = ceil(sqrt(n)) changes: the edge cases.
SQUARE_EDGES = [4, 8, 9, 10, 15, 16, 17, 4095, 4096, 4097, 65535, 65536]


def is_permutation(ids: np.ndarray, n: int) -> bool:
    return len(ids) == n and np.array_equal(np.sort(ids), np.arange(n))


@pytest.mark.parametrize("n", [0, 1, 2, *range(3, 40), *PRIMES, *SQUARE_EDGES])
def test_keyed_permutation_is_a_bijection(n: int) -> None:
    for key in (0, 1, 2**64 - 1):
        assert is_permutation(PermutationOrder(n, key).to_array(), n)


@given(n=st.integers(0, 3000), key=st.integers(0, 2**64 - 1))
def test_keyed_permutation_is_a_bijection_for_any_n_and_key(n: int, key: int) -> None:
    assert is_permutation(PermutationOrder(n, key).to_array(), n)


def test_permutation_of_huge_domain_has_no_collisions_in_a_sample() -> None:
    n = 10**12 + 39
    order = PermutationOrder(n, derive_key(7, 0, "t"))
    ids = order.take(np.arange(0, 200_000, dtype=np.int64) * 4_999_999)
    assert ids.min() >= 0 and ids.max() < n
    assert len(np.unique(ids)) == len(ids)


def test_permutation_looks_shuffled() -> None:
    n = 10_000
    ids = PermutationOrder(n, derive_key(1, 0, "quality")).to_array().astype(np.float64)
    position = np.arange(n, dtype=np.float64)
    # A random permutation has correlation ~ N(0, 1/sqrt(n)) = 0.01 and ~1 fixed point.
    assert abs(np.corrcoef(ids, position)[0, 1]) < 0.05
    assert int((ids == position).sum()) < 10
    # Neighbouring positions land far apart on average (random: n/3).
    assert np.abs(np.diff(ids)).mean() > n / 4


@pytest.mark.parametrize(
    ("n", "files"), [(3, 20000), (5, 20000), (10, 20000), (40, 20000), (300, 3000)]
)
def test_tiny_permutations_are_uniform(n: int, files: int) -> None:
    # Many files of n rows, each shuffled with its own key (INFILE): each row lands in
    # each position about equally often. Chi-square on the n x n counts ((n-1)^2 degrees
    # of freedom); the key is fixed, so the statistic is deterministic. 6 standard
    # deviations leaves room for honest noise; a 4-round network on sizes 3 to 10
    # scores 8 to 18 here.
    order = SegmentOrder([n] * files, None, key=derive_key("uniform"))
    perms = order.take(np.arange(n * files))
    perms = perms.reshape(files, n) - (np.arange(files) * n)[:, None]
    counts = np.zeros((n, n))
    np.add.at(counts, (np.tile(np.arange(n), files), perms.reshape(-1)), 1)
    expected = files / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    dof = (n - 1) ** 2
    assert (chi2 - dof) / np.sqrt(2 * dof) < 6


def test_different_keys_give_different_permutations() -> None:
    a = PermutationOrder(1000, 1).to_array()
    b = PermutationOrder(1000, 2).to_array()
    assert not np.array_equal(a, b)
    assert np.array_equal(a, PermutationOrder(1000, 1).to_array())


def test_derive_key_mixes_seed_and_epoch() -> None:
    assert derive_key(5, 1) != derive_key(6, 0)
    assert derive_key(5, 1) == derive_key(5, 1)
    assert derive_key(1, "a") != derive_key(1, "b")
    assert derive_key(1) != derive_key("1")  # the part's type is hashed too
    with pytest.raises(TypeError, match=r"^key parts must be int or str, got 1\.5$"):
        derive_key(1.5)  # type: ignore[arg-type]


def test_global_permutation_memory_is_tiny_for_100_million_rows() -> None:
    tracemalloc.start()
    try:
        order = PermutationOrder(100_000_000, 99)
        chunks = [order.take(np.arange(i * 4096, (i + 1) * 4096)) for i in range(3)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(len(c) == 4096 for c in chunks)
    assert peak < 2 * 2**20  # bytes: a few chunk-sized temporaries, nothing per row


@pytest.mark.parametrize("n", [0, 1, 5, 7, 20, 101])
@pytest.mark.parametrize("window", [1, 2, 3, 7, 1000])
def test_windowed_permutation_moves_rows_only_inside_their_window(n: int, window: int) -> None:
    ids = WindowedPermutation(n, window, key=3).to_array()
    assert is_permutation(ids, n)
    assert np.array_equal(ids // window, np.arange(n) // window)


def test_segment_order_files_and_infile() -> None:
    counts = [3, 0, 4, 2]
    files = SegmentOrder(counts, [3, 2, 1, 0]).to_array()
    assert files.tolist() == [7, 8, 3, 4, 5, 6, 0, 1, 2]
    infile = SegmentOrder(counts, None, key=11).to_array()
    assert sorted(infile[:3].tolist()) == [0, 1, 2]
    assert sorted(infile[3:7].tolist()) == [3, 4, 5, 6]
    assert sorted(infile[7:].tolist()) == [7, 8]
    with pytest.raises(ArgumentError):
        SegmentOrder(counts, [0, 0, 1, 2])


def test_shard_view_wraps_around_like_mindspore() -> None:
    base = RangeOrder(0, 10)
    shards = [ShardView(base, 3, s).to_array().tolist() for s in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert len(ShardView(RangeOrder(0, 0), 4, 1)) == 0


def test_padded_order_appends_ids_from_n() -> None:
    order = PaddedOrder(ArrayOrder([4, 2]), 3, pad_start=5)
    assert order.to_array().tolist() == [4, 2, 5, 6, 7]
    assert order.take(np.array([3, 0])).tolist() == [6, 4]


def test_composed_and_slice() -> None:
    base = ArrayOrder([10, 11, 12, 13])
    composed = ComposedOrder(ArrayOrder([3, 0, 0]), base)
    assert composed.to_array().tolist() == [13, 10, 10]
    assert SliceOrder(base, 1, 3).to_array().tolist() == [11, 12]
    assert len(SliceOrder(base, 3, 99)) == 1


def test_take_checks_positions() -> None:
    order = RangeOrder(0, 5)
    with pytest.raises(IndexError, match="5"):
        order.take(np.array([0, 5]))
    with pytest.raises(IndexError, match="-1"):
        order.take(np.array([-1]))
    with pytest.raises(TypeError):
        order.take(np.array([0.5]))
    assert order.take(np.array([], dtype=np.int64)).shape == (0,)
    assert order.take(np.array([[1, 2], [3, 4]])).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ArgumentError):
        list(order.iter_chunks(0))


def _orders(n: int, key: int) -> list[Order]:
    """One order of every kind over n rows (some nested)."""
    counts = [n // 3, 0, n - n // 3]
    perm = PermutationOrder(n, key)
    orders: list[Order] = [
        RangeOrder(0, n),
        ArrayOrder(np.arange(n)[::-1]),
        perm,
        WindowedPermutation(n, 7, key),
        SegmentOrder(counts, [2, 0, 1]),
        SegmentOrder(counts, [1, 2, 0], key=key),
        ComposedOrder(WindowedPermutation(n, 5, key + 1), perm),
        SliceOrder(perm, n // 4, n - n // 4),
        PaddedOrder(perm, 3, n),
    ]
    if n:
        orders.append(ShardView(perm, 3, 2))
    return orders


@given(
    n=st.integers(0, 300),
    key=st.integers(0, 2**32),
    chunk=st.integers(1, 64),
    data=st.data(),
)
def test_take_iter_chunks_and_to_array_agree(
    n: int, key: int, chunk: int, data: st.DataObject
) -> None:
    for order in _orders(n, key):
        full = order.to_array()
        assert full.dtype == np.int64 and len(full) == len(order)
        chunks = list(order.iter_chunks(chunk))
        assert all(len(c) <= chunk for c in chunks)
        joined = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        assert np.array_equal(joined, full)
        if len(order):
            positions = np.array(
                data.draw(st.lists(st.integers(0, len(order) - 1), max_size=50)), dtype=np.int64
            )
            assert np.array_equal(order.take(positions), full[positions])
        assert list(order) == full.tolist()


def test_take_agrees_with_iteration_when_small_and_large_segments_mix() -> None:
    # Segments of at most 225 rows use more Feistel rounds than larger ones; a take()
    # touching both kinds at once must give what chunked iteration gives.
    rng = np.random.default_rng(0)
    for order in (
        SegmentOrder([3, 400, 250, 7, 0, 226, 225], [2, 0, 6, 3, 1, 5, 4], key=5),
        WindowedPermutation(700, 300, key=9),  # the last window has 100 rows
    ):
        full = np.concatenate(list(order.iter_chunks(97)))
        assert is_permutation(full, len(order))
        positions = rng.permutation(len(order))
        assert np.array_equal(order.take(positions), full[positions])


def test_orders_of_a_seed_are_pinned_across_versions() -> None:
    """The order a (seed, epoch) gives is part of every checkpoint: a job resumed under a
    newer mrecord must see the rest of the same epoch. These values were recorded once;
    a change to the key derivation, the round keys or the Feistel network breaks them."""
    assert derive_key(42, 0, "global") == 8688984360636846353
    assert derive_key(7) == 3108756432729127146
    assert derive_key("x", 3) == 17445761694958519589
    first8 = [
        213982028476361140, 14075033914348083232, 5613108644154937364, 4580719358766834727,
        16220094195762520444, 15919180229949670418, 1040889637401309211, 13327600811139763532,
    ]  # fmt: skip
    assert round_keys(1).tolist() == first8
    # Keys are taken mod 2**64; more than 8 rounds need a second BLAKE2b block.
    second = [14041067559101909332, 2506780426667174563]
    assert round_keys(2**64 + 1, 10).tolist() == [*first8, *second]
    assert round_keys(1, 3).dtype == np.uint64
    # Any number of rounds (one BLAKE2b block gives 8), each a prefix of the next.
    for rounds in range(1, 20):
        assert round_keys(1, rounds).tolist() == round_keys(1, 20).tolist()[:rounds]
    key = derive_key(42, 0, "global")
    assert PermutationOrder(10, key).to_array().tolist() == [5, 7, 6, 3, 8, 9, 0, 2, 4, 1]
    assert PermutationOrder(300, key).to_array()[:6].tolist() == [30, 289, 139, 249, 53, 275]
    big = PermutationOrder(2**40, derive_key(42, 0, "big"))
    assert big.take([0, 1, 2**40 - 1]).tolist() == [68793098525, 936423125153, 719583044618]
    mid = PermutationOrder(10**6 + 1, derive_key(42, 0, "mid"))
    assert mid.take([0, 1, 10**6]).tolist() == [566490, 671401, 268263]
    # Per-file segments, small (8 rounds) and large (4 rounds) files in one call.
    seg = SegmentOrder([5, 300, 7], None, key=derive_key(42, 0, "seg")).to_array()
    assert seg[:8].tolist() == [0, 2, 1, 3, 4, 86, 121, 145]
    assert seg[-10:].tolist() == [150, 154, 197, 305, 306, 308, 307, 310, 309, 311]
    win = WindowedPermutation(1000, 64, derive_key(42, 0, "win")).to_array()
    assert win[:10].tolist() == [50, 42, 22, 12, 15, 29, 56, 34, 16, 9]


def _exact_ceil_sqrt(n: int) -> int:
    root = math.isqrt(n)
    return root if root * root == n else root + 1


@given(roots=st.lists(st.integers(1, 2**31 - 1), min_size=1, max_size=50))
def test_ceil_sqrt_is_exact_next_to_large_squares(roots: list[int]) -> None:
    # Near 2**62 float64 sqrt rounds both ways; the side must still be exact, or the
    # Feistel domain would not cover [0, n) (too small) or would walk needlessly (too big).
    fixed = np.random.default_rng(0).integers(2**26, 2**31, 500).tolist()
    near = {max(1, r * r + d) for r in [*roots, *fixed, 2**31 - 1] for d in (-1, 0, 1)}
    n = sorted(near | {1, 2, 2**62 - 1})
    got = ceil_sqrt(np.array(n, dtype=np.int64))
    assert got.dtype == np.uint64
    assert got.tolist() == [_exact_ceil_sqrt(v) for v in n]
    assert [int(feistel_side(v)) for v in n] == [_exact_ceil_sqrt(v) for v in n]
