"""Worker processes for Python-heavy map functions (threads are :mod:`mrecord.pool`).

:class:`ProcessPool` hands back the pool module's :class:`~mrecord.pool.Future` per
task, so the pipeline drives it with the same :func:`~mrecord.pool.ordered_map`
(bounded window, submission order, stop honoured) as its thread pools. A worker
never raises: the exception (and its formatted traceback) comes back through the
pipe and the consumer re-raises it. ``shutdown`` stops the workers, kills
stragglers and unlinks every shared-memory segment the pool or its workers made.

Process transport: every column of a task or result goes through
``multiprocessing.shared_memory`` (arrays raw, anything else pickled), so the pipes
only carry small descriptors. Segment names are fixed by the parent
(``mrq<pid>_<pool>_<task>_<i|o><k>``), so the parent can unlink all of them, even
those of a worker that died mid-task.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import pickle
import signal
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from mrecord.errors import PipelineError
from mrecord.pipeline.engine.context import PipelineStopped
from mrecord.pool import Future

__all__ = ["ProcessPool"]

_POLL_S = 0.05
_JOIN_S = 5.0
_pool_ids = itertools.count()


# ----------------------------------------------------------------------------- processes

Descriptor = tuple[str, str, str, tuple[int, ...]]  # (kind, segment name, dtype, shape)


def _buf(shm: SharedMemory) -> memoryview:
    buf = shm.buf
    if buf is None:  # pragma: no cover - only after close()
        raise PipelineError(f"shared memory segment {shm.name!r} is closed")
    return buf


def _put(value: Any, name: str) -> Descriptor:
    """Copy one column into a new segment called ``name``."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        arr = np.ascontiguousarray(value)
        shm = SharedMemory(name=name, create=True, size=max(1, arr.nbytes))
        try:
            np.ndarray(arr.shape, arr.dtype, buffer=_buf(shm))[...] = arr
        finally:
            shm.close()
        return ("nd", name, arr.dtype.str, tuple(arr.shape))
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    shm = SharedMemory(name=name, create=True, size=max(1, len(data)))
    try:
        _buf(shm)[: len(data)] = data
    finally:
        shm.close()
    return ("pk", name, "", (len(data),))


def _get(desc: Descriptor, unlink: bool) -> Any:
    """Copy one column out of its segment (and unlink it when asked)."""
    kind, name, dtype, shape = desc
    shm = SharedMemory(name=name)
    try:
        if kind == "nd":
            value: Any = np.ndarray(shape, np.dtype(dtype), buffer=_buf(shm)).copy()
        else:
            value = pickle.loads(bytes(_buf(shm)[: shape[0]]))
    finally:
        shm.close()
        if unlink:
            shm.unlink()
    return value


def _unlink_quietly(name: str) -> None:
    try:
        shm = SharedMemory(name=name)
    except FileNotFoundError:
        return
    shm.close()
    with contextlib.suppress(FileNotFoundError):
        shm.unlink()


def _process_main(conn: Connection, fn_bytes: bytes) -> None:
    """Worker process loop: receive (task, inputs, extras, out prefix), send results."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    fn = pickle.loads(fn_bytes)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, descs, extras, out_prefix = message
        out_descs: list[Descriptor] = []
        try:
            columns = [_get(d, unlink=False) for d in descs]
            outputs = fn((columns, *extras))
            for k, value in enumerate(outputs):
                out_descs.append(_put(value, f"{out_prefix}{k}"))
            reply: tuple[Any, ...] = ("ok", task_id, out_descs)
        except BaseException as exc:
            for desc in out_descs:
                _unlink_quietly(desc[1])
            text = "".join(traceback.format_exception(exc))
            try:
                blob = pickle.dumps(exc)
            except Exception:
                blob = pickle.dumps(PipelineError(f"{type(exc).__name__}: {exc}"))
            reply = ("err", task_id, blob, text)
        conn.send(reply)


class RemoteTraceback(Exception):
    """The formatted traceback of an exception raised in a worker process."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class ProcessPool:
    """``num_workers`` spawned processes applying a picklable ``fn`` to tasks.

    A task is ``(columns, *extras)``: the columns travel through shared memory,
    the extras (small) through the pipe. ``fn`` returns a list of columns.
    Tasks go round-robin to the workers, so each pipe returns results in order.
    """

    def __init__(
        self, fn: Callable[[Any], list[Any]], num_workers: int, name: str, num_outputs: int
    ) -> None:
        try:
            fn_bytes = pickle.dumps(fn)
        except Exception as exc:
            raise PipelineError(
                f"{name}: python_multiprocessing=True needs operations that can be pickled "
                f"(module-level functions or classes, not lambdas or closures): {exc}"
            ) from exc
        ctx = multiprocessing.get_context("spawn")
        self._prefix = f"mrq{os.getpid()}_{next(_pool_ids)}_"
        self._num_outputs = num_outputs
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._outstanding: dict[int, list[str]] = {}
        self._results: dict[int, tuple[Any, ...]] = {}
        self._lock = threading.Lock()
        self._task_ids = itertools.count()
        for i in range(num_workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_process_main, args=(child, fn_bytes), name=f"{name}-{i}", daemon=True
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers (for tests and diagnostics)."""
        return [p.pid for p in self._procs if p.pid is not None]

    def _in_name(self, task_id: int, k: int) -> str:
        return f"{self._prefix}{task_id}_i{k}"

    def submit(self, item: tuple[Any, ...]) -> Future[list[Any]]:
        """Send one task to the next worker; the future reads its reply."""
        columns, *extras = item
        task_id = next(self._task_ids)
        worker = task_id % len(self._conns)
        names: list[str] = []
        with self._lock:
            self._outstanding[task_id] = names
        descs = []
        for k, col in enumerate(columns):
            names.append(self._in_name(task_id, k))
            descs.append(_put(col, names[-1]))
        self._conns[worker].send((task_id, descs, tuple(extras), f"{self._prefix}{task_id}_o"))
        future: Future[list[Any]] = Future()

        def resolve(stop: threading.Event) -> None:
            self._wait(task_id, worker, future, stop)

        future._resolve = resolve
        return future

    def _wait(
        self, task_id: int, worker: int, future: Future[list[Any]], stop: threading.Event
    ) -> None:
        conn, proc = self._conns[worker], self._procs[worker]
        while task_id not in self._results:
            if stop.is_set():
                raise PipelineStopped
            try:
                if conn.poll(_POLL_S):
                    reply = conn.recv()
                    self._results[reply[1]] = reply
                    continue
            except (EOFError, OSError):
                proc.join(_JOIN_S)
            if not proc.is_alive():
                raise PipelineError(
                    f"worker process {proc.name!r} (pid {proc.pid}) exited with code "
                    f"{proc.exitcode} while running a task; the pipeline stopped (if it "
                    "could not start, guard the script's entry point with "
                    "`if __name__ == '__main__':`)"
                )
        reply = self._results.pop(task_id)
        with self._lock:
            names = self._outstanding.pop(task_id, [])
        for name in names:
            _unlink_quietly(name)
        if reply[0] == "ok":
            future.set_result([_get(d, unlink=True) for d in reply[2]])
        else:
            exc = pickle.loads(reply[2])
            exc.__cause__ = RemoteTraceback(reply[3])
            future.set_exception(exc)

    def shutdown(self) -> None:
        """Stop the workers (kill them if they do not stop) and unlink every segment."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        for proc in self._procs:
            proc.join(_JOIN_S)
            if proc.is_alive():
                proc.kill()
                proc.join(_JOIN_S)
        for conn in self._conns:
            conn.close()
        with self._lock:
            leftovers = dict(self._outstanding)
            self._outstanding.clear()
        for task_id, names in leftovers.items():
            for name in names:
                _unlink_quietly(name)
            for k in range(self._num_outputs):
                _unlink_quietly(f"{self._prefix}{task_id}_o{k}")
        for reply in self._results.values():
            if reply[0] == "ok":
                for desc in reply[2]:
                    _unlink_quietly(desc[1])
        self._results.clear()
        for proc in self._procs:
            with contextlib.suppress(ValueError):
                proc.close()
