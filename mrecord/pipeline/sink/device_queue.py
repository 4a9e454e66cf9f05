"""The device queue: a producer thread runs the pipeline and feeds a bounded queue.

::

    dataset ──► producer thread: next batch ─► delivery.send ─► bounded queue ──► get_next()
                 (preprocess)                  (push: copy + enqueue)               (consumer)

The producer pushes at most ``capacity`` batches ahead, so memory stays bounded and
data processing overlaps with the training step (MindSpore's data sinking). The
consumer takes batches with :meth:`DeviceQueue.get_next`, which waits at most
``op_timeout`` seconds and then raises :class:`~mrecord.errors.SinkTimeoutError`
carrying the producer's state in MindSpore's format.

An exception in the producer is re-raised by ``get_next`` (the batches queued before
it are delivered first) with the producer's traceback. :meth:`DeviceQueue.stop`, the
context manager, or garbage collection of the queue shut the producer down.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from mrecord import config
from mrecord.errors import ArgumentError, PipelineError, SinkTimeoutError
from mrecord.pipeline.sink.delivery import Delivery, NumpyDelivery, TorchDelivery
from mrecord.pipeline.sink.source import BatchSource
from mrecord.pipeline.sink.timeline import ProducerState, PushLog, timeout_message

__all__ = ["DeviceQueue", "QueueStats"]

_counter = itertools.count()
_THREAD_PREFIX = "mrecord-sink-"


@dataclass(frozen=True)
class QueueStats:
    """Where the time went, in seconds, on both sides of the queue."""

    produced: int
    """Batches pushed into the queue."""
    delivered: int
    """Batches handed out by ``get_next``."""
    preprocess_s: float
    """Producer: time spent getting batches from the dataset (data processing)."""
    push_s: float
    """Producer: time spent delivering batches and waiting for room in the queue."""
    wait_s: float
    """Consumer: time spent in ``get_next`` waiting for a batch."""


class _Channel:
    """What the producer thread and the consumer share (never the DeviceQueue itself,
    so that an abandoned queue can be garbage collected and stop its thread)."""

    def __init__(self, capacity: int, log: PushLog) -> None:
        self.cond = threading.Condition()
        self.items: deque[Any] = deque()
        self.capacity = capacity
        self.log = log
        self.stopping = False
        self.finished = False
        self.error: BaseException | None = None
        self.produced = 0
        self.preprocess_s = 0.0
        self.push_s = 0.0

    def put(self, item: Any) -> bool:
        """Enqueue ``item``, waiting for room; False if a stop was requested."""
        with self.cond:
            while len(self.items) >= self.capacity and not self.stopping:
                self.cond.wait()
            if self.stopping:
                return False
            self.items.append(item)
            self.produced += 1
            self.cond.notify_all()
            return True

    def qsize(self) -> int:
        with self.cond:
            return len(self.items)

    def close(self, error: BaseException | None) -> None:
        """The producer is done, normally (``error`` None) or not."""
        with self.cond:
            self.finished = True
            self.error = error
            self.cond.notify_all()

    def request_stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.items.clear()
            self.cond.notify_all()


def _produce(channel: _Channel, stream: Iterator[Any], delivery: Delivery, queue_name: str) -> None:
    """Producer thread body: pull, deliver, push, until done, stopped or failed."""
    error: BaseException | None = None
    try:
        while not channel.stopping:
            t0 = time.perf_counter()
            try:
                batch = next(stream)
            except StopIteration:
                break
            t1 = time.perf_counter()
            channel.log.begin(channel.qsize())
            item = delivery.send(batch)
            if not channel.put(item):
                break
            channel.log.end()
            channel.preprocess_s += t1 - t0
            channel.push_s += time.perf_counter() - t1
    except BaseException as exc:  # handed to the consumer, which re-raises it
        note = (
            f"(raised in the producer thread of device queue {queue_name!r} after "
            f"{channel.produced} batches were queued)"
        )
        add_note = getattr(exc, "add_note", None)
        if callable(add_note):
            add_note(note)
        error = exc
    finally:
        try:
            close = getattr(stream, "close", None)
            if callable(close):
                close()
        except BaseException as exc:
            error = error or exc
        channel.close(error)


class DeviceQueue:
    """A named, bounded queue fed by a producer thread that runs ``dataset``.

    Args:
        dataset: a pipeline dataset (``create_tuple_iterator``) or a re-iterable of batches.
        queue_name: a name for messages and the thread (default: ``mrecord_queue_<n>``).
        num_epochs: passes over the dataset to send; -1 (default) sends forever.
        num_batches: send exactly this many batches instead (continuing across passes);
            exclusive with ``num_epochs``.
        capacity: batches the queue may hold (default: ``config.get_prefetch_size()``).
        device: deliver torch tensors on this device (``"cuda"``, ``"cpu"``, ...) instead
            of numpy arrays; needs torch (``pip install mrecord[torch]``).
        pin_memory: for ``device``: copy through pinned memory (default: on CUDA).
        delivery: your own :class:`~mrecord.pipeline.sink.delivery.Delivery`
            (exclusive with ``device``).
        op_timeout: seconds ``get_next`` waits (default: ``config.get_op_timeout()``, 1900).
        history: how many recent pushes the timeout message lists (default 10).
        start: begin at this batch of the endless stream (a resumed run; needs an mrecord
            pipeline, see ``BatchSource.stream``).

    The producer starts on :meth:`start`, on entering ``with``, or on the first
    :meth:`get_next`.

    Example::

        with DeviceQueue(dataset, queue_name="train", num_epochs=1) as queue:
            for _ in range(dataset.get_dataset_size()):
                image, label = queue.get_next()
    """

    def __init__(
        self,
        dataset: object,
        *,
        queue_name: str | None = None,
        num_epochs: int = -1,
        num_batches: int | None = None,
        capacity: int | None = None,
        device: Any = None,
        pin_memory: bool | None = None,
        delivery: Delivery | None = None,
        op_timeout: float | None = None,
        history: int = 10,
        start: int = 0,
    ) -> None:
        self._source = (
            dataset if isinstance(dataset, BatchSource) else BatchSource(dataset, name="dataset")
        )
        self._name = queue_name if queue_name is not None else f"mrecord_queue_{next(_counter)}"
        self._limit = self._resolve_limit(num_epochs, num_batches)
        self._start = start
        self._capacity = config.get_prefetch_size() if capacity is None else capacity
        if (
            isinstance(self._capacity, bool)
            or not isinstance(self._capacity, int)
            or (self._capacity < 1)
        ):
            raise ArgumentError(f"capacity must be an int >= 1, got {capacity!r}")
        if delivery is not None and device is not None:
            raise ArgumentError(f"give either device={device!r} or delivery={delivery!r}, not both")
        if delivery is None:
            delivery = (
                NumpyDelivery() if device is None else TorchDelivery(device, pin_memory=pin_memory)
            )
        self._delivery: Delivery = delivery
        if op_timeout is None:
            op_timeout = config.get_op_timeout()
        self._timeout = _check_timeout("op_timeout", op_timeout)
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ArgumentError(f"history must be an int >= 1, got {history!r}")
        self._channel = _Channel(self._capacity, PushLog(self._name, history))
        self._thread: threading.Thread | None = None
        self._delivered = 0
        self._wait_s = 0.0
        self._finalizer = weakref.finalize(self, self._channel.request_stop)

    def _resolve_limit(self, num_epochs: int, num_batches: int | None) -> int | None:
        if num_batches is not None:
            if num_epochs != -1:
                raise ArgumentError(
                    f"give either num_epochs={num_epochs!r} or num_batches={num_batches!r}, "
                    "not both"
                )
            if (
                isinstance(num_batches, bool)
                or not isinstance(num_batches, int)
                or (num_batches < 0)
            ):
                raise ArgumentError(f"num_batches must be an int >= 0, got {num_batches!r}")
            return num_batches
        if (
            isinstance(num_epochs, bool)
            or not isinstance(num_epochs, int)
            or (num_epochs < 1 and num_epochs != -1)
        ):
            raise ArgumentError(f"num_epochs must be -1 or an int >= 1, got {num_epochs!r}")
        if num_epochs == -1:
            return None
        return num_epochs * self._source.require_size("num_epochs needs to count batches")

    # -- properties ---------------------------------------------------------------

    @property
    def queue_name(self) -> str:
        """The queue's name (used in messages and in the producer thread's name)."""
        return self._name

    @property
    def capacity(self) -> int:
        """How many batches the queue holds at most."""
        return self._capacity

    @property
    def num_batches(self) -> int | None:
        """How many batches the producer sends in all (None: endless)."""
        return self._limit

    @property
    def op_timeout(self) -> float:
        """Seconds ``get_next`` waits by default."""
        return self._timeout

    @property
    def delivered(self) -> int:
        """Batches handed out by ``get_next`` so far."""
        return self._delivered

    def size(self) -> int:
        """Batches waiting in the queue now."""
        return self._channel.qsize()

    def state(self) -> ProducerState:
        """The producer's state, as printed on a timeout (``state().format()``)."""
        return self._channel.log.snapshot()

    def stats(self) -> QueueStats:
        """Time spent on each side of the queue so far."""
        ch = self._channel
        return QueueStats(ch.produced, self._delivered, ch.preprocess_s, ch.push_s, self._wait_s)

    @property
    def is_running(self) -> bool:
        """True while the producer thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    # -- life cycle ---------------------------------------------------------------

    def start(self) -> DeviceQueue:
        """Start the producer thread (once); returns the queue."""
        if self._thread is None:
            if self._channel.stopping:
                raise PipelineError(f"device queue {self._name!r} was stopped; create a new one")
            self._thread = threading.Thread(
                target=_produce,
                args=(
                    self._channel,
                    self._source.stream(self._limit, self._start),
                    self._delivery,
                    self._name,
                ),
                name=f"{_THREAD_PREFIX}{self._name}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stop the producer and wait up to ``timeout`` s for its thread to end.

        Returns True when the thread has ended. A producer stuck inside the dataset
        (a batch that never comes) cannot be interrupted; its thread is a daemon and
        ends when that batch arrives.
        """
        self._finalizer()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> DeviceQueue:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"DeviceQueue(queue_name={self._name!r}, capacity={self._capacity}, "
            f"num_batches={self._limit}, delivery={self._delivery!r})"
        )

    # -- consuming ----------------------------------------------------------------

    def get_next(self, timeout: float | None = None) -> Any:
        """Return the next batch, waiting at most ``timeout`` s (default: ``op_timeout``).

        Raises:
            SinkTimeoutError: no batch arrived in time; the message says why.
            PipelineError: every batch was already delivered, or the queue was stopped.
            Exception: whatever the producer raised, with its traceback.
        """
        item = self._get(timeout)
        if item is _END:
            raise PipelineError(
                f"device queue {self._name!r} is exhausted: all {self._delivered} batches were "
                "delivered; ask for no more than num_batches / num_epochs send"
            )
        return item

    def __iter__(self) -> Iterator[Any]:
        """Yield every remaining batch (each wait bounded by ``op_timeout``)."""
        while True:
            item = self._get(None)
            if item is _END:
                return
            yield item

    def _get(self, timeout: float | None) -> Any:
        wait = self._timeout if timeout is None else _check_timeout("timeout", timeout)
        self.start()
        ch = self._channel
        t0 = time.perf_counter()
        deadline = time.monotonic() + wait
        try:
            with ch.cond:
                while True:
                    if ch.items:
                        item = ch.items.popleft()
                        ch.cond.notify_all()
                        break
                    if ch.error is not None:
                        raise ch.error
                    if ch.stopping:
                        raise PipelineError(
                            f"device queue {self._name!r} was stopped; create a new one"
                        )
                    if ch.finished:
                        return _END
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SinkTimeoutError(
                            timeout_message(ch.log.snapshot(), wait, self._delivered)
                        )
                    ch.cond.wait(remaining)
        finally:
            self._wait_s += time.perf_counter() - t0
        self._delivered += 1
        return self._delivery.receive(item)


_END = object()


def _check_timeout(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ArgumentError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)
