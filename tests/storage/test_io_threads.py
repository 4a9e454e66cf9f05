"""``on_io_threads``: the I/O threads' one way of running many small reads at once."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.storage import readahead
from mrecord.storage.readahead import IO_THREADS, io_pool, on_io_threads


@given(st.lists(st.integers(), max_size=200))
def test_every_item_is_worked_on_exactly_once(items: list[int]) -> None:
    seen: Counter[int] = Counter()
    lock = threading.Lock()

    def work(index: int) -> bool:
        with lock:
            seen[index] += 1
        return True

    assert on_io_threads(list(range(len(items))), work) is True
    assert seen == Counter(range(len(items)))


def test_reads_run_at_once_on_several_threads() -> None:
    """A queue of reads keeps many in flight (the device's queue depth), not one."""
    barrier = threading.Barrier(4, timeout=30)
    names: set[str] = set()

    def work(_: int) -> bool:
        names.add(threading.current_thread().name)
        barrier.wait()  # only returns once four reads are in flight together
        return True

    assert on_io_threads(list(range(8)), work) is True
    assert len(names) >= 4


def test_a_false_read_makes_the_whole_false_and_stops_taking_items() -> None:
    taken: list[int] = []
    lock = threading.Lock()

    def work(index: int) -> bool:
        with lock:
            taken.append(index)
        return index != 3

    assert on_io_threads(list(range(10_000)), work) is False
    assert 3 in taken
    assert len(taken) < 10_000  # the rest was not read for nothing


def test_an_error_reaches_the_caller_once_every_task_has_ended() -> None:
    running = 0
    lock = threading.Lock()
    ended_with_error: list[int] = []

    def work(index: int) -> bool:
        nonlocal running
        with lock:
            running += 1
        try:
            if index == 5:
                raise OSError(5, "Input/output error")
            return True
        finally:
            with lock:
                running -= 1

    with pytest.raises(OSError, match="Input/output"):
        try:
            on_io_threads(list(range(100)), work)
        finally:
            ended_with_error.append(running)
    assert ended_with_error == [0]  # no task still writing the caller's buffers


def test_a_call_from_every_io_thread_at_once_does_not_deadlock() -> None:
    """Each I/O thread calling on_io_threads while all the pool's threads are busy: the
    callers do the work themselves and their queued helpers are cancelled."""
    if IO_THREADS <= 1:
        pytest.skip("one I/O thread: nothing runs on the pool")
    all_busy = threading.Barrier(IO_THREADS, timeout=30)

    def outer(_: int) -> bool:
        all_busy.wait()  # every pool thread is now inside an outer call
        return on_io_threads(list(range(50)), lambda item: item >= 0)

    futures = [io_pool().submit(outer, i) for i in range(IO_THREADS)]
    assert all(future.result(timeout=60) for future in futures)


def test_one_io_thread_works_in_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readahead, "IO_THREADS", 1)
    names: set[str] = set()

    def work(_: int) -> bool:
        names.add(threading.current_thread().name)
        return True

    assert on_io_threads(list(range(20)), work) is True
    assert names == {threading.current_thread().name}
