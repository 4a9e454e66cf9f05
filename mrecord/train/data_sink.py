"""A manual sink: sink data into your own loop, without ``Model.train``.

MindSpore's FAQ answer to "how do I sink data without the high-level API" is a
device queue plus ``GetNext``; ``mindspore.data_sink(fn, dataset, sink_size)`` wraps
that into a function. Both exist here:

- :class:`~mrecord.train.device_queue.DeviceQueue` with ``get_next()``;
- :func:`data_sink`: ``sink = data_sink(step, dataset, sink_size=100)``; each call
  ``sink()`` runs ``step`` on the next ``sink_size`` batches and returns the last result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.train.delivery import Delivery
from mrecord.train.device_queue import DeviceQueue
from mrecord.train.model import call_step
from mrecord.train.summary import TrainSummary

__all__ = ["DataSink", "data_sink"]


class DataSink:
    """``step`` bound to an endless device queue; call it to run ``sink_size`` steps.

    Close it (``close()`` or ``with``) to stop the producer thread; an abandoned sink
    stops it when garbage collected.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        dataset: object,
        sink_size: int = 1,
        *,
        device: Any = None,
        delivery: Delivery | None = None,
        capacity: int | None = None,
        op_timeout: float | None = None,
    ) -> None:
        if not callable(fn):
            raise WrongTypeError(f"fn must be callable, got {fn!r}")
        if isinstance(sink_size, bool) or not isinstance(sink_size, int) or sink_size < 1:
            raise ArgumentError(f"sink_size must be an int >= 1, got {sink_size!r}")
        self.fn = fn
        self.sink_size = sink_size
        self.queue = DeviceQueue(
            dataset,
            queue_name=f"data_sink_{getattr(fn, '__name__', 'fn')}",
            device=device,
            delivery=delivery,
            capacity=capacity,
            op_timeout=op_timeout,
        )
        self._steps = 0
        self._calls = 0
        self._step_s = 0.0
        self._wait_s = 0.0
        self._start: float | None = None

    def __call__(self) -> Any:
        """Run ``fn`` on the next ``sink_size`` batches; return its last result."""
        if self._start is None:
            self._start = time.perf_counter()
        out = None
        get_next, fn = self.queue.get_next, self.fn
        for _ in range(self.sink_size):
            t0 = time.perf_counter()
            batch = get_next()
            t1 = time.perf_counter()
            out = call_step(fn, batch)
            self._wait_s += t1 - t0
            self._step_s += time.perf_counter() - t1
            self._steps += 1
        self._calls += 1
        return out

    def summary(self) -> TrainSummary:
        """Where the time went so far (one "epoch" per call)."""
        stats = self.queue.stats()
        total = 0.0 if self._start is None else time.perf_counter() - self._start
        return TrainSummary(
            sink=True,
            epochs=self._calls,
            steps=self._steps,
            total_s=total,
            data_wait_s=self._wait_s,
            step_s=self._step_s,
            preprocess_s=stats.preprocess_s,
            push_s=stats.push_s,
        )

    def close(self) -> None:
        """Stop the producer thread."""
        self.queue.stop()

    def __enter__(self) -> DataSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def data_sink(
    fn: Callable[..., Any],
    dataset: object,
    sink_size: int = 1,
    *,
    device: Any = None,
    delivery: Delivery | None = None,
    capacity: int | None = None,
    op_timeout: float | None = None,
) -> DataSink:
    """Bind ``fn`` to ``dataset`` through a device queue (MindSpore's ``data_sink``).

    Example::

        sink = data_sink(train_step, dataset, sink_size=100)
        for _ in range(10):
            loss = sink()        # 100 steps, returns the last loss
        sink.close()
    """
    return DataSink(
        fn,
        dataset,
        sink_size,
        device=device,
        delivery=delivery,
        capacity=capacity,
        op_timeout=op_timeout,
    )
