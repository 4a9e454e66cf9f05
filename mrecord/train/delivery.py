"""How a batch travels from the producer thread to the training step.

A delivery has two halves: :meth:`Delivery.send` runs in the producer thread as
part of the push (so a slow copy overlaps with the step), :meth:`Delivery.receive`
runs in the consumer when ``get_next`` hands the batch out.

- :class:`NumpyDelivery` (the default) passes numpy batches through untouched.
- :class:`TorchDelivery` turns numeric arrays into torch tensors on a device. On
  CUDA it copies from pinned host memory with ``non_blocking=True`` on a side
  stream; the consumer's stream waits on an event recorded after the copy, so the
  step never sees a half-copied tensor and the copy of batch ``n + 1`` overlaps
  with the step on batch ``n``. torch is imported only here, lazily.

Write your own (e.g. ``jax.device_put``) by giving any object with ``send`` and
``receive`` to ``DeviceQueue(delivery=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Delivery", "NumpyDelivery", "TorchDelivery", "import_torch", "map_arrays"]


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
        raise ImportError(
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

    def __repr__(self) -> str:
        return (
            f"TorchDelivery(device={str(self.device)!r}, pin_memory={self.pin_memory}, "
            f"non_blocking={self.non_blocking}, side_stream={self._stream is not None})"
        )

    def _to_tensor(self, value: Any) -> Any:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biufc":
            return value
        if not value.flags.writeable or not value.flags.c_contiguous:
            value = np.array(value, order="C", copy=True)
        tensor = self._torch.from_numpy(value)
        if self.pin_memory:
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=self.non_blocking)

    def send(self, batch: Any) -> Any:
        """Convert and copy the numeric columns (on the side stream when there is one)."""
        if self._stream is None:
            return map_arrays(batch, self._to_tensor)
        torch = self._torch
        with torch.cuda.stream(self._stream):
            out = map_arrays(batch, self._to_tensor)
            event = torch.cuda.Event()
            event.record(self._stream)
        return _InFlight(out, event)

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
