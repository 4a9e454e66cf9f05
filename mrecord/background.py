"""One background producer: a thread feeding a bounded queue, with a stop event.

Used by the pipeline iterator's prefetch thread, the converters' prefetch and the
device queue's producer. The contract, in one place:

- ``produce(put)`` runs in a daemon thread; ``put(item)`` waits for room and returns
  False once stop is requested (the producer should then return);
- the consumer's :meth:`Background.get` returns items in order, then :data:`END`
  when the producer returned; an exception raised by the producer is re-raised in
  the consumer (the same object, so its traceback still shows where it happened,
  with a note naming the thread) after the items queued before it;
- :meth:`Background.stop` (or setting the shared ``stop`` event) drops what is
  queued, wakes both sides and makes :meth:`get` raise :class:`BackgroundStopped`;
- with ``weigh`` and ``max_weight``, the queue also stops taking items once what it
  holds weighs ``max_weight`` (the pipeline weighs its blocks in bytes): ``put`` waits
  while the item would take it past that, unless the queue is empty (an item heavier
  than the whole allowance still passes, alone).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mrecord.errors import ArgumentError

__all__ = ["END", "Background", "BackgroundStopped", "BackgroundTimeout"]

T = TypeVar("T")

END: Any = object()
"""What :meth:`Background.get` returns once the producer has returned and the queue is empty."""

_POLL_S = 0.05  # how often waiting sides look at a stop event set from outside


class BackgroundStopped(Exception):
    """:meth:`Background.get` after stop was requested."""


class BackgroundTimeout(Exception):
    """:meth:`Background.get` waited ``timeout`` seconds and nothing came."""


class Background(Generic[T]):
    """A producer thread and the bounded queue it fills (see the module docstring).

    ``describe`` names the thread in the note added to a forwarded exception
    (default ``background thread NAME``); ``item_name`` says what the items are.
    """

    def __init__(
        self,
        produce: Callable[[Callable[[T], bool]], None],
        *,
        capacity: int,
        name: str,
        stop: threading.Event | None = None,
        describe: str | None = None,
        item_name: str = "items",
        weigh: Callable[[T], int] | None = None,
        max_weight: int | None = None,
    ) -> None:
        if capacity < 1:
            raise ArgumentError(f"capacity must be >= 1, got {capacity!r}")
        if max_weight is not None and max_weight < 1:
            raise ArgumentError(f"max_weight must be >= 1 or None, got {max_weight!r}")
        self.capacity = capacity
        self.max_weight = max_weight if weigh is not None else None
        self._weigh = weigh
        self._weights: deque[int] = deque()
        self._held = 0  # the weight of the items queued now
        self.name = name
        self._describe = describe if describe is not None else f"background thread {name!r}"
        self._item_name = item_name
        self.stop_event = stop if stop is not None else threading.Event()
        self.produced = 0
        self._produce: Callable[[Callable[[T], bool]], None] | None = produce
        self._cond = threading.Condition()
        self._items: deque[T] = deque()
        self._finished = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    # -- producer side ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the producer thread (once)."""
        if not self._started:
            self._started = True
            self._thread.start()

    def put(self, item: T) -> bool:
        """Queue ``item``, waiting for room (a free place, and its weight within
        ``max_weight`` unless the queue is empty); False once stop is requested."""
        weight = self._weigh(item) if self._weigh is not None else 0
        with self._cond:
            while not self._has_room(weight) and not self.stop_event.is_set():
                self._cond.wait(_POLL_S)
            if self.stop_event.is_set():
                return False
            self._items.append(item)
            self._weights.append(weight)
            self._held += weight
            self.produced += 1
            self._cond.notify_all()
            return True

    def _has_room(self, weight: int) -> bool:
        if len(self._items) >= self.capacity:
            return False
        return self.max_weight is None or not self._items or self._held + weight <= self.max_weight

    @property
    def weight(self) -> int:
        """What the items queued now weigh (0 without ``weigh``)."""
        with self._cond:
            return self._held

    def _run(self) -> None:
        error: BaseException | None = None
        produce, self._produce = self._produce, None  # no cycle through a bound method
        if produce is None:  # pragma: no cover - start() runs the thread once
            return
        try:
            produce(self.put)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            add_note = getattr(exc, "add_note", None)  # Python >= 3.11
            if callable(add_note):
                add_note(
                    f"(raised in {self._describe} after {self.produced} "
                    f"{self._item_name} were queued)"
                )
            error = exc
        finally:
            del produce
            with self._cond:
                self._finished = True
                self._error = error
                self._cond.notify_all()

    # -- consumer side ----------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> T:
        """The next item, or :data:`END`; raises the producer's exception,
        :class:`BackgroundStopped` after stop, :class:`BackgroundTimeout` after ``timeout`` s."""
        self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self.stop_event.is_set():
                    self._items.clear()
                    self._weights.clear()
                    self._held = 0
                    raise BackgroundStopped(f"background thread {self.name!r} was stopped")
                if self._items:
                    item = self._items.popleft()
                    self._held -= self._weights.popleft()
                    self._cond.notify_all()
                    return item
                if self._error is not None:
                    raise self._error
                if self._finished:
                    return END  # type: ignore[no-any-return]
                wait = _POLL_S
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BackgroundTimeout(f"nothing from {self.name!r} in {timeout} s")
                    wait = min(wait, remaining)
                self._cond.wait(wait)

    def qsize(self) -> int:
        """Items waiting now."""
        with self._cond:
            return len(self._items)

    @property
    def alive(self) -> bool:
        """Whether the producer thread is running."""
        return self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        """Whether stop was requested."""
        return self.stop_event.is_set()

    def stop(self, timeout: float | None = None) -> bool:
        """Request stop, drop queued items; wait up to ``timeout`` s (None: no limit) for the
        thread. Returns True when the thread has ended (or never started)."""
        with self._cond:
            self.stop_event.set()
            self._items.clear()
            self._weights.clear()
            self._held = 0
            self._cond.notify_all()
        if not self._started or self._thread is threading.current_thread():
            return not self._thread.is_alive()
        self._thread.join(timeout)
        return not self._thread.is_alive()
