"""Tests written for mutants of mrecord/sampling/shuffle/ (the registry, the argument checks
and the GLOBAL, FILES, INFILE, PARTIAL and ADAPTIVE modes) that survived the sampling tests
(docs/RELIABILITY.md, "Mutation testing"): each mode's recorded order, each option reaching
its mode, each bound at its edge and each message whole."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mrecord.errors import ArgumentError, UnknownNameError, WrongTypeError
from mrecord.sampling.order import SegmentOrder
from mrecord.sampling.shuffle import (
    SHUFFLES,
    BlockLayout,
    Shuffle,
    adaptive_shuffle,
    block_shuffle,
    get_shuffle,
    global_shuffle,
    parse_shuffle,
    partial_shuffle,
    shuffle_order,
)
from mrecord.sampling.shuffle._common import (
    check_counts,
    check_option,
    check_seed_epoch,
    file_permutation,
)

COUNTS = [4, 0, 6, 3]


def _message(error: type[BaseException], make: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(error) as info:
        make(*args, **kwargs)
    return str(info.value)


def test_each_modes_order_of_a_seed_is_pinned_across_versions() -> None:
    """The order a (seed, epoch) gives is part of every checkpoint: a job resumed under a
    newer mrecord must see the rest of the same epoch. MindSpore's shuffles draw from
    another generator, so these are not MindSpore's orders: they were recorded once from
    mrecord, and pin that its own orders stay the same from version to version (a change to
    a mode's key purpose, its file permutation or its windows breaks them)."""
    recorded = {
        "global": [0, 3, 12, 6, 11, 8, 5, 2, 9, 7, 4, 1, 10],
        "files": [4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 1, 2, 3],
        "infile": [3, 1, 0, 2, 9, 7, 6, 8, 4, 5, 12, 11, 10],
        "partial": [8, 7, 6, 4, 5, 10, 0, 12, 11, 9, 1, 3, 2],
    }
    for mode, ids in recorded.items():
        assert SHUFFLES[mode](COUNTS, 42, 1, partial_window=5).to_array().tolist() == ids
        order = shuffle_order(Shuffle(mode), COUNTS, 42, 1, partial_window=5)
        assert order.to_array().tolist() == ids
    assert file_permutation(6, 42, 1, "files").tolist() == [5, 1, 2, 0, 3, 4]
    assert file_permutation(6, 42, 1, "files").dtype == np.int64


def test_modes_are_found_by_enum_or_value_and_unknown_names_are_listed() -> None:
    assert get_shuffle(Shuffle.GLOBAL) is global_shuffle
    assert get_shuffle("partial") is partial_shuffle
    assert SHUFFLES["block"] is block_shuffle
    assert SHUFFLES["adaptive"] is adaptive_shuffle
    # The whole message (a KeyError's str() would quote it).
    with pytest.raises(UnknownNameError) as info:
        get_shuffle("nope")
    assert info.value.args == (
        "unknown shuffle mode 'nope'; known modes: "
        "['adaptive', 'block', 'files', 'global', 'infile', 'partial']",
    )
    with pytest.raises(UnknownNameError) as info:
        get_shuffle(Shuffle.FALSE)
    assert info.value.args == (
        "unknown shuffle mode <Shuffle.FALSE: 'false'>; known modes: "
        "['adaptive', 'block', 'files', 'global', 'infile', 'partial']",
    )


def test_parse_shuffle_maps_every_kind_of_argument() -> None:
    assert parse_shuffle(None) is Shuffle.ADAPTIVE
    assert parse_shuffle(True) is Shuffle.GLOBAL
    assert parse_shuffle(False) is None
    assert parse_shuffle(Shuffle.FALSE) is None
    assert parse_shuffle(Shuffle.INFILE) is Shuffle.INFILE
    message = (
        "shuffle must be of boolean or enum of 'Shuffle' values like 'Shuffle.GLOBAL' or "
        "'Shuffle.FILES' or 'Shuffle.INFILE'."
    )
    assert _message(WrongTypeError, parse_shuffle, "global") == f"{message} Got 'global'."
    assert _message(WrongTypeError, parse_shuffle, 1) == f"{message} Got 1."


def test_no_shuffle_is_every_row_in_file_order() -> None:
    for mode in (None, Shuffle.FALSE):
        assert shuffle_order(mode, COUNTS, 42, 1).to_array().tolist() == list(range(13))
    assert _message(WrongTypeError, shuffle_order, None, [1, "2"], 0, 0) == (
        "file_row_counts[1] must be an int, got '2' (str)"
    )


def test_options_reach_their_mode_through_shuffle_order() -> None:
    counts = [7, 5]
    window = shuffle_order(Shuffle.PARTIAL, counts, 3, 0, partial_window=3).to_array()
    assert window.tolist() == partial_shuffle(counts, 3, 0, partial_window=3).to_array().tolist()
    # Windows of 3 positions of the file order PARTIAL shuffles its files into.
    files = SegmentOrder(counts, file_permutation(2, 3, 0, "partial-files")).to_array().tolist()
    assert [sorted(window[i : i + 3].tolist()) for i in (0, 3, 6, 9)] == [
        sorted(files[i : i + 3]) for i in (0, 3, 6, 9)
    ]
    # ADAPTIVE: GLOBAL up to the threshold (12 rows), PARTIAL (with the window) above it.
    at = shuffle_order(Shuffle.ADAPTIVE, counts, 3, 0, adaptive_threshold=12, partial_window=3)
    assert at.to_array().tolist() == global_shuffle(counts, 3, 0).to_array().tolist()
    above = shuffle_order(Shuffle.ADAPTIVE, counts, 3, 0, adaptive_threshold=11, partial_window=3)
    assert above.to_array().tolist() == window.tolist()
    # BLOCK and ADAPTIVE read the layout.
    layout = BlockLayout(block_rows=2, window_blocks=2)
    block = shuffle_order(Shuffle.BLOCK, counts, 3, 0, layout=layout).to_array().tolist()
    assert block == block_shuffle(counts, 3, 0, layout=layout).to_array().tolist()
    assert block != block_shuffle(counts, 3, 0).to_array().tolist()
    asked = BlockLayout(block_rows=2, window_blocks=2, adaptive=True)
    got = shuffle_order(Shuffle.ADAPTIVE, counts, 3, 0, layout=asked).to_array().tolist()
    assert got == block
    assert adaptive_shuffle(counts, 3, 0, layout=layout).to_array().tolist() == (
        global_shuffle(counts, 3, 0).to_array().tolist()
    )


def test_adaptive_checks_its_threshold() -> None:
    assert _message(ArgumentError, adaptive_shuffle, [3], 0, 0, adaptive_threshold=0) == (
        "adaptive_threshold must be >= 1 rows, got 0"
    )
    assert adaptive_shuffle([1], 0, 0, adaptive_threshold=1).to_array().tolist() == [0]


def test_partial_names_its_window_when_it_is_out_of_range() -> None:
    assert _message(ArgumentError, partial_shuffle, [3], 0, 0, partial_window=0) == (
        "partial_window must be >= 1 rows, got 0"
    )
    assert _message(WrongTypeError, partial_shuffle, [3], 0, 0, partial_window=1.5) == (
        "partial_window must be an int, got 1.5 (float)"
    )
    assert partial_shuffle([3], 0, 0, partial_window=1).to_array().tolist() == [0, 1, 2]


def test_counts_seed_epoch_and_options_are_checked_with_whole_messages() -> None:
    assert _message(WrongTypeError, check_counts, "abc") == (
        "file_row_counts must be a sequence of ints, got 'abc'"
    )
    assert _message(WrongTypeError, check_counts, b"ab") == (
        "file_row_counts must be a sequence of ints, got b'ab'"
    )
    assert _message(WrongTypeError, check_counts, [3, True]) == (
        "file_row_counts[1] must be an int, got True (bool)"
    )
    assert _message(ArgumentError, check_counts, [3, 0, -1]) == (
        "file_row_counts[2] must be >= 0, got -1"
    )
    numpy_ints: Any = (np.uint8(2), 0, 5)
    got = check_counts(numpy_ints)
    assert got.tolist() == [2, 0, 5] and got.dtype == np.int64
    assert check_counts([]).shape == (0,) and check_counts([]).dtype == np.int64
    assert check_seed_epoch(np.int64(0), 0) == (0, 0)
    assert type(check_seed_epoch(np.int64(3), np.uint8(4))[1]) is int
    assert _message(WrongTypeError, check_seed_epoch, 1.0, 0) == (
        "seed must be an int, got 1.0 (float)"
    )
    assert _message(WrongTypeError, check_seed_epoch, 1, False) == (
        "epoch must be an int, got False (bool)"
    )
    assert _message(ArgumentError, check_seed_epoch, -1, 0) == "seed must be >= 0, got -1"
    assert _message(ArgumentError, check_seed_epoch, 0, -2) == "epoch must be >= 0, got -2"
    assert check_option("partial_window", 1) == 1
    assert type(check_option("partial_window", np.int16(2))) is int
    assert _message(ArgumentError, check_option, "partial_window", 0) == (
        "partial_window must be >= 1 rows, got 0"
    )
    assert _message(WrongTypeError, check_option, "partial_window", True) == (
        "partial_window must be an int, got True (bool)"
    )
    assert _message(WrongTypeError, check_option, "window_blocks", 2.0) == (
        "window_blocks must be an int, got 2.0 (float)"
    )


@pytest.mark.parametrize("mode", ["global", "files", "infile", "partial", "adaptive", "block"])
def test_every_mode_checks_its_counts_seed_and_epoch(mode: str) -> None:
    shuffle = SHUFFLES[mode]
    assert _message(ArgumentError, shuffle, [2, -1], 0, 0) == (
        "file_row_counts[1] must be >= 0, got -1"
    )
    if mode != "adaptive":  # checked by the mode it picks
        assert _message(ArgumentError, shuffle, [2], -1, 0) == "seed must be >= 0, got -1"
        assert _message(WrongTypeError, shuffle, [2], 0, None) == (
            "epoch must be an int, got None (NoneType)"
        )
    assert shuffle([0, 0], 0, 0).to_array().tolist() == []
