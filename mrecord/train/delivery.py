"""How a batch travels from the producer thread to the training step.

A delivery has two halves: :meth:`Delivery.send` runs in the producer thread as
part of the push (so a slow copy overlaps with the step), :meth:`Delivery.receive`
runs in the consumer when ``get_next`` hands the batch out.

- :class:`NumpyDelivery` (the default) passes numpy batches through untouched.
- :class:`TorchDelivery` turns numeric arrays into torch tensors on a device. On
  CUDA it copies from pinned host memory with ``non_blocking=True`` on a side
  stream; the consumer's stream waits on an event recorded after the copy, so the
  step never sees a half-copied tensor and the copy of batch ``n + 1`` overlaps
  with the step on batch ``n``. The pinned memory is a few staging buffers made once
  and reused (:class:`PinnedStaging`): pinning each batch anew (``Tensor.pin_memory()``)
  cost more per batch than the rest of the producer's work and halved the pipeline's rate
  (docs/BENCHMARKS.md, "On a GPU").
  torch is imported only here, lazily.

Write your own (e.g. ``jax.device_put``) by giving any object with ``send`` and
``receive`` to ``DeviceQueue(delivery=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mrecord.errors import MissingDependencyError

__all__ = [
    "Delivery",
    "NumpyDelivery",
    "PinnedStaging",
    "TorchDelivery",
    "import_torch",
    "map_arrays",
]


@runtime_checkable
class Delivery(Protocol):
    """The two halves of moving a batch to where the step runs."""

    def send(self, batch: Any) -> Any:
        """Producer side: prepare ``batch`` (copy it to the device, ...)."""

    def receive(self, item: Any) -> Any:
        """Consumer side: turn what :meth:`send` returned into the batch the step gets."""


class NumpyDelivery:
    """Hand batches over as they come (numpy arrays); no copy."""

    def send(self, batch: Any) -> Any:
        """Return ``batch`` unchanged."""
        return batch

    def receive(self, item: Any) -> Any:
        """Return ``item`` unchanged."""
        return item

    def __repr__(self) -> str:
        return "NumpyDelivery()"


def import_torch() -> Any:
    """Import torch, or raise an ImportError that names the extra to install."""
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(
            "delivering batches as torch tensors needs torch: pip install mrecord[torch]"
        ) from exc
    return torch


def map_arrays(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every column of a batch (tuple, list, dict or a single value)."""
    if isinstance(batch, tuple):
        return tuple(fn(v) for v in batch)
    if isinstance(batch, list):
        return [fn(v) for v in batch]
    if isinstance(batch, dict):
        return {k: fn(v) for k, v in batch.items()}
    return fn(batch)


@dataclass
class _InFlight:
    """A batch whose copy was queued on a side stream, with the event that marks its end."""

    batch: Any
    event: Any


class PinnedStaging:
    """Pinned host buffers that host-to-device copies start from, made once and reused.

    ``stage(array)`` copies ``array`` into a free buffer of its dtype and shape and
    returns that buffer; ``done(buffer, event)`` marks it busy until ``event`` (recorded
    after the copy out of it was queued) has completed. A buffer is handed out again
    only once its event says so; when every buffer of a shape is busy and there are
    ``per_shape`` of them, the oldest one's copy is waited for. A batch of a new shape
    makes new buffers (the last batch of an epoch, say); at most ``max_shapes`` shapes
    are kept.

    ``allocate(shape, dtype)`` makes a buffer (default: ``torch.empty(..., pin_memory=True)``).
    """

    def __init__(
        self,
        allocate: Callable[[tuple[int, ...], Any], Any] | None = None,
        *,
        per_shape: int = 8,
        max_shapes: int = 8,
    ) -> None:
        self._torch = import_torch()
        self._allocate = allocate or self._pinned
        self._per_shape = per_shape
        self._max_shapes = max_shapes
        # (shape, dtype) -> buffers, least recently staged first: [tensor, event or None]
        self._buffers: dict[tuple[tuple[int, ...], Any], list[list[Any]]] = {}
        self._dtypes: dict[np.dtype[Any], Any] = {}

    def _pinned(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self._torch.empty(shape, dtype=dtype, pin_memory=True)

    def stage(self, array: np.ndarray) -> Any:
        """A pinned tensor holding a copy of ``array`` (busy until :meth:`done`)."""
        dtype = self._torch_dtype(array.dtype)
        key = (tuple(array.shape), dtype)
        slots = self._buffers.pop(key, None)
        if slots is None:
            slots = []
            if len(self._buffers) >= self._max_shapes:
                self._buffers.pop(next(iter(self._buffers)))  # the least recently used shape
        self._buffers[key] = slots  # most recently used last
        slot = next(
            (s for s in slots if s[1] is None or (s[1] is not _PENDING and s[1].query())), None
        )
        if slot is None and len(slots) >= self._per_shape:
            slot = next((s for s in slots if s[1] is not _PENDING), None)
            if slot is not None:
                slot[1].synchronize()  # every buffer busy: wait for the oldest copy
        if slot is None:
            slot = [self._allocate(key[0], dtype), None]
        else:
            del slots[next(i for i, s in enumerate(slots) if s is slot)]  # not ==: tensors
        slots.append(slot)
        slot[1] = _PENDING  # until done(): another column of this batch must not take it
        np.copyto(slot[0].numpy(), array, casting="no")
        return slot[0]

    def done(self, buffer: Any, event: Any) -> None:
        """``buffer`` is in use until ``event`` completes."""
        for slots in self._buffers.values():
            for slot in slots:
                if slot[0] is buffer:
                    slot[1] = event
                    return

    def _torch_dtype(self, dtype: np.dtype[Any]) -> Any:
        known = self._dtypes.get(dtype)
        if known is None:
            known = self._dtypes[dtype] = self._torch.from_numpy(np.empty(0, dtype=dtype)).dtype
        return known


_PENDING = object()
"""A staging buffer whose copy is being queued (its event is not recorded yet)."""


class TorchDelivery:
    """Deliver numeric numpy columns as torch tensors on ``device``.

    Args:
        device: a torch device or its name (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        pin_memory: copy through pinned host memory; default: True on CUDA.
        non_blocking: asynchronous host-to-device copies (CUDA only); default True.
        side_stream: run the copies on a separate CUDA stream; default True on CUDA.

    Columns that are not numeric arrays (strings, bytes, objects) stay as they are.
    """

    def __init__(
        self,
        device: Any = "cpu",
        *,
        pin_memory: bool | None = None,
        non_blocking: bool = True,
        side_stream: bool | None = None,
    ) -> None:
        torch = import_torch()
        self._torch = torch
        self.device = torch.device(device)
        is_cuda = self.device.type == "cuda"
        self.pin_memory = is_cuda if pin_memory is None else bool(pin_memory)
        self.non_blocking = bool(non_blocking) and is_cuda
        use_stream = is_cuda if side_stream is None else bool(side_stream) and is_cuda
        self._stream = torch.cuda.Stream(device=self.device) if use_stream else None
        self._staging = PinnedStaging() if self.pin_memory and is_cuda else None

    def __repr__(self) -> str:
        return (
            f"TorchDelivery(device={str(self.device)!r}, pin_memory={self.pin_memory}, "
            f"non_blocking={self.non_blocking}, side_stream={self._stream is not None})"
        )

    def _to_tensor(self, value: Any, staged: list[Any]) -> Any:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biufc":
            return value
        if self._staging is not None:
            # One copy into a reused pinned buffer (which also takes read-only or
            # strided arrays), then an asynchronous copy to the device.
            buffer = self._staging.stage(value)
            staged.append(buffer)
            return buffer.to(self.device, non_blocking=self.non_blocking)
        if not value.flags.writeable or not value.flags.c_contiguous:
            value = np.array(value, order="C", copy=True)
        tensor = self._torch.from_numpy(value)
        if self.pin_memory:
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=self.non_blocking)

    def send(self, batch: Any) -> Any:
        """Convert and copy the numeric columns (on the side stream when there is one)."""
        staged: list[Any] = []
        if self._stream is None:
            out = map_arrays(batch, lambda value: self._to_tensor(value, staged))
            self._release(staged, None)
            return out
        torch = self._torch
        with torch.cuda.stream(self._stream):
            out = map_arrays(batch, lambda value: self._to_tensor(value, staged))
            event = torch.cuda.Event()
            event.record(self._stream)
        self._release(staged, event)
        return _InFlight(out, event)

    def _release(self, staged: list[Any], event: Any) -> None:
        """Mark the staging buffers of one batch busy until its copies are done."""
        if self._staging is None or not staged:
            return
        if event is None:  # copies on the current stream: an event recorded there
            event = self._torch.cuda.Event()
            event.record(self._torch.cuda.current_stream(self.device))
        for buffer in staged:
            self._staging.done(buffer, event)

    def receive(self, item: Any) -> Any:
        """Make the consumer's current stream wait for the copy, then return the batch."""
        if not isinstance(item, _InFlight):
            return item
        torch = self._torch
        current = torch.cuda.current_stream(self.device)
        current.wait_event(item.event)

        def keep_alive(value: Any) -> Any:
            # The tensors were allocated on the side stream; tell the caching allocator
            # that the consumer's stream uses them too, so their memory is not reused early.
            if isinstance(value, torch.Tensor) and value.is_cuda:
                value.record_stream(current)
            return value

        return map_arrays(item.batch, keep_alive)
