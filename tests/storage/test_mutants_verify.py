"""Tests written for mutants of ``mrecord/storage/verify_ahead.py`` and
``mrecord/storage/verified.py`` that survived their tests (docs/RELIABILITY.md, "Mutation
testing").

The background checker is driven directly: a ``(pages, columns)`` record, a ``check``
that records what it was asked and fails on the chunks named damaged, and the readers'
cold checks made by hand (a reader marks its chunk verified, then tells the checker).
Which chunks the thread checks, in which order and how many, is then exact.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mrecord.storage import verified as verified_mod
from mrecord.storage.verified import (
    HeadCache,
    clear_verified,
    shared_heads,
    shared_verified,
)
from mrecord.storage.verify_ahead import LEAD, SLACK, START_AFTER, VerifyAhead


class Checker:
    """``check(page, col)``: records the call; False for ``damaged`` chunks. With
    ``hold``, the first call waits until ``release`` is set (the test acts meanwhile)."""

    def __init__(
        self, damaged: frozenset[tuple[int, int]] = frozenset(), hold: bool = False
    ) -> None:
        self.damaged = set(damaged)
        self.calls: list[tuple[int, int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, page: int, col: int) -> bool:
        self.entered.set()
        assert self.release.wait(30)
        self.calls.append((page, col))
        return (page, col) not in self.damaged


def _cold(ahead: VerifyAhead, record: np.ndarray, chunks: list[tuple[int, int]]) -> None:
    """Readers check ``chunks`` themselves, one after another."""
    for page, col in chunks:
        record[page, col] = True
        ahead.note_cold_check(page, col)


def _start(pages: int, cols: int = 1, **checker: Any) -> tuple[VerifyAhead, np.ndarray, Checker]:
    record = np.zeros((pages, cols), dtype=bool)
    check = Checker(**checker)
    return VerifyAhead(record, check), record, check


def test_the_thread_starts_at_the_16th_cold_check_and_works_from_the_page_after() -> None:
    """After 16 cold checks (pages 0..15) the thread checks pages 16, 17, ... in order, as
    many as its budget (2 per cold check + 64 = 96), then waits for the readers and ends."""
    ahead, record, check = _start(1000)
    _cold(ahead, record, [(p, 0) for p in range(START_AFTER - 1)])
    assert ahead.join(timeout=30) and check.calls == []  # 15: no thread yet
    _cold(ahead, record, [(START_AFTER - 1, 0)])
    assert ahead.join(timeout=30)  # the thread ends after 1 s without reader progress
    budget = LEAD * START_AFTER + SLACK
    assert budget == 96
    assert check.calls == [(p, 0) for p in range(START_AFTER, START_AFTER + budget)]
    assert record[: START_AFTER + budget, 0].all() and not record[START_AFTER + budget :].any()


def test_it_checks_only_the_columns_read_and_ends_when_all_are_verified() -> None:
    """Pages 30..45 of column 1 read cold, of a 50-page file: the thread checks column 1
    of pages 46..49, then wraps to 0..29, and ends once every page is verified."""
    ahead, record, check = _start(50, cols=3)
    _cold(ahead, record, [(p, 1) for p in range(30, 46)])
    assert ahead.join(timeout=30)
    assert check.calls == [(p, 1) for p in [*range(46, 50), *range(30)]]
    assert record[:, 1].all() and not record[:, [0, 2]].any()


def test_a_reader_ending_on_the_last_page_gets_the_file_checked_from_its_start() -> None:
    """A reader going backwards (or reading a file's tail) whose last cold check was the
    last page: the thread starts over at page 0."""
    ahead, record, check = _start(200)
    _cold(ahead, record, [(p, 0) for p in range(199, 199 - START_AFTER, -1)][::-1])
    assert ahead.join(timeout=30)
    assert check.calls[:5] == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]
    assert len(check.calls) == LEAD * START_AFTER + SLACK


def test_a_damaged_chunk_is_checked_once_left_unverified_and_passed() -> None:
    """Damaged chunks stay unverified (the reader that reaches one raises), and the
    thread goes on past them, once round the file, instead of checking them again."""
    ahead, record, check = _start(100, damaged=frozenset({(16, 0), (20, 0)}))
    _cold(ahead, record, [(p, 0) for p in range(START_AFTER)])
    assert ahead.join(timeout=30)
    assert check.calls == [(p, 0) for p in range(START_AFTER, 100)]
    assert not record[[16, 20], 0].any() and record[:, 0].sum() == 98


def _both(pages: range) -> list[tuple[int, int]]:
    return [(p, c) for p in pages for c in (0, 1)]


def test_a_reader_of_two_columns_gets_every_chunk_of_both_checked() -> None:
    """Column 0 read cold on pages 10..24, then column 1 on page 5: the thread starts at
    page 6 and goes round the whole file, ending with column 0 of page 5."""
    ahead, record, check = _start(30, cols=2)
    _cold(ahead, record, [*((p, 0) for p in range(10, 25)), (5, 1)])
    assert ahead.join(timeout=30)
    assert check.calls == [
        *_both(range(6, 10)), *((p, 1) for p in range(10, 25)), *_both(range(25, 30)),
        *_both(range(5)), (5, 0),
    ]
    assert record.all()


def test_after_a_jump_it_also_goes_round_the_whole_file() -> None:
    """The thread is at page 26 (column 0) when a reader checks column 1 of page 5 cold:
    from page 6 it goes round the file once more, ending with column 0 of page 5."""
    ahead, record, check = _start(30, cols=2, hold=True)
    _cold(ahead, record, [(p, 0) for p in range(10, 26)])
    assert check.entered.wait(30)  # checking (26, 0)
    _cold(ahead, record, [(5, 1)])
    check.release.set()
    assert ahead.join(timeout=30)
    assert check.calls == [
        (26, 0), *_both(range(6, 10)), *((p, 1) for p in range(10, 26)), (26, 1),
        *_both(range(27, 30)), *_both(range(5)), (5, 0),
    ]
    assert record.all()


def test_a_cold_check_while_it_runs_moves_it_after_that_page() -> None:
    """A reader that checks page 500 cold while the thread is at page 16: the thread
    finishes page 16, then works from page 501 on (budget: 2 * 17 + 64 = 98 chunks)."""
    ahead, record, check = _start(1000, hold=True)
    _cold(ahead, record, [(p, 0) for p in range(START_AFTER)])
    assert check.entered.wait(30)  # the thread is checking page 16
    threads = [t for t in threading.enumerate() if t.name == "mrecord-verify-ahead"]
    _cold(ahead, record, [(500, 0)])
    assert [t for t in threading.enumerate() if t.name == "mrecord-verify-ahead"] == threads
    check.release.set()
    assert ahead.join(timeout=30)
    assert check.calls == [(16, 0), *((p, 0) for p in range(501, 501 + 97))]


def test_nothing_starts_when_the_columns_read_are_all_verified() -> None:
    ahead, record, check = _start(40, cols=2)
    record[:, 0] = True
    _cold(ahead, record, [(p, 0) for p in range(START_AFTER)])
    assert ahead.join(timeout=30) and check.calls == []
    assert not [t for t in threading.enumerate() if t.name == "mrecord-verify-ahead"]


def test_join_waits_for_the_thread_stop_waits_for_its_chunk_and_it_is_a_daemon() -> None:
    """``join`` is True only once no thread runs (also before any started); the thread
    does not keep the interpreter alive; ``stop`` returns after the chunk being checked."""
    ahead, record, check = _start(1000, hold=True)
    assert ahead.join() is True and ahead.join(timeout=0) is True
    _cold(ahead, record, [(p, 0) for p in range(START_AFTER)])
    assert check.entered.wait(30)
    [thread] = [t for t in threading.enumerate() if t.name == "mrecord-verify-ahead"]
    assert thread.daemon
    assert ahead.join(timeout=0.05) is False  # it is held inside check()
    releaser = threading.Timer(0.2, check.release.set)
    releaser.start()
    ahead.stop()
    assert not thread.is_alive() and check.calls == [(16, 0)]
    releaser.join()
    _cold(ahead, record, [(600, 0)])  # stopped for good: no new thread
    assert ahead.join(timeout=30) and check.calls == [(16, 0)]


# -- verified.py ------------------------------------------------------------------------


@pytest.fixture()
def _clean() -> Iterator[None]:
    clear_verified()
    yield
    clear_verified()


class Head:
    def __init__(self, n: int) -> None:
        self.offsets = list(range(n))


KEY = (1, 2, 3, 4, 5)


def test_records_are_shared_per_key_bounded_least_recently_opened_first(
    monkeypatch: pytest.MonkeyPatch, _clean: None
) -> None:
    monkeypatch.setattr(verified_mod, "_MAX_RECORDS", 3)
    keys = [(1, 1, 1, 1, k) for k in range(4)]
    first = [shared_verified(k, (2, 3)) for k in keys[:3]]
    for record in first:
        assert record.shape == (2, 3) and record.dtype == np.bool_ and not record.any()
    assert all(shared_verified(k, (2, 3)) is r for k, r in zip(keys[:3], first, strict=True))
    assert shared_verified(keys[0], (2, 3)) is first[0]  # keys[1] is now the oldest
    newest = shared_verified(keys[3], (2, 3))
    assert shared_verified(keys[3], (2, 3)) is newest
    assert shared_verified(keys[0], (2, 3)) is first[0]
    assert shared_verified(keys[2], (2, 3)) is first[2]
    assert shared_verified(keys[1], (2, 3)) is not first[1]  # dropped: a fresh record


def test_bytes_that_are_not_a_local_file_get_private_records_and_heads(_clean: None) -> None:
    a, b = shared_verified(None, (4, 2)), shared_verified(None, (4, 2))
    assert a is not b and a.shape == (4, 2) and a.dtype == np.bool_ and not a.any()
    one, two = shared_heads(None), shared_heads(None)
    one.put((0, 0), Head(3))
    assert two.get((0, 0)) is None and one.get((0, 0)) is not None
    shared = shared_heads(KEY)
    assert shared.get((0, 0)) is None


def test_heads_are_bounded_by_their_offsets_the_oldest_dropped_first(
    monkeypatch: pytest.MonkeyPatch, _clean: None
) -> None:
    """A budget of 10 offsets: two heads of 5 fit exactly; a third drops the oldest; a
    head stored again replaces its old self; one head larger than the budget stays alone."""
    monkeypatch.setattr(verified_mod, "_shared_store", verified_mod._HeadStore(10))
    for cache in (HeadCache(KEY), _private(monkeypatch, 10)):
        a, b, c = Head(5), Head(5), Head(5)
        cache.put((0, 0), a)
        cache.put((1, 0), b)
        assert cache.get((0, 0)) is a and cache.get((1, 0)) is b
        cache.put((2, 0), c)
        assert cache.get((0, 0)) is None and cache.get((1, 0)) is b
        b2 = Head(5)
        cache.put((1, 0), b2)  # replaces b: still 10 offsets, c stays
        assert cache.get((1, 0)) is b2 and cache.get((2, 0)) is c
        big = Head(25)
        cache.put((3, 0), big)
        assert cache.get((3, 0)) is big
        assert [cache.get((p, 0)) for p in range(3)] == [None, None, None]
    clear_verified()  # the shared store is empty and its count back at 0
    shared = HeadCache(KEY)
    d, e = Head(5), Head(5)
    shared.put((0, 1), d)
    shared.put((1, 1), e)
    assert shared.get((0, 1)) is d and shared.get((1, 1)) is e


def _private(monkeypatch: pytest.MonkeyPatch, budget: int) -> HeadCache:
    monkeypatch.setattr(verified_mod, "_HEAD_BUDGET", budget)
    return HeadCache(None)


def test_a_child_forked_while_the_locks_are_held_can_use_the_records(_clean: None) -> None:
    """DataLoader workers fork whenever the parent's threads hold these locks; the child
    gets fresh ones and opens records and heads of its own."""
    import time

    with verified_mod._lock, verified_mod._shared_store.lock:
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                record = shared_verified(KEY, (3, 1))
                shared_heads(KEY).put((0, 0), Head(2))
                clear_verified()
                code = 0 if record.shape == (3, 1) else 1
            finally:
                os._exit(code)
    deadline = time.monotonic() + 60  # a hang guard, not a timing check
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on a lock inherited from its parent")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
