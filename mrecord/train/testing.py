"""A fake dataset for testing your own training code against the sink, without data.

Public on purpose (like torchvision's ``FakeData``): the code people write around
:class:`~mrecord.train.Model` (callbacks, a step function, a stop rule, error
handling) needs a dataset whose batches say where they are and that can stall or
fail at a chosen batch; mrecord's own sink tests and ``benchmarks/bench_sink.py``
use the same class. See docs/SINK.md ("Testing your callbacks").

:class:`FakeDataset` behaves like a batched pipeline dataset: ``get_dataset_size()``,
``get_col_names()`` and ``create_tuple_iterator(num_epochs, output_numpy)`` whose
iterator follows MindSpore's protocol (each ``for`` loop over it is one epoch; it
ends for good after ``num_epochs`` passes; ``stop()`` ends it early). Hooks let a
test record events, stall or fail at a chosen batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FakeDataset", "FakeIterator"]

MakeBatch = Callable[[int, int], tuple[Any, ...]]
Hook = Callable[[int, int], None]


def _default_batch(epoch: int, index: int) -> tuple[Any, ...]:
    return (np.array([epoch], dtype=np.int64), np.array([index], dtype=np.int64))


class FakeIterator:
    """MindSpore-style iterator over a :class:`FakeDataset` (see the module docstring)."""

    def __init__(self, dataset: FakeDataset, num_epochs: int) -> None:
        self._ds = dataset
        self._num_epochs = num_epochs
        self._epoch = 0
        self._index = 0
        self.stopped = False

    def __iter__(self) -> FakeIterator:
        return self

    def __next__(self) -> tuple[Any, ...]:
        ds = self._ds
        if self.stopped or (self._num_epochs != -1 and self._epoch >= self._num_epochs):
            raise StopIteration
        if self._index >= ds.size:
            self._epoch += 1
            self._index = 0
            if not ds.continuous:
                raise StopIteration
            if self._num_epochs != -1 and self._epoch >= self._num_epochs:
                raise StopIteration
        epoch, index = self._epoch, self._index
        self._index += 1
        if ds.before_batch is not None:
            ds.before_batch(epoch, index)
        batch = ds.make_batch(epoch, index)
        if ds.after_batch is not None:
            ds.after_batch(epoch, index)
        return batch

    def stop(self) -> None:
        """End the iteration early."""
        self.stopped = True


class FakeDataset:
    """``size`` batches per epoch; batch ``i`` of pass ``e`` is ``make_batch(e, i)``.

    Args:
        size: batches per epoch.
        make_batch: builds a batch (default: ``(array([e]), array([i]))``).
        before_batch / after_batch: called around building each batch (record events,
            wait on a ``threading.Event``, raise an error...).
        continuous: the iterator runs all epochs without ``StopIteration`` in between.
    """

    def __init__(
        self,
        size: int,
        *,
        make_batch: MakeBatch | None = None,
        before_batch: Hook | None = None,
        after_batch: Hook | None = None,
        continuous: bool = False,
        col_names: tuple[str, ...] = ("epoch", "index"),
    ) -> None:
        self.size = size
        self.make_batch = make_batch or _default_batch
        self.before_batch = before_batch
        self.after_batch = after_batch
        self.continuous = continuous
        self.col_names = list(col_names)
        self.iterators: list[FakeIterator] = []
        self.requested_epochs: list[int] = []

    def get_dataset_size(self) -> int:
        """Batches per epoch."""
        return self.size

    def get_col_names(self) -> list[str]:
        """Column names."""
        return list(self.col_names)

    def create_tuple_iterator(
        self, num_epochs: int = -1, output_numpy: bool = True
    ) -> FakeIterator:
        """A new iterator over ``num_epochs`` passes (-1: endless)."""
        self.requested_epochs.append(num_epochs)
        it = FakeIterator(self, num_epochs)
        self.iterators.append(it)
        return it
