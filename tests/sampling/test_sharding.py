"""mrecord.sampling.sharding: MindSpore's split of an order across ranks, exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import SamplerError
from mrecord.sampling.order import PermutationOrder, RangeOrder
from mrecord.sampling.sharding import (
    check_shards,
    concat_offsets,
    concat_shard_positions,
    offset_shard_counts,
    shard_size,
    split_order,
)

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "cases" / "mindspore_cases.json").read_text()
)


def cases(name: str) -> list[dict[str, Any]]:
    found = [c for c in CASES if c["name"] == name]
    assert found, name
    return found


@pytest.mark.parametrize("case", cases("shard_noshuffle"), ids=lambda c: str(c["args"]))
def test_strided_split_matches_mindspore(case: dict[str, Any]) -> None:
    n, k = case["args"]["n"], case["args"]["num_shards"]
    got = [split_order(RangeOrder(0, n), n, k, s).to_array().tolist() for s in range(k)]
    assert got == case["expect"]
    assert [shard_size(n, k, s) for s in range(k)] == [len(e) for e in case["expect"]]


@pytest.mark.parametrize("case", cases("padded"), ids=lambda c: str(c["args"]))
def test_padded_split_matches_mindspore(case: dict[str, Any]) -> None:
    args = case["args"]
    n, k, p = args["n"], args["num_shards"], args["num_padded"]
    pad_id = args["padded_sample"]["id"]
    got = []
    for s in range(k):
        ids = split_order(RangeOrder(0, n), n, k, s, num_padded=p).to_array()
        got.append([int(i) if i < n else pad_id for i in ids])
    assert got == case["expect"]


def test_padding_must_fill_every_shard_equally() -> None:
    message = (
        "Invalid data, the size of dataset and padded samples: 14 can not be divisible by "
        "the value of 'num_shards': 5. Please adjust the value of 'num_padded'."
    )
    with pytest.raises(SamplerError) as info:
        split_order(RangeOrder(0, 10), 10, 5, 0, num_padded=4)
    assert str(info.value) == message
    assert isinstance(info.value, RuntimeError)


def test_shard_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="num_shards"):
        check_shards(2.0, 0)
    with pytest.raises(TypeError, match="shard_id"):
        check_shards(2, True)
    with pytest.raises(SamplerError, match="num_shards"):
        check_shards(0, 0)
    with pytest.raises(
        SamplerError,
        match=r"^Input shard_id is not within the required interval of \[0, 1\]\.$",
    ):
        check_shards(2, 2)
    with pytest.raises(SamplerError):
        check_shards(2, -1)


@given(
    n=st.integers(0, 200),
    k=st.integers(1, 12),
    key=st.integers(0, 2**32),
)
def test_shards_cover_everything_and_overlap_only_by_wraparound(n: int, k: int, key: int) -> None:
    order = PermutationOrder(n, key)
    full = order.to_array()
    shards = [split_order(order, n, k, s).to_array() for s in range(k)]
    per_shard = -(-n // k)
    assert all(len(s) == per_shard for s in shards)
    together = np.concatenate(shards)
    if n:
        assert set(together.tolist()) == set(range(n))
        # Interleaving the shards gives the order once, then its start again (wraparound).
        interleaved = np.stack(shards, axis=1).reshape(-1)
        assert np.array_equal(interleaved[:n], full)
        assert np.array_equal(interleaved, np.resize(full, k * per_shard))
        # So a row is repeated only when the order has fewer rows than shards x rows.
        if n % k == 0:
            assert len(np.unique(together)) == len(together)
    else:
        assert len(together) == 0


@given(n=st.integers(0, 120), k=st.integers(1, 9), key=st.integers(0, 2**32))
def test_padded_shards_are_disjoint(n: int, k: int, key: int) -> None:
    num_padded = (-n) % k + k * (key % 2)
    order = PermutationOrder(n, key)
    shards = [split_order(order, n, k, s, num_padded=num_padded).to_array() for s in range(k)]
    together = np.sort(np.concatenate(shards))
    assert np.array_equal(together, np.arange(n + num_padded))
    assert len({len(s) for s in shards}) == 1


def expected_offset_blocks(n: int, k: int, off: int) -> list[list[int]]:
    """Brute force from the definition: row i sits at virtual position off + i; shard x
    gets as many rows as virtual positions v with v % k == x, in one block, shard 0 first."""
    counts = [sum(1 for i in range(n) if (off + i) % k == x) for x in range(k)]
    blocks, start = [], 0
    for c in counts:
        blocks.append(list(range(start, start + c)))
        start += c
    return blocks


@given(n=st.integers(0, 60), k=st.integers(1, 10), data=st.data())
def test_offset_counts_follow_the_mindspore_formula(n: int, k: int, data: st.DataObject) -> None:
    off = data.draw(st.integers(0, k))
    counts = offset_shard_counts(n, k, off).tolist()
    formula = [(n + off) // k + (x < (n + off) % k) - (x < off) for x in range(k)]
    assert counts == formula
    assert sum(counts) == n
    if off < k:
        assert counts == [len(b) for b in expected_offset_blocks(n, k, off)]


@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=5), k=st.integers(1, 8))
def test_concat_children_split_into_blocks_covering_every_row(sizes: list[int], k: int) -> None:
    offsets = concat_offsets(sizes, k)
    assert offsets == [sum(sizes[:j]) % k for j in range(len(sizes))]
    per_shard = [concat_shard_positions(sizes, k, s) for s in range(k)]
    for j, n in enumerate(sizes):
        expected = expected_offset_blocks(n, k, offsets[j])
        got = [per_shard[s][j].to_array().tolist() for s in range(k)]
        assert got == expected
    # Every shard gets floor or ceil of the total: remainders are spread across shards.
    totals = [sum(len(r) for r in per_shard[s]) for s in range(k)]
    assert max(totals) - min(totals) <= 1
    assert sum(totals) == sum(sizes)


def test_concat_children_smaller_than_num_shards_work() -> None:
    # MindSpore segfaults here; mrecord gives each row to exactly one shard.
    got = [
        [r.to_array().tolist() for r in concat_shard_positions([1, 2, 1], 4, s)] for s in range(4)
    ]
    assert got == [[[0], [], []], [[], [0], []], [[], [1], []], [[], [], [0]]]


def test_offset_split_of_an_order() -> None:
    order = RangeOrder(0, 5)
    blocks = [split_order(order, 5, 3, s, offset=1).to_array().tolist() for s in range(3)]
    assert blocks == expected_offset_blocks(5, 3, 1)
    assert [shard_size(5, 3, s, offset=1) for s in range(3)] == [len(b) for b in blocks]
    with pytest.raises(SamplerError, match="offset"):
        offset_shard_counts(5, 3, 4)


def test_argument_errors_name_the_argument_and_what_was_given() -> None:
    # Exact messages: a user reads which argument was wrong, what it got, and of what type.
    def message(fn: Any, *args: Any) -> str:
        with pytest.raises((TypeError, SamplerError)) as info:
            fn(*args)
        return str(info.value)

    assert message(check_shards, 2.0, 0) == "num_shards must be an int, got 2.0 (float)"
    assert message(check_shards, 2, "1") == "shard_id must be an int, got '1' (str)"
    assert message(offset_shard_counts, 5, None, 0) == (
        "num_shards must be an int, got None (NoneType)"
    )
    assert message(offset_shard_counts, 5, 3, 1.0) == "offset must be an int, got 1.0 (float)"
    assert message(offset_shard_counts, 5, 0, 0) == "num_shards must be >= 1, got 0"
    assert message(offset_shard_counts, 5, 3, -1) == (
        "offset must be in [0, num_shards=3] for offset sharding, got -1"
    )
    assert message(concat_offsets, [1], 2.5) == "num_shards must be an int, got 2.5 (float)"
    assert message(concat_offsets, [1], 0) == "num_shards must be >= 1, got 0"
    assert message(concat_offsets, [1, "2"], 2) == "child_sizes[1] must be an int, got '2' (str)"
    assert message(concat_offsets, [1, -2], 2) == "child_sizes[1] must be >= 0, got -2"


def test_the_largest_num_shards_is_accepted() -> None:
    # MindSpore's interval is [1, INT32_MAX], both ends included.
    assert check_shards(2**31 - 1, 2**31 - 2) == (2**31 - 1, 2**31 - 2)
    with pytest.raises(SamplerError, match=r"\[1, 2147483647\]\. Got num_shards=2147483648\."):
        check_shards(2**31, 0)


@given(n=st.integers(0, 60), k=st.integers(1, 10), data=st.data())
def test_offset_counts_are_int64_row_counts(n: int, k: int, data: st.DataObject) -> None:
    # Callers slice and index with these counts: float counts would break `counts[:s].sum()`.
    counts = offset_shard_counts(n, k, data.draw(st.integers(0, k)))
    assert counts.dtype == np.int64
    assert counts.shape == (k,)
