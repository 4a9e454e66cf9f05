"""Run an iterator in a background thread, a few items ahead of the consumer.

Reading and decoding the next batch then overlaps with writing the current one.
An exception in the producer is re-raised in the consumer; closing the consumer
early stops the producer. The thread and queue are :class:`mrecord.background.Background`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from mrecord.background import END, Background

__all__ = ["prefetch"]

T = TypeVar("T")


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items`` in order while a thread produces up to ``depth`` ahead."""

    def produce(put: Callable[[T], bool]) -> None:
        for item in items:
            if not put(item):
                return

    worker: Background[T] = Background(produce, capacity=depth, name="mrecord-convert-prefetch")
    try:
        while True:
            item = worker.get()
            if item is END:
                return
            yield item
    finally:
        worker.stop()
