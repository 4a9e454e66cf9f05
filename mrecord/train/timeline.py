"""The producer's push log and the GetNext timeout diagnosis built from it.

MindSpore prints the state of its data queue when ``GetNext`` times out, in this
format (one line per recent push, oldest first; a push still in progress has no
end time)::

    preprocess_batch: 3; batch_queue: 1, 0, 1; push_start_time -> push_end_time
    2022-05-09-11:36:00.521.386 -> 2022-05-09-11:36:00.782.215
    2022-05-09-11:36:01.212.621 -> 2022-05-09-11:36:01.490.139
    2022-05-09-11:36:01.893.412 -> 2022-05-09-11:36:02.006.771

- ``preprocess_batch``: batches whose push completed (they reached the queue);
- ``batch_queue``: for each recent push, the number of batches waiting in the queue
  when the push started;
- a push is "delivery + enqueue": converting the batch for the consumer (e.g. a
  pinned host-to-device copy) and putting it into the bounded queue.

From this state :func:`diagnose` names one of the FAQ's four situations.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "ProducerState",
    "PushLog",
    "PushRecord",
    "Situation",
    "diagnose",
    "format_time",
    "timeout_message",
]


def format_time(t: float) -> str:
    """Format a ``time.time()`` value as MindSpore does: ``2022-05-09-11:36:00.521.386``."""
    dt = datetime.fromtimestamp(t)
    ms, us = divmod(dt.microsecond, 1000)
    return f"{dt:%Y-%m-%d-%H:%M:%S}.{ms:03d}.{us:03d}"


@dataclass(frozen=True)
class PushRecord:
    """One push of a batch into the queue."""

    queue_size: int
    """Batches waiting in the queue when the push started."""
    start: float
    """Wall-clock start (``time.time()``)."""
    end: float | None
    """Wall-clock end, or None while the push is in progress."""


@dataclass(frozen=True)
class ProducerState:
    """A snapshot of the producer: what it has sent and its recent pushes."""

    queue_name: str
    preprocess_batch: int
    """Batches whose push completed."""
    pushes: tuple[PushRecord, ...]
    """The most recent pushes, oldest first."""

    @property
    def push_in_progress(self) -> bool:
        """True when the newest push has started but not ended."""
        return bool(self.pushes) and self.pushes[-1].end is None

    def format(self) -> str:
        """The state in MindSpore's format (see the module docstring)."""
        sizes = ", ".join(str(p.queue_size) for p in self.pushes)
        lines = [
            f"preprocess_batch: {self.preprocess_batch}; batch_queue: {sizes}; "
            "push_start_time -> push_end_time"
        ]
        for p in self.pushes:
            end = "" if p.end is None else format_time(p.end)
            lines.append(f"{format_time(p.start)} -> {end}".rstrip())
        return "\n".join(lines)


class PushLog:
    """Thread-safe recorder of pushes; keeps the last ``history`` records."""

    def __init__(self, queue_name: str, history: int = 10) -> None:
        self._name = queue_name
        self._lock = threading.Lock()
        self._records: deque[PushRecord] = deque(maxlen=history)
        self._done = 0

    def begin(self, queue_size: int) -> None:
        """Record that a push starts now with ``queue_size`` batches waiting."""
        with self._lock:
            self._records.append(PushRecord(queue_size, time.time(), None))

    def end(self) -> None:
        """Record that the push begun last has completed."""
        with self._lock:
            last = self._records.pop()
            self._records.append(PushRecord(last.queue_size, last.start, time.time()))
            self._done += 1

    def snapshot(self) -> ProducerState:
        """The current state (a frozen copy)."""
        with self._lock:
            return ProducerState(self._name, self._done, tuple(self._records))


class Situation(enum.Enum):
    """The four situations of MindSpore's FAQ on GetNext timeouts."""

    NOTHING_PRODUCED = "nothing produced"
    PRODUCED_NOT_SENT = "produced but not sent"
    SENDING_AND_WAITING = "sending and waiting"
    SLOW_PREPROCESSING = "slow preprocessing"


def diagnose(state: ProducerState) -> Situation:
    """Name the FAQ situation that ``state`` shows."""
    if not state.pushes:
        return Situation.NOTHING_PRODUCED
    if state.push_in_progress:
        if state.preprocess_batch == 0:
            return Situation.PRODUCED_NOT_SENT
        return Situation.SENDING_AND_WAITING
    return Situation.SLOW_PREPROCESSING


def _hint(state: ProducerState, situation: Situation, now: float) -> str:
    n = state.preprocess_batch
    if situation is Situation.NOTHING_PRODUCED:
        return (
            "the data pipeline has not produced any batch. Iterate the dataset on its own "
            "(for batch in dataset.create_tuple_iterator(output_numpy=True): ...) to check "
            "that preprocessing works and to see how long the first batch takes."
        )
    last = state.pushes[-1]
    if situation is Situation.PRODUCED_NOT_SENT:
        return (
            f"the first batch was produced but its delivery has not finished (started "
            f"{now - last.start:.3f} s ago). Check the device (errors, out of memory, another "
            "process holding it) and the delivery function that copies batches to it."
        )
    if situation is Situation.SENDING_AND_WAITING:
        return (
            f"{n} batches were sent and batch {n + 1} is being sent, but its delivery has not "
            f"finished (started {now - last.start:.3f} s ago). Check the device and the "
            "delivery function for errors or a hang."
        )
    ended = now if last.end is None else last.end
    return (
        f"{n} batches were sent; the last push ended {now - ended:.3f} s ago and batch "
        f"{n + 1} is still being preprocessed. Data preprocessing is too slow for op_timeout: "
        "time the dataset on its own, add workers (num_parallel_workers), offload transforms, "
        "or raise the limit with mrecord.config.set_op_timeout(seconds)."
    )


def timeout_message(state: ProducerState, timeout: float, delivered: int) -> str:
    """The ``SinkTimeoutError`` message: what timed out, the situation, the hint, the state."""
    situation = diagnose(state)
    now = time.time()
    return (
        f"get_next on device queue {state.queue_name!r} timed out: no batch arrived within "
        f"op_timeout={timeout:g} s (waiting for batch {delivered + 1}; {delivered} delivered "
        f"so far).\nSituation: {situation.value} - {_hint(state, situation, now)}\n"
        f"Producer state:\n{state.format()}"
    )
