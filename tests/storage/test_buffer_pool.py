"""The pool behind cold reads' buffers: memory is reused only once nothing views it."""

from __future__ import annotations

import gc
import mmap
import resource
import threading

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.block import BytesArray
from mrecord.storage import chunk_buffers
from mrecord.storage.buffer_pool import MAPPED_ROUND, SLAB_ROUND, BufferPool


def _span(array: np.ndarray) -> tuple[int, int]:
    start = int(array.ctypes.data)
    return start, start + max(1, array.nbytes)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@given(st.integers(0, 3 * SLAB_ROUND))
def test_a_buffer_is_page_aligned_writable_and_as_long_as_asked(nbytes: int) -> None:
    buffer = BufferPool(keep_bytes=8 * SLAB_ROUND).take(nbytes)
    assert len(buffer) == nbytes and buffer.dtype == np.uint8
    assert buffer.ctypes.data % mmap.PAGESIZE == 0
    buffer[:] = 7
    assert bool((buffer == 7).all())


def test_memory_is_not_reused_while_a_value_views_it() -> None:
    """A consumer still holding one value (a view, as reads hand out) of a block keeps the
    whole block's memory: the next buffer lies elsewhere and the value is intact."""
    pool = BufferPool(keep_bytes=8 * SLAB_ROUND)
    first = pool.take(300_000)
    first[:] = 1
    value = first[100_000:200_000].view(BytesArray)
    del first
    gc.collect()
    second = pool.take(300_000)
    second[:] = 2
    assert not _overlap(_span(value), _span(second))
    assert bool((value == 1).all())


def test_memory_comes_back_once_the_last_view_is_gone() -> None:
    pool = BufferPool(keep_bytes=8 * SLAB_ROUND)
    first = pool.take(300_000)
    address = first.ctypes.data
    value = first[10:20]
    del first
    assert pool.free_bytes == 0  # the value still views it
    del value
    assert pool.free_bytes == SLAB_ROUND
    again = pool.take(200_000)
    assert again.ctypes.data == address  # faulted in already: no new pages
    assert pool.free_bytes == 0


def test_the_free_slabs_kept_stay_within_the_cap() -> None:
    pool = BufferPool(keep_bytes=3 * SLAB_ROUND)
    buffers = [pool.take(SLAB_ROUND) for _ in range(10)]
    del buffers
    assert pool.free_bytes == 3 * SLAB_ROUND


def test_a_small_buffer_does_not_take_a_much_bigger_slab() -> None:
    pool = BufferPool(keep_bytes=64 * SLAB_ROUND)
    big = pool.take(20 * SLAB_ROUND)
    del big
    small = pool.take(1000)
    assert pool.free_bytes == 20 * SLAB_ROUND  # the big slab is still there for a big block
    assert len(small) == 1000


def test_threads_taking_and_dropping_at_once_never_share_live_memory() -> None:
    pool = BufferPool(keep_bytes=16 * SLAB_ROUND)
    live: dict[int, tuple[int, int]] = {}
    lock = threading.Lock()
    clashes: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            buffer = pool.take(int(rng.integers(1, 2 * SLAB_ROUND)))
            span = _span(buffer)
            with lock:
                for other in live.values():
                    if _overlap(span, other):
                        clashes.append(f"{span} overlaps {other}")
                live[id(buffer)] = span
            buffer[:8] = seed
            assert int(buffer[0]) == seed % 256
            with lock:
                del live[id(buffer)]
            del buffer

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clashes == []


def _own_mapping(address: int) -> bool:
    """Whether a mapping of this process starts at ``address`` (not inside a heap)."""
    with open("/proc/self/maps") as maps:
        return any(int(line.split("-", 1)[0], 16) == address for line in maps)


def test_a_mapped_pools_slabs_are_mappings_of_their_own_and_come_back() -> None:
    """Chunk pieces (``chunk_buffers``): a slab is an anonymous mapping (never glibc's heap,
    where freed pieces stayed in the thread arenas), rounded to 64 KiB, reused, already
    faulted in, once nothing views it."""
    pool = BufferPool(keep_bytes=8 * SLAB_ROUND, mapped=True)
    first = pool.take(1_100_000)
    address = first.ctypes.data
    assert address % mmap.PAGESIZE == 0 and _own_mapping(address)
    value = first[10:20]
    del first
    assert pool.free_bytes == 0  # the value still views it
    del value
    assert pool.free_bytes == 17 * MAPPED_ROUND  # 1,100,000 bytes in 64 KiB units
    again = pool.take(1_050_000)
    assert again.ctypes.data == address


def test_chunk_pieces_reuse_the_memory_of_pieces_let_go() -> None:
    """A piece read into memory faulted in before (the zero-filling and the memory group's
    charge of fresh pages were a quarter of a BLOCK epoch's CPU, perf)."""
    piece = chunk_buffers._mapped(1_000_000)
    piece[:] = 1  # as a read into it does
    del piece
    gc.collect()
    again = chunk_buffers._mapped(1_000_000)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    again[:] = 2
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
    assert faults < 10, faults  # a fresh mapping faults once per page: ~245 here


def test_a_buffer_let_go_while_the_pool_is_busy_does_not_hang_it() -> None:
    """The garbage collector frees a lease caught in a reference cycle in whatever thread
    it runs, also one inside the pool's own code with the pool's lock held (a suite run
    hung so, in ``take``). Here the same thread holds the lock while the last view of a
    buffer goes: the slab still comes back, and the pool still works."""
    pool = BufferPool(keep_bytes=8 * SLAB_ROUND)
    buffer = pool.take(SLAB_ROUND)
    address = int(buffer.ctypes.data)
    done = threading.Event()

    def let_go() -> None:
        nonlocal buffer
        with pool._lock:
            del buffer  # its lease dies here: the pool takes the slab back
        again = pool.take(SLAB_ROUND)
        assert int(again.ctypes.data) == address
        done.set()

    thread = threading.Thread(target=let_go, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert done.is_set(), "the pool hung: a slab given back while its lock was held"
