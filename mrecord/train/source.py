"""Adapt what the user trains on into an endless, counted stream of batches.

Two kinds of input are accepted:

- a pipeline dataset, i.e. anything with ``create_tuple_iterator(num_epochs=...,
  output_numpy=True)`` and ``get_dataset_size()`` (mrecord's ``Dataset``, or a
  MindSpore-like object); batches are tuples of numpy arrays, one per column;
- a plain *re-iterable* of batches (a list, a ``torch.utils.data.DataLoader``, an
  object whose ``__iter__`` starts a new pass each time); its size is ``len()`` when
  it has one.

:meth:`BatchSource.stream` concatenates passes over the data ("the dataset is
traversed endlessly and each epoch continues where the last stopped") and stops
after ``limit`` batches. A pipeline iterator is created once with the number of
passes needed; it may either end each pass with ``StopIteration`` and continue on
the next ``iter()`` (MindSpore's iterator protocol) or run all passes in one go:
both give the same stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from mrecord.errors import ArgumentError, PipelineError

__all__ = ["BatchSource"]


class BatchSource:
    """A dataset seen as a stream of batches (see the module docstring)."""

    def __init__(self, dataset: object, *, name: str = "train_dataset") -> None:
        self._dataset = dataset
        self._name = name
        self._is_pipeline = callable(getattr(dataset, "create_tuple_iterator", None))
        if not self._is_pipeline and not isinstance(dataset, Iterable):
            raise ArgumentError(
                f"{name} must be a dataset with create_tuple_iterator() or an iterable of "
                f"batches, got {dataset!r} ({type(dataset).__name__})"
            )
        if not self._is_pipeline and isinstance(dataset, Iterator):
            raise ArgumentError(
                f"{name} is a one-shot iterator ({type(dataset).__name__}); pass something "
                "that can be iterated again for every epoch (a dataset, a list, a DataLoader)"
            )

    @property
    def dataset(self) -> object:
        """The wrapped dataset."""
        return self._dataset

    @property
    def size(self) -> int | None:
        """Batches per epoch, or None when the dataset cannot say without a pass."""
        if self._is_pipeline:
            get_size = getattr(self._dataset, "get_dataset_size", None)
            if get_size is None:
                return None
            size = get_size()
        elif hasattr(self._dataset, "__len__"):
            size = len(self._dataset)  # type: ignore[arg-type]
        else:
            return None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise PipelineError(
                f"{self._name} reports a dataset size of {size!r}; expected a count of batches >= 0"
            )
        return size

    @property
    def column_names(self) -> list[str] | None:
        """Column names of a pipeline dataset (``get_col_names()``), else None."""
        get_names = getattr(self._dataset, "get_col_names", None)
        return list(get_names()) if callable(get_names) else None

    def require_size(self, why: str) -> int:
        """Return :attr:`size`, or raise an :class:`ArgumentError` saying ``why`` it is needed."""
        size = self.size
        if size is None:
            raise ArgumentError(
                f"{self._name} has no size ({type(self._dataset).__name__} has neither "
                f"get_dataset_size() nor __len__), which {why}; give it __len__ or use "
                "sink_size > 0"
            )
        if size == 0:
            raise ArgumentError(f"{self._name} is empty (0 batches per epoch); nothing to train on")
        return size

    @property
    def can_resume(self) -> bool:
        """True when :meth:`stream` can start mid-stream (a pipeline with node state)."""
        return self._is_pipeline and callable(getattr(self._dataset, "get_state", None))

    def stream(self, limit: int | None, start: int = 0) -> Iterator[Any]:
        """Yield ``limit`` batches (None: forever), pass after pass over the data, from
        batch ``start`` of that stream on (pass ``start // size``; needs :attr:`can_resume`).

        Raises :class:`PipelineError` if a pass produces no batch before ``limit`` is reached
        (the data ran out). Closing the generator closes the underlying iterator.
        """
        if limit is not None and limit <= 0:
            return
        size = self.size
        if start and (not self.can_resume or not size):
            raise ArgumentError(
                f"{self._name} cannot start at batch {start}: that needs an mrecord pipeline "
                "(MindDataset -> map / batch / repeat) of known size; for a "
                "StreamingDataLoader, call its load_state_dict instead"
            )
        passes = -1 if limit is None or not size else math.ceil((start + limit) / size)
        produced = 0
        if self._is_pipeline:
            iterator: Any = self._dataset.create_tuple_iterator(  # type: ignore[attr-defined]
                num_epochs=passes, output_numpy=True
            )
            if start:
                assert size  # checked above
                epoch, rows = divmod(start, size)
                nodes = self._dataset.get_state(epoch, rows)  # type: ignore[attr-defined]
                iterator.load_state_dict(
                    {"version": 1, "epoch": epoch, "rows": rows, "nodes": nodes}
                )
        else:
            iterator = self._dataset
        try:
            while True:
                in_pass = 0
                for batch in iterator:
                    in_pass += 1
                    produced += 1
                    yield batch
                    if limit is not None and produced >= limit:
                        return
                if in_pass == 0:
                    wanted = "endless batches" if limit is None else f"{limit} batches"
                    raise PipelineError(
                        f"{self._name} ran out of data after {produced} batches, but "
                        f"{wanted} were requested; check that every pass over the dataset "
                        "yields batches (a one-shot iterator is exhausted after one pass)"
                    )
        finally:
            if iterator is not self._dataset:
                _close(iterator)


def _close(iterator: object) -> None:
    """Stop a pipeline iterator early (``stop()`` as MindSpore, else ``close()``)."""
    for method in ("stop", "close"):
        fn = getattr(iterator, method, None)
        if callable(fn):
            fn()
            return
