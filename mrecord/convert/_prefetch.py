"""Run an iterator in a background thread, a few items ahead of the consumer.

Reading and decoding the next batch then overlaps with writing the current one.
An exception in the producer is re-raised in the consumer; closing the consumer
early stops the producer.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["prefetch"]

T = TypeVar("T")
_DONE = object()


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items`` in order while a thread produces up to ``depth`` ahead."""
    q: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as exc:
            put(_Raised(exc))
            return
        put(_DONE)

    thread = threading.Thread(target=produce, name="mrecord-convert-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc
