"""The one thread pool: bounded, ordered, stoppable. Every worker and read-ahead uses it.

- :class:`ThreadPool` runs one function over submitted items in ``num_workers``
  daemon threads and hands back a :class:`Future` per item. A worker never raises:
  the exception goes into the item's future and the consumer re-raises the same
  object, so its traceback still shows the worker's frames (with a note naming the
  thread on Python >= 3.11).
- :func:`ordered_map` keeps at most ``window`` items in flight and yields results
  in submission order, so the order of results never depends on worker timing.
  Once the ``stop`` event is set it submits nothing more and raises
  :class:`PoolStopped`; whenever it ends early (stop, an exception, the consumer
  closing the generator, Ctrl-C) it cancels the futures still pending, so their
  items are never run.
- :meth:`ThreadPool.shutdown` (also ``with``-exit, and garbage collection of a pool
  nobody shut down) cancels what is queued, lets each worker finish the item it is
  running and joins the threads.

Users: the pipeline's workers (``ctx.pool``: map, batch, filter, offload, the
read-ahead of ``MindDataset`` and the other random-access sources, ``GeneratorDataset``,
the reader service's client source), the converters (PNG encoding, image checks),
the Ray datasink's publish step. ``mrecord.pipeline.engine.workers.ProcessPool`` (worker
processes for Python-heavy maps) hands out the same :class:`Future` and runs through
the same :func:`ordered_map`.

:func:`single_thread_executor` is the exception, on purpose: a dedicated
``concurrent.futures`` executor with one thread for side work whose caller waits on
each result itself and whose work must never be cancelled (the writer's background
``fdatasync``), held once per process by :func:`process_thread`. It is made here so
that every thread mrecord starts is made in this module.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from mrecord.errors import ArgumentError

__all__ = [
    "Future",
    "PoolStopped",
    "Submitter",
    "ThreadPool",
    "call",
    "ordered_map",
    "process_thread",
    "single_thread_executor",
]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
R = TypeVar("R")

_POLL_S = 0.05  # how often a waiting consumer looks at the stop event
_JOIN_S = 5.0  # how long shutdown waits for a worker still running an item
_NEVER = threading.Event()  # the stop event of callers that pass none (never set)


class PoolStopped(Exception):
    """Raised to the consumer once stop was requested (or for a cancelled future).

    The pipeline's ``PipelineStopped`` is this class.
    """


class Future(Generic[R]):
    """The result (or exception) of one submitted item.

    ``resolve`` (used by process pools) is called by :meth:`result` to fetch the
    result when it is not there yet.
    """

    def __init__(self, resolve: Callable[[threading.Event], None] | None = None) -> None:
        self._done = threading.Event()
        self._value: R | None = None
        self._exc: BaseException | None = None
        self._cancelled = False
        self._resolve = resolve

    def set_result(self, value: R) -> None:
        """Store the result."""
        self._value = value
        self._done.set()

    def set_exception(self, exc: BaseException) -> None:
        """Store the exception the consumer will re-raise."""
        self._exc = exc
        self._done.set()

    def cancel(self) -> bool:
        """Mark the item as not wanted: a worker that has not started it skips it.
        Returns False when the result was already there."""
        if self._done.is_set():
            return False
        self._cancelled = True
        return True

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called before the result came."""
        return self._cancelled

    def done(self) -> bool:
        """Whether the result (or exception) is there."""
        return self._done.is_set()

    def result(self, stop: threading.Event | None = None) -> R:
        """Wait for the result; raise the worker's exception, or :class:`PoolStopped`
        once ``stop`` is set or when the future was cancelled."""
        stop = _NEVER if stop is None else stop
        if self._resolve is not None and not self._done.is_set():
            self._resolve(stop)
        while not self._done.wait(_POLL_S):
            if stop.is_set() or self._cancelled:
                raise PoolStopped
        if self._exc is not None:
            raise self._exc
        return self._value  # type: ignore[return-value]


_Task = tuple[Any, Future[Any]] | None


def _work(tasks: queue.SimpleQueue[_Task], fn: Callable[[Any], Any]) -> None:
    """A worker thread's loop (a function, not a method: the threads must not keep
    the pool alive, so an abandoned pool is collected and its finalizer stops them)."""
    while True:
        task = tasks.get()
        if task is None:
            return
        item, future = task
        if future.cancelled:
            continue
        try:
            future.set_result(fn(item))
        except BaseException as exc:  # handed to the consumer
            add_note = getattr(exc, "add_note", None)  # Python >= 3.11
            if callable(add_note):
                add_note(f"(raised in worker thread {threading.current_thread().name!r})")
            future.set_exception(exc)
        del task, item, future  # do not hold the last item while waiting for the next


def _stop_workers(tasks: queue.SimpleQueue[_Task], threads: list[threading.Thread]) -> None:
    """Cancel what is queued, tell every worker to end, join them."""
    while True:
        try:
            task = tasks.get_nowait()
        except queue.Empty:
            break
        if task is not None:
            task[1].cancel()
    for _ in threads:
        tasks.put(None)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(_JOIN_S)


class ThreadPool(Generic[T, R]):
    """``num_workers`` daemon threads applying ``fn`` to submitted items (see the module
    docstring). Use it with ``with``, or call :meth:`shutdown`."""

    def __init__(self, fn: Callable[[T], R], num_workers: int, name: str) -> None:
        if num_workers < 1:
            raise ArgumentError(f"{name}: num_workers must be >= 1, got {num_workers!r}")
        self.name = name
        self.num_workers = num_workers
        self._tasks: queue.SimpleQueue[_Task] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=_work, args=(self._tasks, fn), name=f"{name}-{i}", daemon=True)
            for i in range(num_workers)
        ]
        self._closed = False
        for thread in self._threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _stop_workers, self._tasks, self._threads)

    def submit(self, item: T) -> Future[R]:
        """Queue ``item``; its future resolves when a worker is done with it."""
        if self._closed:
            raise PoolStopped(f"thread pool {self.name!r} was shut down")
        future: Future[R] = Future()
        self._tasks.put((item, future))
        return future

    def map(
        self, items: Iterable[T], *, window: int | None = None, stop: threading.Event | None = None
    ) -> Iterator[R]:
        """The results for ``items`` in order, at most ``window`` (default twice the
        workers) in flight; see :func:`ordered_map`."""
        size = 2 * self.num_workers if window is None else window
        for _item, result in ordered_map(self, items, size, stop):
            yield result

    def shutdown(self) -> None:
        """Cancel queued items, let each worker finish its current one, join them
        (idempotent)."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> ThreadPool[T, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


class Submitter(Protocol[T_contra]):
    """Anything with ``submit(item) -> Future``."""

    def submit(self, item: T_contra) -> Future[Any]:
        """Start work on ``item``."""
        ...


def ordered_map(
    pool: Submitter[T],
    items: Iterable[T],
    window: int | Callable[[], int],
    stop: threading.Event | None = None,
) -> Iterator[tuple[T, Any]]:
    """Run ``items`` through ``pool`` with at most ``window`` in flight; yield
    ``(item, result)`` in submission order. A worker's exception is raised here;
    :class:`PoolStopped` once ``stop`` is set. Pending futures are cancelled when
    this ends early. ``window`` may be a function, asked before each submission (a
    map narrows its window once it sees how big its results are)."""
    width = window if callable(window) else (lambda: window)
    if width() < 1:
        raise ArgumentError(f"window must be >= 1, got {width()!r}")
    stop = _NEVER if stop is None else stop
    pending: deque[tuple[T, Future[Any]]] = deque()
    try:
        for item in items:
            if stop.is_set():
                raise PoolStopped
            pending.append((item, pool.submit(item)))
            while len(pending) >= max(1, width()):
                done, future = pending.popleft()
                yield done, future.result(stop)
        while pending:
            done, future = pending.popleft()
            yield done, future.result(stop)
    finally:
        for _item, future in pending:
            future.cancel()


def call(thunk: Callable[[], R]) -> R:
    """Run ``thunk``: the function of a pool whose items are calls of different functions
    (``ThreadPool(call, n, name).map(functools.partial(f, x) for x in xs)``)."""
    return thunk()


def single_thread_executor(name: str) -> ThreadPoolExecutor:
    """A dedicated one-thread ``concurrent.futures`` executor named ``name`` (see the
    module docstring: for uncancellable side work such as ``fdatasync``)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)


_PROCESS_THREADS: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_process_threads_lock = threading.Lock()


def process_thread(name: str) -> ThreadPoolExecutor:
    """This process's one-thread executor ``name`` (``mrecord-write``, ``mrecord-fsync``,
    ``mrecord-write-direct``), a :func:`single_thread_executor` made on first use.

    Made again in each process: a child forked (a converter's worker) after its parent
    wrote would otherwise inherit an executor whose thread did not survive the fork, and
    wait for it forever. Work on it is never cancelled: callers wait on it.
    """
    pid = os.getpid()
    with _process_threads_lock:
        held = _PROCESS_THREADS.get(name)
        if held is None or held[0] != pid:
            held = (pid, single_thread_executor(name))
            _PROCESS_THREADS[name] = held
        return held[1]
