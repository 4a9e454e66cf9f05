"""BufferPool: a buffer is handed out again only once nothing views it, never while in use."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.serve.buffers import BufferPool

MiB = 1 << 20


def _pooled(pool: BufferPool, arr: np.ndarray) -> bool:
    return any(np.shares_memory(arr, buf) for buf in pool._buffers)


def test_a_buffer_comes_back_once_every_view_of_it_is_gone() -> None:
    pool = BufferPool(keep=4)
    first = pool.take(3 * MiB)
    views = [first.data[10:20], first[5:9], np.frombuffer(first.data, np.uint8)]
    del first
    for view in views:  # any one kind of view keeps the buffer in use
        again = pool.take(MiB)
        assert not np.shares_memory(again, np.asarray(view))
        del again
        views = [v for v in views if v is not view]
        del view
    reused = pool.take(MiB)
    assert len(pool._buffers) == 2  # the first one, and the one taken while it was in use
    assert _pooled(pool, reused)


def test_the_pool_keeps_at_most_keep_buffers_and_prefers_bigger_ones() -> None:
    pool = BufferPool(keep=2)
    held = [pool.take(MiB) for _ in range(3)]  # the third is not pooled
    assert len(pool._buffers) == 2 and not _pooled(pool, held[2])
    del held
    big = pool.take(5 * MiB)  # both pooled ones are free but too small: one is replaced
    assert len(pool._buffers) == 2 and _pooled(pool, big)
    assert sorted(b.size for b in pool._buffers) == [MiB, 5 * MiB]


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 3 * MiB)), max_size=40))
def test_no_two_live_buffers_overlap(ops: list[tuple[bool, int]]) -> None:
    """Model: the arrays the caller still holds; taking never returns memory one of them uses."""
    pool = BufferPool(keep=3)
    live: list[np.ndarray] = []
    for take, size in ops:
        if take or not live:
            arr = pool.take(size)
            assert arr.size == size and arr.dtype == np.uint8
            assert not any(np.shares_memory(arr, other) for other in live)
            live.append(arr)
        else:
            live.pop(size % len(live))


def test_threads_never_share_a_buffer() -> None:
    pool = BufferPool(keep=3)
    errors: list[str] = []

    def work(mark: int) -> None:
        for _ in range(50):
            buf = pool.take(MiB)
            buf[:] = mark
            for _ in range(3):  # give the other threads time to take buffers meanwhile
                threading.Event().wait(0.0001)
            if not (buf == mark).all():
                errors.append(f"thread {mark} saw its buffer overwritten")

    threads = [threading.Thread(target=work, args=(m,)) for m in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_keep_at_least_only_grows_the_pool() -> None:
    pool = BufferPool(keep=0)
    assert not _pooled(pool, pool.take(MiB))  # keeps nothing: every buffer is fresh
    pool.keep_at_least(2)
    pool.keep_at_least(1)
    held = [pool.take(MiB) for _ in range(3)]
    assert len(pool._buffers) == 2 and [_pooled(pool, h) for h in held] == [True, True, False]


def test_forget_drops_every_buffer_and_frees_the_lock() -> None:
    pool = BufferPool(keep=2)
    kept = pool.take(MiB)
    pool._lock.acquire()  # as if a thread of the parent held it when the process forked
    pool.forget()
    fresh = pool.take(MiB)  # would deadlock with the old lock
    assert not np.shares_memory(fresh, kept) and len(pool._buffers) == 1
