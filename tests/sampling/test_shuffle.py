"""mrecord.sampling.shuffle: every mode is a permutation with its own structure, per epoch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ArgumentError
from mrecord.sampling.shuffle import (
    SHUFFLES,
    Shuffle,
    get_shuffle,
    parse_shuffle,
    shuffle_order,
)

counts_st = st.lists(st.integers(0, 40), min_size=1, max_size=6)
seeds = st.integers(0, 2**32 - 1)
epochs = st.integers(0, 20)


def file_of(ids: np.ndarray, counts: list[int]) -> np.ndarray:
    """The file each global row id belongs to."""
    return np.searchsorted(np.cumsum(counts), ids, side="right")


MODES = [m for m in Shuffle if m is not Shuffle.FALSE]  # the modes that shuffle


def file_rows(counts: list[int], f: int) -> list[int]:
    start = sum(counts[:f])
    return list(range(start, start + counts[f]))


def test_enum_names_and_values_match_mindspore() -> None:
    assert {m.name: m.value for m in Shuffle} == {
        "FALSE": "false",
        "ADAPTIVE": "adaptive",
        "GLOBAL": "global",
        "PARTIAL": "partial",
        "FILES": "files",
        "INFILE": "infile",
        "BLOCK": "block",  # mrecord's own (MindSpore has no block mode)
    }
    assert set(SHUFFLES) == {m.value for m in MODES}
    assert parse_shuffle(Shuffle.FALSE) is None
    assert get_shuffle(Shuffle.FILES) is get_shuffle("files")
    with pytest.raises(KeyError, match="'bogus'"):
        get_shuffle("bogus")


def test_parse_shuffle() -> None:
    assert parse_shuffle(True) is Shuffle.GLOBAL
    assert parse_shuffle(False) is None
    assert parse_shuffle(None) is Shuffle.ADAPTIVE
    assert parse_shuffle(Shuffle.INFILE) is Shuffle.INFILE
    for bad in ("global", 1, 0.0):
        with pytest.raises(TypeError, match="shuffle must be of boolean or enum of 'Shuffle'"):
            parse_shuffle(bad)


@given(counts=counts_st, seed=seeds, epoch=epochs)
def test_global_is_a_permutation(counts: list[int], seed: int, epoch: int) -> None:
    ids = shuffle_order(Shuffle.GLOBAL, counts, seed, epoch).to_array()
    assert np.array_equal(np.sort(ids), np.arange(sum(counts)))


@given(counts=counts_st, seed=seeds, epoch=epochs)
def test_files_shuffles_files_and_keeps_rows_in_order(
    counts: list[int], seed: int, epoch: int
) -> None:
    ids = shuffle_order(Shuffle.FILES, counts, seed, epoch).to_array().tolist()
    # The order is whole files one after another, each in its own row order.
    pos = 0
    seen = []
    while pos < len(ids):
        f = int(file_of(np.array([ids[pos]]), counts)[0])
        rows = file_rows(counts, f)
        assert ids[pos : pos + len(rows)] == rows
        seen.append(f)
        pos += len(rows)
    assert sorted(seen) == [f for f, c in enumerate(counts) if c]


@given(counts=counts_st, seed=seeds, epoch=epochs)
def test_infile_keeps_file_order_and_shuffles_inside(
    counts: list[int], seed: int, epoch: int
) -> None:
    ids = shuffle_order(Shuffle.INFILE, counts, seed, epoch).to_array()
    files = file_of(ids, counts)
    assert np.all(np.diff(files) >= 0)  # file 0 first, then file 1, ...
    for f in range(len(counts)):
        assert sorted(ids[files == f].tolist()) == file_rows(counts, f)


def _partial_fits(ids: list[int], counts: list[int], window: int) -> bool:
    """Is there a file order whose windows hold exactly the rows of ``ids``' windows?"""
    for perm in itertools.permutations(range(len(counts))):
        sequence = [r for f in perm for r in file_rows(counts, f)]
        if all(
            sorted(ids[i : i + window]) == sorted(sequence[i : i + window])
            for i in range(0, len(ids), window)
        ):
            return True
    return False


@given(
    counts=st.lists(st.integers(0, 25), min_size=1, max_size=4),
    window=st.integers(1, 30),
    seed=seeds,
    epoch=epochs,
)
def test_partial_moves_rows_only_inside_windows_of_a_file_order(
    counts: list[int], window: int, seed: int, epoch: int
) -> None:
    ids = shuffle_order(Shuffle.PARTIAL, counts, seed, epoch, partial_window=window).to_array()
    assert np.array_equal(np.sort(ids), np.arange(sum(counts)))
    assert _partial_fits(ids.tolist(), counts, window)


def test_partial_window_default_is_a_million_rows() -> None:
    counts = [600_000, 900_000]
    order = shuffle_order(Shuffle.PARTIAL, counts, 1, 0)
    head = order.take(np.arange(0, 1_000_000, 997))
    tail = order.take(np.arange(1_000_000, 1_500_000, 997))
    # Positions of window 0 never receive rows that the file order put in window 1.
    files_first = shuffle_order(Shuffle.PARTIAL, counts, 1, 0, partial_window=1)
    first_window = set(files_first.take(np.arange(1_000_000)).tolist())
    assert set(head.tolist()) <= first_window
    assert not set(tail.tolist()) & first_window


@given(counts=counts_st, seed=seeds, epoch=epochs, threshold=st.integers(1, 300))
def test_adaptive_is_global_up_to_threshold_then_partial(
    counts: list[int], seed: int, epoch: int, threshold: int
) -> None:
    adaptive = shuffle_order(
        Shuffle.ADAPTIVE, counts, seed, epoch, adaptive_threshold=threshold, partial_window=4
    ).to_array()
    expected_mode = Shuffle.GLOBAL if sum(counts) <= threshold else Shuffle.PARTIAL
    expected = shuffle_order(expected_mode, counts, seed, epoch, partial_window=4).to_array()
    assert np.array_equal(adaptive, expected)


def test_no_shuffle_is_file_order() -> None:
    assert shuffle_order(None, [2, 0, 3], 1, 0).to_array().tolist() == [0, 1, 2, 3, 4]


# Sizes where two independent shuffles coincide with negligible probability
# (at most 1/12! for a dataset, 1/10! for file orders).
BIG = {
    Shuffle.GLOBAL: [7, 3, 5],
    Shuffle.PARTIAL: [30, 20],
    Shuffle.FILES: [1] * 10,
    Shuffle.INFILE: [2, 13],
    Shuffle.ADAPTIVE: [15],
    Shuffle.BLOCK: [7, 3, 5],  # default sizes: one window of the three files' blocks
}


@pytest.mark.parametrize("mode", MODES)
@given(seed=seeds, epoch=epochs)
def test_same_seed_and_epoch_same_order_next_epoch_different(
    mode: Shuffle, seed: int, epoch: int
) -> None:
    counts = BIG[mode]
    window = 13

    def order(s: int, e: int) -> list[int]:
        ids = shuffle_order(mode, counts, s, e, partial_window=window).to_array()
        return [int(i) for i in ids]

    this = order(seed, epoch)
    assert this == order(seed, epoch)
    assert this != order(seed, epoch + 1)
    # Reseeding is a hash of (seed, epoch): seed+1 at this epoch is not seed at epoch+1.
    assert order(seed + 1, epoch) != order(seed, epoch + 1)


@pytest.mark.parametrize("mode", MODES)
def test_argument_errors(mode: Shuffle) -> None:
    fn = get_shuffle(mode)
    with pytest.raises(ArgumentError, match="file_row_counts\\[1\\]"):
        fn([3, -1], 0, 0)
    with pytest.raises(TypeError, match="file_row_counts\\[0\\]"):
        fn([1.5], 0, 0)  # type: ignore[list-item]
    with pytest.raises(ArgumentError, match="seed"):
        fn([3], -1, 0)
    with pytest.raises(TypeError, match="epoch"):
        fn([3], 0, "1")  # type: ignore[arg-type]


def test_window_and_threshold_must_be_positive() -> None:
    with pytest.raises(ArgumentError, match="partial_window"):
        shuffle_order(Shuffle.PARTIAL, [3], 0, 0, partial_window=0)
    with pytest.raises(ArgumentError, match="adaptive_threshold"):
        shuffle_order(Shuffle.ADAPTIVE, [3], 0, 0, adaptive_threshold=0)


def test_empty_dataset_gives_empty_orders() -> None:
    for mode in [None, *Shuffle]:
        assert len(shuffle_order(mode, [], 0, 0)) == 0
        assert len(shuffle_order(mode, [0, 0], 0, 0)) == 0
