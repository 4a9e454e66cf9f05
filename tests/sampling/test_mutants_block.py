"""Shuffle.BLOCK's details that a resumed job, a reader or a planner relies on: exact block
bounds, the exact order of a (seed, epoch), every argument's message whole, and the planning
arithmetic at its boundaries (docs/RELIABILITY.md, "Mutation testing", sampling/shuffle/block.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.sampling.shuffle.block import (
    DEFAULT_BLOCK_ROWS,
    DEFAULT_WINDOW_BLOCKS,
    BlockLayout,
    BlockOrder,
    block_bounds,
    block_shuffle,
    choose_layout,
    plan_block_sizes,
    prefers_block,
)

PAGES = np.array([0, 3, 9, 10, 12, 13, 16])


def _message(error: type[BaseException], make: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(error) as info:
        make(*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------- planning

MB = 1 << 20
ROWS = {"num_rows": 10**8, "data_bytes": 10**10, "page_bytes": 4096}  # 100-byte rows


def test_plan_block_sizes_exactly() -> None:
    def plan(**kwargs: Any) -> tuple[int, int, str]:
        return plan_block_sizes(**{**ROWS, **kwargs})

    # 8 * 1e8 / 1000 = 800 kB -> 1 MiB (nearest power of two) = 10,486 rows of 100 bytes;
    # the window is 4 GiB / 8 = 512 MiB: 512 blocks.
    assert plan(iops=1000, bandwidth=1e8, memory_budget=1 << 32) == (
        10_486, 512, "1,000 IOPS, 100 MB/s, memory budget 4,295 MB",
    )  # fmt: skip
    # 2**20.5 bytes is where rounding goes up: 1.48 MB -> 1 MiB, 1.488 MB -> 2 MiB.
    assert plan(iops=1000, bandwidth=1.85e8, memory_budget=1 << 32)[:2] == (10_486, 512)
    assert plan(iops=1000, bandwidth=1.86e8, memory_budget=1 << 32)[:2] == (20_972, 256)
    # 64 MiB budget: an 8 MiB window holds under 32 blocks of 800 kB, so blocks shrink to
    # 8 MiB / 32 = 256 KiB (2,622 rows) and the window keeps 32.
    assert plan(iops=1000, bandwidth=1e8, memory_budget=64 * MB) == (
        2622, 32, "1,000 IOPS, 100 MB/s, memory budget 67 MB",
    )  # fmt: skip
    # A huge budget: at most 1,024 blocks in a window.
    assert plan(iops=1000, bandwidth=1e8, memory_budget=1 << 40)[:2] == (10_486, 1024)
    # A tiny budget: blocks not below one page (4,096 bytes = 41 rows), a window of 2.
    assert plan(iops=1000, bandwidth=1e8, memory_budget=64 * 1024) == (
        41, 2, "1,000 IOPS, 100 MB/s, memory budget 0 MB",
    )  # fmt: skip
    assert plan(iops=1000, bandwidth=1e8, memory_budget=4096)[:2] == (41, 1)
    # 1 IOPS is a measurement; MB are 10**6 bytes, rounded half to even (1.5 -> 2).
    assert plan(iops=1.0, bandwidth=1.5e6, memory_budget=1_500_000)[2] == (
        "1 IOPS, 2 MB/s, memory budget 2 MB"
    )
    # Unmeasured storage: 4 MiB blocks (41,944 rows of 100 bytes) when the window has room.
    assert plan(iops=None, bandwidth=None, memory_budget=1 << 32)[:2] == (41_944, 128)
    # One row of 1 MB: 1 MiB blocks (4 MiB shrunk for 32 in a 32 MiB window) = 2 rows.
    assert plan_block_sizes(
        num_rows=1, data_bytes=10**6, page_bytes=4096, iops=None, bandwidth=None,
        memory_budget=None,
    )[:2] == (2, 1)  # fmt: skip
    # Pages of 0 bytes and rows of 1 byte with no memory to spare: blocks of one row.
    assert plan_block_sizes(
        num_rows=10**6, data_bytes=10**6, page_bytes=0, iops=1000, bandwidth=1e8,
        memory_budget=8,
    )[:2] == (1, 1)  # fmt: skip
    # A window never holds more blocks than the data has.
    assert plan_block_sizes(
        num_rows=100, data_bytes=10**4, page_bytes=4096, iops=1000, bandwidth=1e8,
        memory_budget=1 << 32,
    )[:2] == (10_486, 1)  # fmt: skip
    assert plan_block_sizes(
        num_rows=20_000, data_bytes=2 * 10**6, page_bytes=4096, iops=1000, bandwidth=1e8,
        memory_budget=1 << 32,
    )[:2] == (10_486, 2)  # fmt: skip


def test_plan_block_sizes_falls_back_on_unknown_numbers() -> None:
    fallback = (128, 32, "storage not measured, memory budget 268 MB")
    rows = {"num_rows": 10**6, "data_bytes": 10**6 * 8192, "page_bytes": 4096}
    # 8 kB rows, 4 MiB blocks of a 32 MiB window: shrunk to 1 MiB = 128 rows.
    assert plan_block_sizes(iops=None, bandwidth=None, memory_budget=None, **rows) == fallback
    for bad in (None, float("nan"), float("inf"), 0.0, -1.0):
        assert plan_block_sizes(iops=bad, bandwidth=1e8, memory_budget=None, **rows) == fallback
        assert plan_block_sizes(iops=1e3, bandwidth=bad, memory_budget=None, **rows) == fallback
    assert plan_block_sizes(iops=None, bandwidth=None, memory_budget=0, **rows) == fallback
    assert plan_block_sizes(iops=None, bandwidth=None, memory_budget=-5, **rows) == fallback
    # Rows larger than a page: a block is at least one row.
    assert plan_block_sizes(
        num_rows=10, data_bytes=10 * 8 * MB, page_bytes=4096, iops=None, bandwidth=None,
        memory_budget=None,
    ) == (1, 4, "storage not measured, memory budget 268 MB")  # fmt: skip
    # No rows at all: rows of one byte, 4 MiB blocks shrunk to 1 MiB for 32 in a window,
    # and one block.
    assert plan_block_sizes(
        num_rows=0, data_bytes=0, page_bytes=0, iops=None, bandwidth=None, memory_budget=None
    ) == (MB, 1, "storage not measured, memory budget 268 MB")


def test_prefers_block_at_its_boundaries() -> None:
    def rule(**kwargs: Any) -> bool:
        base = {
            "data_bytes": 1000 * 4096, "num_rows": 1000, "iops": 999.0,
            "bandwidth": 4096 * 4000.0, "memory_budget": 1000 * 4096 - 1,
        }  # fmt: skip
        return prefers_block(**{**base, **kwargs})

    # 4 KiB rows: sequential 4,000 rows/s, random min(iops, 4,000): BLOCK below 1,000 IOPS.
    assert rule()
    assert not rule(iops=1000.0)
    # Data that fits the budget (exactly, too) never picks BLOCK.
    assert not rule(memory_budget=1000 * 4096)
    assert rule(memory_budget=0)
    # Unknown numbers never pick BLOCK.
    for name, bad in (("iops", None), ("iops", float("nan")), ("iops", 0.0),
                      ("bandwidth", None), ("bandwidth", -1.0), ("memory_budget", None),
                      ("num_rows", 0), ("num_rows", -1)):  # fmt: skip
        assert not rule(**{name: bad}), name
    # Rows below 4 KiB still cost a whole 4 KiB read: with 1,024-byte rows random reads
    # give a quarter of the sequential rate (not BLOCK), with 1,000-byte rows less.
    fast: dict[str, Any] = {"iops": 1e9, "bandwidth": 1e9, "memory_budget": 0}
    assert not prefers_block(data_bytes=1024 * 10, num_rows=10, **fast)
    assert prefers_block(data_bytes=1000 * 10, num_rows=10, **fast)
    # One row of 1 GB, read at 0.1 IOPS against 1 row/s sequentially: BLOCK.
    assert prefers_block(data_bytes=10**9, num_rows=1, iops=0.1, bandwidth=1e9, memory_budget=0)


class _Measure:
    """A storage measurement that counts its calls."""

    def __init__(self, numbers: tuple[float, float] | None) -> None:
        self.numbers = numbers
        self.calls = 0

    def __call__(self) -> tuple[float, float] | None:
        self.calls += 1
        return self.numbers


SLOW = (1000.0, 1e8)  # 100-byte rows: random 1,000 rows/s, sequential 1,000,000
DATA = {"num_rows": 10**8, "data_bytes": 10**10, "page_bytes": 4096}


def _choose(measure: _Measure, **kwargs: Any) -> BlockLayout | None:
    args: dict[str, Any] = {
        "adaptive": False, "num_shards": 1, "page_starts": None, "block_rows": None,
        "window_blocks": None, "memory_budget": 1 << 32, "measure": measure, **DATA,
    }  # fmt: skip
    args.update(kwargs)
    return choose_layout(**args)


def test_choose_layout_for_block() -> None:
    # One rank, sizes not given: measured once, planned from the numbers and the budget.
    measure = _Measure(SLOW)
    layout = _choose(measure, page_starts=[0, 5, 9])
    assert measure.calls == 1 and layout is not None
    assert (layout.block_rows, layout.window_blocks, layout.adaptive) == (10_486, 512, False)
    assert layout.why == "1,000 IOPS, 100 MB/s, memory budget 4,295 MB"
    assert layout.page_starts is not None and layout.page_starts.tolist() == [0, 5, 9]
    # One size given: still measured for the other.
    measure = _Measure(SLOW)
    layout = _choose(measure, block_rows=7)
    assert measure.calls == 1 and layout is not None and layout.page_starts is None
    assert (layout.block_rows, layout.window_blocks) == (7, 512)
    assert layout.why == "1,000 IOPS, 100 MB/s, memory budget 4,295 MB"
    measure = _Measure(SLOW)
    layout = _choose(measure, window_blocks=3)
    assert measure.calls == 1 and layout is not None
    assert (layout.block_rows, layout.window_blocks) == (10_486, 3)
    # Both given: used as given, nothing measured.
    measure = _Measure(SLOW)
    layout = _choose(measure, block_rows=7, window_blocks=3)
    assert measure.calls == 0 and layout is not None
    assert (layout.block_rows, layout.window_blocks, layout.why) == (7, 3, "given")
    # Measurement failed: the fallback plan.
    layout = _choose(_Measure(None))
    assert layout is not None and layout.why == "storage not measured, memory budget 4,295 MB"


def test_choose_layout_on_several_ranks_measures_nothing_and_ignores_the_budget() -> None:
    measure = _Measure(SLOW)
    layout = _choose(measure, num_shards=2, memory_budget=64 * MB)
    assert measure.calls == 0 and layout is not None
    assert layout.why == "2 ranks: not measured, storage not measured, memory budget 268 MB"
    assert (layout.block_rows, layout.window_blocks) == (10_486, 32)
    layout = _choose(measure, num_shards=3, block_rows=7, window_blocks=3)
    assert measure.calls == 0 and layout is not None and layout.why == "given"
    assert _choose(measure, num_shards=2, adaptive=True) is None
    assert measure.calls == 0


def test_choose_layout_for_adaptive() -> None:
    measure = _Measure(SLOW)
    layout = _choose(measure, adaptive=True, memory_budget=64 * MB)
    assert measure.calls == 1 and layout is not None and layout.adaptive is True
    assert (layout.block_rows, layout.window_blocks) == (2622, 32)
    assert layout.why == "1,000 IOPS, 100 MB/s, memory budget 67 MB"
    # Given sizes win under ADAPTIVE too.
    layout = _choose(_Measure(SLOW), adaptive=True, memory_budget=0, block_rows=7,
                     window_blocks=3)  # fmt: skip
    assert layout is not None and (layout.block_rows, layout.window_blocks) == (7, 3)
    assert layout.adaptive is True and layout.why == "given"
    # Data within the budget (exactly, too), no budget, or not measured: no BLOCK, and
    # nothing measured when the budget already says so.
    for budget in (None, 10**10, 10**11):
        measure = _Measure(SLOW)
        assert _choose(measure, adaptive=True, memory_budget=budget) is None
        assert measure.calls == 0
    assert _choose(_Measure(None), adaptive=True, memory_budget=0) is None
    # 10 kB rows at 10 IOPS against 10,000 rows/s sequentially: the IOPS decide.
    layout = _choose(_Measure((10.0, 1e8)), adaptive=True, memory_budget=0, num_rows=10**6)
    assert layout is not None and layout.adaptive is True
    # Storage as fast at random as sequentially (10 kB rows): measured once, no BLOCK.
    measure = _Measure((1e6, 1e8))
    assert _choose(measure, adaptive=True, memory_budget=0, num_rows=10**6) is None
    assert measure.calls == 1


# ------------------------------------------------------------------------------ layout


def test_layout_defaults_repr_and_copies() -> None:
    layout = BlockLayout()
    assert (layout.page_starts, layout.block_rows, layout.window_blocks) == (None, 65_536, 64)
    assert (DEFAULT_BLOCK_ROWS, DEFAULT_WINDOW_BLOCKS, layout.adaptive) == (65_536, 64, False)
    assert repr(layout) == (
        "BlockLayout(page_starts=None, block_rows=65536, window_blocks=64, adaptive=False, "
        "why='defaults')"
    )
    paged = BlockLayout(
        page_starts=np.array([0, 3, 9]), block_rows=3, window_blocks=2, adaptive=True
    )
    assert repr(paged) == (
        "BlockLayout(page_starts=<3 pages>, block_rows=3, window_blocks=2, adaptive=True, "
        "why='defaults')"
    )
    resized = paged.with_sizes(5, 7, "given")
    assert (resized.block_rows, resized.window_blocks, resized.why) == (5, 7, "given")
    assert resized.adaptive is True and resized.page_starts.tolist() == [0, 3, 9]  # type: ignore[union-attr]
    plain = paged.without_adaptive()
    assert plain.adaptive is False
    assert (plain.block_rows, plain.window_blocks, plain.why) == (3, 2, "defaults")


def test_layout_keeps_page_starts_as_a_read_only_int64_copy() -> None:
    given = np.array([0, 3, 9], dtype=np.uint16)
    layout = BlockLayout(page_starts=given)  # type: ignore[arg-type]
    assert layout.page_starts is not None
    assert layout.page_starts.dtype == np.int64
    assert layout.page_starts.tolist() == [0, 3, 9]
    assert not layout.page_starts.flags.writeable
    given[0] = 5  # the caller's array stays the caller's
    assert layout.page_starts.tolist() == [0, 3, 9]
    # An empty array of any dtype means "no page boundaries inside the files".
    assert BlockLayout(page_starts=np.array([])).page_starts.tolist() == []  # type: ignore[union-attr]
    assert BlockLayout(page_starts=np.array([0, 0, 4])).page_starts.tolist() == [0, 0, 4]  # type: ignore[union-attr]


def test_layout_messages_are_whole() -> None:
    assert _message(ArgumentError, BlockLayout, block_rows=0) == (
        "block_rows must be >= 1 rows, got 0"
    )
    assert _message(ArgumentError, BlockLayout, window_blocks=0) == (
        "window_blocks must be >= 1 rows, got 0"
    )
    assert _message(WrongTypeError, BlockLayout, page_starts=np.array([[0, 1]])) == (
        "page_starts must be a 1-D integer array, got array([[0, 1]])"
    )
    assert _message(WrongTypeError, BlockLayout, page_starts=np.array([0.0, 1.0])) == (
        "page_starts must be a 1-D integer array, got array([0., 1.])"
    )
    assert _message(ArgumentError, BlockLayout, page_starts=np.array([0, 10, 5])) == (
        "page_starts must be global row ids >= 0 in increasing order, got [0, 10, 5]..."
    )
    assert _message(ArgumentError, BlockLayout, page_starts=np.array([-1, 2])) == (
        "page_starts must be global row ids >= 0 in increasing order, got [-1, 2]..."
    )
    # Only the first eight are named.
    assert _message(ArgumentError, BlockLayout, page_starts=np.arange(20, 0, -1)) == (
        "page_starts must be global row ids >= 0 in increasing order, got "
        "[20, 19, 18, 17, 16, 15, 14, 13]..."
    )


# ------------------------------------------------------------------------------ blocks


def test_block_bounds_exactly() -> None:
    # Cut every 4 rows from each file's start; the empty file adds no block.
    assert block_bounds([10, 0, 7], None, 4).tolist() == [0, 4, 8, 10, 14, 17]
    # Each cut moves forward to the next page start or file start: 4 -> 9, 8 -> 9, 14 -> 16.
    bounds = block_bounds([10, 0, 7], PAGES, 4)
    assert bounds.tolist() == [0, 9, 10, 16, 17]
    assert bounds.dtype == np.int64
    # Pages at 0 and at N are allowed (the range is closed).
    assert block_bounds([6], np.array([0, 2, 6]), 3).tolist() == [0, 6]
    assert block_bounds([6], np.array([0, 3, 6]), 3).tolist() == [0, 3, 6]
    # No rows: one bound, 0.
    for counts in ([], [0], [0, 0]):
        empty = block_bounds(counts, PAGES, 4)
        assert empty.tolist() == [0] and empty.dtype == np.int64
    # Files of one row are blocks of one row.
    assert block_bounds([1, 1, 0, 1], None, 4).tolist() == [0, 1, 2, 3]
    # Page starts of any integer dtype and shape give int64 bounds.
    for pages in (np.array([0, 5], dtype=np.uint64), np.array([[0, 5]])):
        got = block_bounds([10], pages, 4)
        assert got.tolist() == [0, 5, 10] and got.dtype == np.int64
    # A block_rows larger than a file gives one block per file.
    assert block_bounds([3, 5], None, 100).tolist() == [0, 3, 8]


def test_block_bounds_messages_are_whole() -> None:
    assert _message(ArgumentError, block_bounds, [10], np.array([0, 11]), 4) == (
        "page_starts must lie in [0, 10], got [0, 11]"
    )
    assert _message(ArgumentError, block_bounds, [10], np.array([-1, 3]), 4) == (
        "page_starts must lie in [0, 10], got [-1, 3]"
    )
    assert _message(ArgumentError, block_bounds, [10], np.arange(-1, 12), 4) == (
        "page_starts must lie in [0, 10], got [-1, 0, 1, 2, 3, 4, 5, 6]"
    )
    assert _message(ArgumentError, block_bounds, [10], None, 0) == (
        "block_rows must be >= 1 rows, got 0"
    )
    assert _message(ArgumentError, block_bounds, [10, -1], None, 4) == (
        "file_row_counts[1] must be >= 0, got -1"
    )


# ------------------------------------------------------------------------------- order


def test_block_orders_of_a_seed_are_pinned_across_versions() -> None:
    """BLOCK's order is mrecord's own (MindSpore has no BLOCK mode, so there is no outside
    order to compare with): these values were recorded once from mrecord and pin that a
    (seed, epoch) gives the same epoch from version to version, as a job resumed under a
    newer mrecord needs (a change of key purpose, strata, window visit or row mixing breaks
    them)."""
    layout = BlockLayout(page_starts=PAGES, block_rows=3, window_blocks=3)
    order = block_shuffle([10, 0, 7], 42, 1, layout=layout)
    assert isinstance(order, BlockOrder)
    assert order.bounds.tolist() == [0, 3, 9, 10, 13, 16, 17]
    assert (order.num_blocks, order.window_blocks, order.num_windows) == (6, 3, 2)
    assert repr(order) == "BlockOrder(len=17, blocks=6, window_blocks=3, windows=2)"
    assert order.members.tolist() == [1, 3, 5, 0, 2, 4]
    assert order.visit.tolist() == [0, 1]
    assert order.window_rows.tolist() == [10, 7]
    assert order.to_array().tolist() == [
        5, 7, 3, 12, 16, 4, 10, 11, 8, 6, 13, 15, 1, 9, 2, 14, 0,
    ]  # fmt: skip
    o2 = block_shuffle([30], 3, 2, layout=BlockLayout(block_rows=4, window_blocks=3))
    assert isinstance(o2, BlockOrder)
    assert o2.bounds.tolist() == [0, 4, 8, 12, 16, 20, 24, 28, 30]
    assert o2.members.tolist() == [0, 4, 6, 1, 3, 2, 5, 7]
    assert o2.visit.tolist() == [1, 2, 0]
    assert o2.window_rows.tolist() == [12, 8, 10]
    assert o2.to_array().tolist() == [
        6, 14, 15, 4, 13, 5, 7, 12, 20, 10, 11, 9, 21, 22, 23,
        8, 28, 29, 19, 2, 24, 25, 0, 27, 16, 26, 3, 17, 1, 18,
    ]  # fmt: skip
    # Default layout (blocks cut at any row, 65,536 rows a block: one block, one window).
    assert block_shuffle([5, 6], 7, 0).to_array().tolist() == [1, 10, 2, 0, 7, 6, 9, 3, 8, 4, 5]
    small = BlockLayout(block_rows=2, window_blocks=2)
    assert block_shuffle([5, 6], 7, 0, layout=small).to_array().tolist() == [
        8, 7, 1, 0, 4, 5, 6, 10, 9, 2, 3,
    ]  # fmt: skip


def test_take_and_chunks_agree_across_windows_and_ids_are_new_int64_arrays() -> None:
    order = block_shuffle([30], 3, 2, layout=BlockLayout(block_rows=4, window_blocks=3))
    ids = order.to_array()
    assert ids.dtype == np.int64
    # Each single position, and runs from any start next to a seam (windows end at 8, 18).
    assert [int(order.take(np.array([i]))[0]) for i in range(30)] == ids.tolist()
    for start in (0, 1, 7, 8, 9, 17, 18, 19, 29, 30):
        for size in (1, 5, 12, 31):
            chunks = list(order.iter_chunks(size, start=start))
            assert all(c.dtype == np.int64 for c in chunks)
            assert np.concatenate([ids[:0], *chunks]).tolist() == ids[start:].tolist()
    positions = np.array([29, 0, 11, 12, 19, 20, 11])
    got = order.take(positions)
    assert got.tolist() == ids[positions].tolist() and got.dtype == np.int64
    # A take of no positions gives a new empty int64 array.
    empty_positions = np.zeros(0, dtype=np.int64)
    none = order.take(empty_positions)
    assert none.tolist() == [] and none.dtype == np.int64
    assert order.to_array() is not order.to_array()


def test_windows_of_positions_and_blocks_of_windows() -> None:
    order = block_shuffle([30], 3, 2, layout=BlockLayout(block_rows=4, window_blocks=3))
    assert isinstance(order, BlockOrder)
    # Visit order [1, 2, 0] of windows with 8, 10 and 12 rows.
    assert order.window_of_position(np.arange(30)).tolist() == [1] * 8 + [2] * 10 + [0] * 12
    assert order.window_of_position([7, 8, 17, 18, 29]).tolist() == [1, 2, 2, 0, 0]
    assert order.blocks_of_window(0).tolist() == [0, 4, 6]
    assert order.blocks_of_window(1).tolist() == [1, 3]
    assert order.blocks_of_window(2).tolist() == [2, 5, 7]
    assert order.blocks_of_window(3).tolist() == []


def test_window_blocks_are_clipped_to_the_blocks_there_are() -> None:
    # 3 blocks, 64 per window asked: one window of 3 blocks.
    order = BlockOrder(np.array([0, 2, 5, 9]), 64, key=5)
    assert (order.num_blocks, order.window_blocks, order.num_windows) == (3, 3, 1)
    assert order.window_rows.tolist() == [9] and order.visit.tolist() == [0]
    assert sorted(order.to_array().tolist()) == list(range(9))
    # Bounds of any integer dtype give int64 ids.
    wide = BlockOrder(np.array([0, 2, 5, 9], dtype=np.uint64), 64, key=5)
    got = wide.take(np.arange(9))
    assert got.dtype == np.int64 and got.tolist() == order.to_array().tolist()
    # One block: one window, its rows mixed.
    one = block_shuffle([7], 1, 0)
    assert isinstance(one, BlockOrder) and (one.num_blocks, one.num_windows) == (1, 1)
    assert sorted(one.to_array().tolist()) == list(range(7))
    assert one.take(np.arange(7)).tolist() == one.to_array().tolist()
    # One block per window: windows are blocks, each read whole (its rows mixed).
    single = BlockOrder([[0, 2, 5, 9]], 1, key=5)
    assert (single.window_blocks, single.num_windows) == (1, 3)
    ids = single.to_array()
    for window_rows in np.split(ids, np.cumsum(single.window_rows[single.visit])[:-1]):
        block = int(np.searchsorted(single.bounds, window_rows[0], side="right")) - 1
        assert sorted(window_rows.tolist()) == list(
            range(int(single.bounds[block]), int(single.bounds[block + 1]))
        )
    assert _message(ArgumentError, BlockOrder, [0, 4], 0, 1) == (
        "window_blocks must be >= 1 rows, got 0"
    )


def test_an_order_of_no_rows() -> None:
    for counts in ([], [0, 0]):
        order = block_shuffle(counts, 1, 0)
        assert isinstance(order, BlockOrder)
        assert (len(order), order.num_blocks, order.window_blocks, order.num_windows) == (
            0, 0, 1, 0,
        )  # fmt: skip
        assert repr(order) == "BlockOrder(len=0, blocks=0, window_blocks=1, windows=0)"
        got = order.to_array()
        assert got.tolist() == [] and got.dtype == np.int64
        assert list(order.iter_chunks(4)) == []


def test_block_shuffle_checks_its_arguments_and_ignores_the_other_modes_options() -> None:
    assert _message(WrongTypeError, block_shuffle, "12", 1, 0) == (
        "file_row_counts must be a sequence of ints, got '12'"
    )
    assert _message(ArgumentError, block_shuffle, [3], -1, 0) == "seed must be >= 0, got -1"
    assert _message(ArgumentError, block_shuffle, [3], 1, -2) == "epoch must be >= 0, got -2"
    plain = block_shuffle([40], 9, 3, layout=BlockLayout(block_rows=4, window_blocks=2))
    other = block_shuffle(
        [40], 9, 3, partial_window=1, adaptive_threshold=1,
        layout=BlockLayout(block_rows=4, window_blocks=2),
    )  # fmt: skip
    assert plain.to_array().tolist() == other.to_array().tolist()
    # Seed and epoch both change the order.
    layout = BlockLayout(block_rows=4, window_blocks=2)
    assert block_shuffle([40], 10, 3, layout=layout).to_array().tolist() != (
        plain.to_array().tolist()
    )
    assert block_shuffle([40], 9, 4, layout=layout).to_array().tolist() != (
        plain.to_array().tolist()
    )
