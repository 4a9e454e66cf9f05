"""mrecord.pool: the one thread pool behind the pipeline workers, converters and Ray publish."""

from __future__ import annotations

import gc
import threading
import traceback
from collections.abc import Callable, Generator, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.pipeline.engine.context import PipelineStopped
from mrecord.pool import PoolStopped, ThreadPool, call, ordered_map, single_thread_executor

_WAIT_S = 30.0  # generous bound on waits for another thread; never reached when things work


def _pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}-")]


class _Items:
    """An item source that counts how many items were taken from it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.taken = 0

    def __iter__(self) -> Iterator[int]:
        for i in range(self.n):
            self.taken += 1
            yield i


@given(
    items=st.lists(st.integers(-1000, 1000), max_size=40),
    workers=st.integers(1, 4),
    window=st.integers(1, 6),
)
def test_results_come_in_submission_order_with_a_bounded_window(
    items: list[int], workers: int, window: int
) -> None:
    source = iter(items)
    taken = 0

    def counted() -> Iterator[int]:
        nonlocal taken
        for item in source:
            taken += 1
            yield item

    with ThreadPool[int, int](lambda x: x * 3 + 1, workers, "t-order") as pool:
        out = []
        for consumed, (item, result) in enumerate(ordered_map(pool, counted(), window), 1):
            assert taken - consumed < window  # never more than `window` items in flight
            out.append((item, result))
    assert out == [(x, x * 3 + 1) for x in items]


def test_a_slow_first_item_does_not_change_the_order() -> None:
    second_done = threading.Event()

    def fn(x: int) -> int:
        if x == 0:
            assert second_done.wait(_WAIT_S)  # finishes only after item 1 did
        if x == 1:
            second_done.set()
        return x

    with ThreadPool(fn, 2, "t-slow") as pool:
        assert list(pool.map(range(6))) == list(range(6))


def test_a_worker_exception_reaches_the_consumer_with_its_traceback() -> None:
    def decode_row(x: int) -> int:
        if x == 3:
            raise KeyError(f"bad row {x}")
        return x

    got = []
    with ThreadPool(decode_row, 2, "t-fail") as pool, pytest.raises(KeyError) as info:
        for result in pool.map(range(10)):
            got.append(result)
    assert str(info.value) == "'bad row 3'"
    assert got == [0, 1, 2]  # the results before the failing item still arrive, in order
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "decode_row" in frames
    assert any("'t-fail-" in note for note in info.value.__notes__)


def test_stop_cancels_pending_items_and_submits_nothing_more() -> None:
    gate, ran = threading.Event(), []
    outcome: list[list[tuple[int, int]] | PoolStopped] = []
    items, stop = _Items(100), threading.Event()

    def fn(x: int) -> int:
        if x == 0:
            assert gate.wait(_WAIT_S)
        ran.append(x)
        return x

    pool = ThreadPool(fn, 1, "t-stop")

    def consume() -> None:
        try:
            outcome.append(list(ordered_map(pool, items, 4, stop)))
        except PoolStopped as exc:
            outcome.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for _ in range(int(_WAIT_S / 0.01)):  # wait until the window is full (item 0 blocks)
        if items.taken == 4:
            break
        threading.Event().wait(0.01)
    stop.set()
    consumer.join(_WAIT_S)
    gate.set()
    pool.shutdown()
    assert isinstance(outcome[0], PoolStopped)
    assert isinstance(outcome[0], PipelineStopped)  # the pipeline unwinds on it
    assert items.taken == 4  # nothing more was taken once stop was set
    assert ran == [0]  # items 1..3 were queued, then cancelled: never run
    assert not _pool_threads("t-stop")


def test_a_set_stop_submits_nothing() -> None:
    ran: list[int] = []
    stop = threading.Event()
    stop.set()
    with ThreadPool(ran.append, 2, "t-stopped") as pool, pytest.raises(PoolStopped):
        list(ordered_map(pool, range(10), 4, stop))
    assert ran == []


def test_closing_the_map_early_cancels_what_is_queued() -> None:
    entered, gate, ran = threading.Event(), threading.Event(), []

    def fn(x: int) -> int:
        ran.append(x)
        if x == 1:
            entered.set()
            assert gate.wait(_WAIT_S)
        return x

    with ThreadPool(fn, 1, "t-close") as pool:
        it = ordered_map(pool, range(100), 4)
        assert isinstance(it, Generator)  # closed below
        assert next(it) == (0, 0)
        assert entered.wait(_WAIT_S)  # the one worker is inside item 1
        it.close()  # the consumer stops early (a `take`, a `break`, an error downstream)
        gate.set()
    assert ran == [0, 1]  # items 2 and 3 were in the window but never ran


def test_shutdown_cancels_queued_items_and_joins_the_threads() -> None:
    entered, gate, ran = threading.Event(), threading.Event(), []

    def fn(x: int) -> int:
        entered.set()
        assert gate.wait(_WAIT_S)
        ran.append(x)
        return x

    pool = ThreadPool(fn, 1, "t-shutdown")
    futures = [pool.submit(i) for i in range(3)]
    assert entered.wait(_WAIT_S)
    closer = threading.Thread(target=pool.shutdown)
    closer.start()
    for _ in range(int(_WAIT_S / 0.01)):
        if futures[2].cancelled:
            break
        threading.Event().wait(0.01)
    gate.set()
    closer.join(_WAIT_S)
    assert ran == [0]  # the running item finished, the queued ones were cancelled
    assert futures[0].result() == 0
    assert futures[1].cancelled and futures[2].cancelled
    with pytest.raises(PoolStopped):
        futures[1].result()
    with pytest.raises(PoolStopped, match="t-shutdown"):
        pool.submit(3)
    assert not _pool_threads("t-shutdown")


def test_an_abandoned_pool_stops_its_threads_when_collected() -> None:
    pool = ThreadPool[int, int](abs, 3, "t-gc")
    assert list(pool.map([-1, -2])) == [1, 2]
    assert len(_pool_threads("t-gc")) == 3
    del pool
    gc.collect()
    assert not _pool_threads("t-gc")


def test_ctrl_c_while_submitting_leaves_no_threads() -> None:
    def items() -> Iterator[int]:
        yield from range(5)
        raise KeyboardInterrupt  # what Ctrl-C raises in the main thread

    with pytest.raises(KeyboardInterrupt), ThreadPool[int, int](abs, 2, "t-ctrlc") as pool:
        list(pool.map(items(), window=3))
    assert not _pool_threads("t-ctrlc")


def test_a_pool_of_calls_runs_different_functions() -> None:
    with ThreadPool[Callable[[], object], object](call, 2, "t-call") as pool:
        assert list(pool.map([lambda: "a", lambda: 2])) == ["a", 2]


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        ThreadPool[int, int](abs, 0, "t-zero")
    with (
        ThreadPool[int, int](abs, 1, "t-window") as pool,
        pytest.raises(ValueError, match="window"),
    ):
        list(ordered_map(pool, [1], 0))


def test_the_single_thread_executor_names_its_thread() -> None:
    executor = single_thread_executor("t-sync")
    try:
        assert executor.submit(lambda: threading.current_thread().name).result().startswith(
            "t-sync"
        )
    finally:
        executor.shutdown()
