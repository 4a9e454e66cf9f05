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

import contextlib
import itertools
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from mrecord import config
from mrecord.background import END, Background, BackgroundStopped, BackgroundTimeout
from mrecord.errors import ArgumentError, PipelineError, SinkTimeoutError
from mrecord.storage.probe import memory_budget
from mrecord.train.delivery import Delivery, NumpyDelivery, TorchDelivery
from mrecord.train.source import BatchSource
from mrecord.train.timeline import ProducerState, PushLog, timeout_message

__all__ = ["QUEUE_BUDGET_SHARE", "DeviceQueue", "QueueStats", "host_bytes"]

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


QUEUE_BUDGET_SHARE = 8
"""The batches a ``DeviceQueue`` holds in host memory stop at ``1 / QUEUE_BUDGET_SHARE`` of
the memory budget (``mrecord.storage.probe.memory_budget``), asked when the queue is made,
as well as at ``capacity`` batches. Counted in batches only, 16 batches of 38 MB (a
decode's 150 KB values, ``batch(256)``) waited for a slow step on top of the pipeline's own
queue: OOM-killed in a 500 MB memory group (2026-11-29, tests/train/test_sink_memory.py).
An eighth, as the pipeline's queue (``pipeline.engine.context.PREFETCH_BUDGET_SHARE``)."""


def host_bytes(item: Any) -> int:
    """Bytes of host memory a delivered batch holds: the ``nbytes`` of its columns (a
    tuple, list or dict of them, or one), nothing for a column on an accelerator (a
    ``device`` whose type is not ``"cpu"``: a CUDA tensor) or without ``nbytes``."""
    batch = getattr(item, "batch", item)  # a batch still being copied on a side stream
    if isinstance(batch, dict):
        values: Any = batch.values()
    elif isinstance(batch, (list, tuple)):
        values = batch
    else:
        values = (batch,)
    total = 0
    for value in values:
        device = getattr(value, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            continue
        nbytes = getattr(value, "nbytes", 0)
        total += nbytes if isinstance(nbytes, int) else 0
    return total


class _Producer:
    """The producer thread (a :class:`Background`) and its timings; shared with the
    consumer, never holding the DeviceQueue itself, so that an abandoned queue can be
    garbage collected and stop its thread."""

    def __init__(
        self, capacity: int, log: PushLog, source: BatchSource, delivery: Delivery, name: str
    ) -> None:
        self.log = log
        self.preprocess_s = 0.0
        self.push_s = 0.0
        self._source = source
        self._delivery = delivery
        self._limit: int | None = None
        self._first = 0
        budget = memory_budget()
        self.worker: Background[Any] = Background(
            self._produce,
            capacity=capacity,
            name=f"{_THREAD_PREFIX}{name}",
            describe=f"the producer thread of device queue {name!r}",
            item_name="batches",
            weigh=host_bytes,
            max_weight=None if budget is None else max(1, budget // QUEUE_BUDGET_SHARE),
        )

    def start(self, limit: int | None, first: int = 0) -> None:
        self._limit = limit
        self._first = first
        self.worker.start()

    def _produce(self, put: Callable[[Any], bool]) -> None:
        """Producer thread body: pull, deliver, push, until done or stopped."""
        stream = self._source.stream(self._limit, self._first)
        try:
            self._push_all(stream, put)
        except BaseException:
            with contextlib.suppress(BaseException):  # keep the first error, not close()'s
                _close(stream)
            raise
        _close(stream)

    def _push_all(self, stream: Iterator[Any], put: Callable[[Any], bool]) -> None:
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(stream)
            except StopIteration:
                return
            t1 = time.perf_counter()
            self.log.begin(self.worker.qsize())
            item = self._delivery.send(batch)
            if not put(item):
                return
            self.log.end()
            self.preprocess_s += t1 - t0
            self.push_s += time.perf_counter() - t1


def _close(stream: Iterator[Any]) -> None:
    close = getattr(stream, "close", None)
    if callable(close):
        close()


class DeviceQueue:
    """A named, bounded queue fed by a producer thread that runs ``dataset``.

    Args:
        dataset: a pipeline dataset (``create_tuple_iterator``) or a re-iterable of batches.
        queue_name: a name for messages and the thread (default: ``mrecord_queue_<n>``).
        num_epochs: passes over the dataset to send; -1 (default) sends forever.
        num_batches: send exactly this many batches instead (continuing across passes);
            exclusive with ``num_epochs``.
        capacity: batches the queue may hold (default: ``config.get_prefetch_size()``);
            those in host memory also stop at an eighth of the memory budget
            (``QUEUE_BUDGET_SHARE``).
        device: deliver torch tensors on this device (``"cuda"``, ``"cpu"``, ...) instead
            of numpy arrays; needs torch (``pip install mrecord[torch]``).
        pin_memory: for ``device``: copy through pinned memory (default: on CUDA).
        delivery: your own :class:`~mrecord.train.delivery.Delivery`
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
        self._producer = _Producer(
            self._capacity, PushLog(self._name, history), self._source, self._delivery, self._name
        )
        self._started = False
        self._delivered = 0
        self._wait_s = 0.0
        self._finalizer = weakref.finalize(self, self._producer.worker.stop, 0)

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
        return self._producer.worker.qsize()

    def state(self) -> ProducerState:
        """The producer's state, as printed on a timeout (``state().format()``)."""
        return self._producer.log.snapshot()

    def stats(self) -> QueueStats:
        """Time spent on each side of the queue so far."""
        p = self._producer
        produced = p.worker.produced
        return QueueStats(produced, self._delivered, p.preprocess_s, p.push_s, self._wait_s)

    # -- life cycle ---------------------------------------------------------------

    def start(self) -> DeviceQueue:
        """Start the producer thread (once); returns the queue."""
        if not self._started:
            if self._producer.worker.stopped:
                raise PipelineError(f"device queue {self._name!r} was stopped; create a new one")
            self._started = True
            self._producer.start(self._limit, self._start)
        return self

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stop the producer and wait up to ``timeout`` s for its thread to end.

        Returns True when the thread has ended. A producer stuck inside the dataset
        (a batch that never comes) cannot be interrupted; its thread is a daemon and
        ends when that batch arrives.
        """
        self._finalizer()
        return self._producer.worker.stop(timeout)

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
        t0 = time.perf_counter()
        try:
            item = self._producer.worker.get(wait)
        except BackgroundStopped:
            raise PipelineError(
                f"device queue {self._name!r} was stopped; create a new one"
            ) from None
        except BackgroundTimeout:
            raise SinkTimeoutError(
                timeout_message(self._producer.log.snapshot(), wait, self._delivered)
            ) from None
        finally:
            self._wait_s += time.perf_counter() - t0
        if item is END:
            return _END
        self._delivered += 1
        return self._delivery.receive(item)


_END = object()


def _check_timeout(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ArgumentError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)
