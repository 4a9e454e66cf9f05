"""A source's per-row work in worker processes, its batches handed back in order.

A source whose rows can be produced independently (read and check an image file,
resize it, encode a PNG) describes that work as a :class:`BatchPlan`: how many
batches there are, the small picklable *pieces* each batch is cut into, the
function that turns a piece into a result (run in a worker), and the function that
turns a batch's results, in order, back into the batch (run in the parent, where the
source's bookkeeping such as the list of bad files lives).

:func:`run_plan` works on ``workers`` pieces at once with
:func:`mrecord.pool.ordered_map`, so at most ``window`` pieces are in flight and results
come back in submission order. Where the work spends its time in C code that releases
Python's GIL (``releases_gil=True``: Pillow's JPEG decoder, which the image check runs)
the workers are threads of this process: they use every core and nothing is pickled.
Other work runs in ``workers`` processes: Pillow's encoders (``--resize``,
``--reencode``, PNG) hold the GIL, and there threads do not scale (docs/CONVERT.md has
the measurements). ``workers == 1`` is a serial run: one piece at a time, in the
thread that iterates (:func:`_inline`; a source may still overlap its own file reads
through ``prepare``, as ``imagefolder`` does).

Worker processes are started with ``forkserver`` (never ``fork``: the parent runs
threads, and a forked copy of a lock held by one of them would deadlock the child).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mrecord.convert.base import Batch
from mrecord.pool import Future, ThreadPool, ordered_map

if TYPE_CHECKING:
    from concurrent.futures import Future as ConcurrentFuture

__all__ = ["WORKER_BYTES", "BatchPlan", "default_workers", "run_plan"]

WORKER_BYTES = 64 << 20
"""What one worker of a conversion is given of the memory budget where the caller gives
no worker count (:func:`default_workers`): a worker process's own memory (~22 MB of
private pages measured, with PIL) and the pieces it holds (four in flight, images
decoded and resized). Two worker processes resizing JPEGs in a 120 MB memory group were
OOM-killed; one finished in 14 s."""


def default_workers() -> int:
    """Workers where the caller gives none: one per core, fewer where the process's
    memory budget (``mrecord.storage.probe.memory_budget``) holds fewer than that many
    :data:`WORKER_BYTES`; at least one. The output does not depend on it."""
    from mrecord.storage.probe import memory_budget  # asked once a conversion

    cores = os.cpu_count() or 1
    budget = memory_budget()
    if budget is None:
        return cores
    return max(1, min(cores, budget // WORKER_BYTES))

P = TypeVar("P")
R = TypeVar("R")

_Item = tuple[int, int, int, Any]  # (batch index, piece index, pieces in the batch, piece)


@dataclass(frozen=True)
class BatchPlan(Generic[P, R]):
    """A source's work cut into independent pieces (see the module docstring).

    ``pieces(b)`` lists batch ``b``'s pieces (picklable, cheap to send); ``work`` is a
    picklable callable (a module-level function or a ``functools.partial`` of one)
    run in the workers; ``collect(b, results)`` builds batch ``b`` from its pieces'
    results in the parent and may return None (nothing to write); ``finish()`` runs in
    the parent after the last batch (e.g. raises for bad input found on the way).
    ``releases_gil``: ``work`` spends its time in C code that releases the GIL, so
    threads of this process scale across cores (see the module docstring).
    ``prepare(piece)``, if given, runs in the parent as the piece is handed out, up to
    the window ahead of its work (``imagefolder``: ask the kernel to start reading the
    piece's files, so a worker's reads find them in memory). ``max_workers``: more
    workers than this only slow the work down (measured); a larger ``workers`` is
    lowered to it.
    """

    num_batches: int
    pieces: Callable[[int], list[P]]
    work: Callable[[P], R]
    collect: Callable[[int, list[R]], Batch | None]
    finish: Callable[[], None]
    releases_gil: bool = False
    prepare: Callable[[P], None] | None = None
    max_workers: int | None = None


_WATCH_S = 0.5  # how often a worker checks that the converting process is still alive


def _alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a killed one that is not yet reaped is not)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid went to someone else
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc here: os.kill is all there is
        return True
    return state not in (b"Z", b"X")


def _watch_parent(pid: int) -> None:
    """Run in each worker: exit once the converting process ``pid`` is gone.

    A killed conversion must not leave its workers behind. Their parent is the fork
    server, which stays alive as long as any worker does, so each worker watches the
    converting process itself."""

    def watch() -> None:
        while _alive(pid):
            time.sleep(_WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, name="mrecord-convert-watch", daemon=True).start()


class _Processes:
    """``submit(item) -> mrecord.pool.Future`` over a process pool (for ``ordered_map``)."""

    def __init__(self, work: Callable[[Any], Any], workers: int) -> None:
        # Imported here: a conversion on one worker (an image folder's default structure
        # check) never starts a process, and these imports are ~30 ms of a cold start-up.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._work = work
        context = multiprocessing.get_context("forkserver")
        self._executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_watch_parent,
            initargs=(os.getpid(),),
        )

    def submit(self, item: _Item) -> Future[Any]:
        future: Future[Any] = Future()
        if item[2] == 0:  # a batch without pieces: nothing to run
            future.set_result(None)
            return future

        def done(cf: ConcurrentFuture[Any]) -> None:
            if cf.cancelled():
                future.cancel()
                return
            exc = cf.exception()
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(cf.result())

        self._executor.submit(self._work, item[3]).add_done_callback(done)
        return future

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _pieces(plan: BatchPlan[Any, Any], start: int) -> Iterator[_Item]:
    for b in range(start, plan.num_batches):
        pieces = plan.pieces(b)
        if not pieces:
            yield (b, 0, 0, None)
        for j, piece in enumerate(pieces):
            if plan.prepare is not None:
                plan.prepare(piece)
            yield (b, j, len(pieces), piece)


def run_plan(
    plan: BatchPlan[Any, Any], *, workers: int, start: int = 0, window: int | None = None
) -> Iterator[tuple[int, Batch | None]]:
    """Yield ``(b, batch)`` for batches ``start`` .. ``num_batches - 1`` in order, then run
    ``plan.finish()``. ``workers``: pieces worked on at once (threads or processes, see
    the module docstring); ``window``: pieces in flight (default four per worker)."""
    if plan.max_workers is not None:
        workers = min(workers, plan.max_workers)
    size = window or 4 * workers
    if workers == 1:
        yield from _collected(plan, _inline(plan, start, size))
        plan.finish()
        return
    if workers > 1 and not plan.releases_gil:
        pool: Any = _Processes(plan.work, workers)
        shutdown = pool.shutdown
    else:

        def run_item(item: _Item) -> Any:
            return None if item[2] == 0 else plan.work(item[3])

        pool = ThreadPool(run_item, workers, "mrecord-convert")
        shutdown = pool.shutdown
    try:
        yield from _collected(plan, ordered_map(pool, _pieces(plan, start), size))
    finally:
        shutdown()
    plan.finish()


def _collected(
    plan: BatchPlan[Any, Any], done: Iterator[tuple[_Item, Any]]
) -> Iterator[tuple[int, Batch | None]]:
    """``(b, batch)`` from the pieces' results, in order."""
    results: list[Any] = []
    for (b, j, count, _piece), result in done:
        if count == 0:
            yield b, plan.collect(b, [])
            continue
        results.append(result)
        if j == count - 1:
            batch, results = plan.collect(b, results), []
            yield b, batch


def _inline(plan: BatchPlan[Any, Any], start: int, size: int) -> Iterator[tuple[_Item, Any]]:
    """One worker: each piece's work done in the calling thread, ``size`` pieces prepared
    ahead of it. A thread of its own only handed the GIL back and forth with the caller
    at every system call: a light image check (open, advise, read, close, a few us of
    Python per file) of 200,000 small files took 6.4 s warm with 5.6 s of CPU."""
    items = _pieces(plan, start)  # each piece is prepared as it is taken from here
    ahead = collections.deque(itertools.islice(items, size))
    while ahead:
        item = ahead.popleft()
        ahead.extend(itertools.islice(items, 1))
        yield item, None if item[2] == 0 else plan.work(item[3])
