"""Move a batch from a DataLoader worker to the main process through a reused shared-memory ring.

torch sends a worker's batch through a pipe (``bytes`` and other Python objects are pickled:
a 3 MB batch of image blobs crosses a 64 KiB pipe buffer in ~50 round trips) and each tensor
through a *fresh* shared-memory segment (allocating, zeroing and mapping new pages: more
than reading the rows; docs/BENCHMARKS.md, "PyTorch DataLoader"). A worker here instead
copies the batch's tensors and ``bytes`` values once into a slot of a ring it allocated
once, and pickles only the batch's skeleton; the main process copies them out of the slot
while unpickling and marks the slot free. What the main process gets is what the worker
had: the same structure, the same types (tensors, ``bytes``), its own memory.

Ring layout (one shared ``uint8`` tensor per worker process)::

    [ state: n_slots x int64 (0 free, 1 in flight) ] [ slot 0: slot_bytes ] ... [ slot n-1 ]

A packed leaf is ``(kind, offset, nbytes, dtype, shape)`` at 64-byte aligned offsets in its
slot. The first batch from a ring carries the ring itself (torch shares it by file descriptor
or name, once); later ones only its token. Batches of a worker arrive in the order it sent
them, so when the main process sees a worker's new ring, that worker's older rings have no
batch in flight any more and are dropped; rings of workers that exited are dropped then too.
When no slot is free or the batch is larger than the ring can grow to, the batch goes
torch's usual way (same types either way).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from mrecord.block import BytesArray
from mrecord.errors import PipelineError
from mrecord.torch._common import torch

__all__ = ["Packed", "collate", "pack", "unpack"]

_SLOTS = 2
"""Slots per ring unless told (``pack``'s ``slots``): torch's default ``prefetch_factor``,
the batches a worker has in flight at most (the main process frees a batch's slot when
it receives it, before it asks the worker for another)."""
_MAX_SLOTS = 16
_ALIGN = 64
_MIN_SLOT = 1 << 16
_MAX_SLOT = 1 << 30
_STATE_BYTES = 8 * _MAX_SLOTS  # room for any slot count: the main process needs no count


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class _Ring:
    """The worker side: one shared tensor of ``slots`` slots of ``slot_bytes``. Its
    every page is taken when it is made (torch allocates shared memory whole), so each
    slot no batch needs costs a batch of the memory group's room."""

    def __init__(self, slot_bytes: int, slots: int) -> None:
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.pid = os.getpid()
        self.token = f"{self.pid}-{os.urandom(8).hex()}"
        size = _STATE_BYTES + slots * slot_bytes
        self.tensor = torch.empty(size, dtype=torch.uint8).share_memory_()  # type: ignore[no-untyped-call]
        self.bytes = self.tensor.numpy()
        self.bytes[:_STATE_BYTES] = 0  # the main process sees the whole state area
        self.state = self.bytes[: 8 * slots].view(np.int64)
        self.sent = False  # whether a batch carrying the ring itself was sent

    def claim(self) -> int | None:
        """A free slot, now marked in flight, or None."""
        free = np.flatnonzero(self.state == 0)
        if not len(free):
            return None
        slot = int(free[0])
        self.state[slot] = 1
        return slot

    def slot_view(self, slot: int) -> np.ndarray:
        start = _STATE_BYTES + slot * self.slot_bytes
        view: np.ndarray = self.bytes[start : start + self.slot_bytes]
        return view


_RING: _Ring | None = None


def _worker_ring(nbytes: int, slots: int) -> _Ring | None:
    """This process's ring of ``slots`` slots, (re)made to hold ``nbytes``; None when that
    is too large.

    A first ring's slots have an eighth more than the batch they are made for (a batch of
    64 images varies by a few percent); a ring made again because a batch outgrew it, half
    more (batches that vary more). Before: four slots of 1.5 batches each, six batches of
    shared memory per worker, three times torch's own (``prefetch_factor`` batches): 8
    workers' rings of 6.4 MB batches took 255 MB in a 600 MB memory group, where the
    loader was OOM-killed (291 MB in a 763 MB one, where it stalled; docs/TORCH.md)."""
    global _RING
    ring = _RING
    mine = ring is not None and ring.pid == os.getpid()
    if ring is not None and mine and nbytes <= ring.slot_bytes and ring.slots == slots:
        return ring
    grown = mine and ring is not None and nbytes > ring.slot_bytes
    slot_bytes = _aligned(max(_MIN_SLOT, nbytes + (nbytes // 2 if grown else nbytes // 8)))
    if slot_bytes > _MAX_SLOT:
        return None
    _RING = _Ring(slot_bytes, slots)
    return _RING


def _leaf_nbytes(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, BytesArray):
        return int(value.nbytes)
    if _is_plain_tensor(value):
        return int(value.numel()) * int(value.element_size())
    return 0


def _is_plain_tensor(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and type(value) is torch.Tensor
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and not value.requires_grad
        and not value.is_quantized
        and not value.is_nested
    )


def _walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to each leaf. Only plain dicts, lists and tuples are
    descended into: any other container is a leaf, left as it is, so its type survives."""
    kind = type(value)
    if kind is dict:
        return {k: _walk(v, leaf) for k, v in value.items()}
    if kind is list:
        return [_walk(v, leaf) for v in value]
    if kind is tuple:
        return tuple(_walk(v, leaf) for v in value)
    return leaf(value)


def _total(batch: Any) -> int:
    """Aligned bytes the packable leaves of ``batch`` take in a slot."""
    sizes: list[int] = []
    _walk(batch, lambda v: sizes.append(_aligned(_leaf_nbytes(v))))
    return sum(sizes)


class _Writer:
    """Copies leaves into one slot and replaces them by references."""

    def __init__(self, slot: np.ndarray) -> None:
        self.slot = slot
        self.tensor_slot = torch.from_numpy(slot)
        self.offset = 0

    def put(self, batch: Any) -> Any:
        """``batch`` with its tensors and bytes values copied into the slot."""
        return _walk(batch, self._leaf)

    def _leaf(self, value: Any) -> Any:
        if isinstance(value, (bytes, BytesArray)):
            raw = np.frombuffer(value, dtype=np.uint8) if isinstance(value, bytes) else value
            start, n = self.offset, len(raw)
            self.slot[start : start + n] = raw
            self.offset = _aligned(start + n)
            return _Leaf("bytes", start, n, None, None)
        if _is_plain_tensor(value):
            start, n = self.offset, _leaf_nbytes(value)
            if n:
                flat = value.resolve_conj().resolve_neg().contiguous().reshape(-1)
                self.tensor_slot[start : start + n].copy_(flat.view(torch.uint8))
            self.offset = _aligned(start + n)
            return _Leaf("tensor", start, n, value.dtype, tuple(value.shape))
        return value


class _Leaf(NamedTuple):
    """A reference into a slot."""

    kind: str  # "bytes" or "tensor"
    offset: int
    nbytes: int
    dtype: Any  # torch dtype of a tensor
    shape: Any  # tuple shape of a tensor


class Packed:
    """A batch whose bulk lives in a worker's ring slot; unpickling it yields the batch."""

    __slots__ = ("_ring", "_skeleton", "_slot", "_slot_bytes", "_token")

    def __init__(
        self, token: str, ring: Any, slot_bytes: int, slot: int, skeleton: Any
    ) -> None:
        self._token = token
        self._ring = ring
        self._slot_bytes = slot_bytes
        self._slot = slot
        self._skeleton = skeleton

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (unpack, (self._token, self._ring, self._slot_bytes, self._slot, self._skeleton))


def pack(batch: Any, slots: int = _SLOTS) -> Any:
    """In a DataLoader worker, ``batch`` as a :class:`Packed`; else, or when the ring has
    no room, ``batch`` itself (a :class:`~mrecord.block.BytesArray` leaf, a bytes value
    viewing the file, always arrives as ``bytes``). ``slots``: the loader's
    ``prefetch_factor`` (the worker's ring has that many slots, at most 16)."""
    if torch.utils.data.get_worker_info() is None:
        return _plain(batch)
    nbytes = _total(batch)
    ring = _worker_ring(nbytes, max(1, min(_MAX_SLOTS, slots))) if nbytes else None
    slot = ring.claim() if ring is not None else None
    if ring is None or slot is None:
        return _plain(batch)
    skeleton = _Writer(ring.slot_view(slot)).put(batch)
    carried = None if ring.sent else ring.tensor
    ring.sent = True
    return Packed(ring.token, carried, ring.slot_bytes, slot, skeleton)


def _plain(batch: Any) -> Any:
    return _walk(batch, lambda v: v.tobytes() if isinstance(v, BytesArray) else v)


# --- the main process --------------------------------------------------------------------------


class _Attached:
    def __init__(self, tensor: Any, slot_bytes: int) -> None:
        self.tensor = tensor  # keeps the mapping alive
        self.bytes = tensor.numpy()
        self.state = self.bytes[:_STATE_BYTES].view(np.int64)
        self.slot_bytes = slot_bytes


_ATTACHED: dict[str, _Attached] = {}
_ATTACH_LOCK = threading.Lock()


def _attach(token: str, ring: Any, slot_bytes: int) -> _Attached:
    with _ATTACH_LOCK:
        if ring is not None:
            pid = token.split("-", 1)[0]
            for old in list(_ATTACHED):
                old_pid = old.split("-", 1)[0]
                if old_pid == pid or not _alive(int(old_pid)):
                    del _ATTACHED[old]
            _ATTACHED[token] = _Attached(ring, slot_bytes)
        attached = _ATTACHED.get(token)
    if attached is None:
        raise PipelineError(
            f"a DataLoader batch refers to shared-memory ring {token!r}, which this process "
            "never received: batches of mrecord.torch must be unpickled in the order a worker "
            "sent them, once"
        )
    return attached


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(value: Any, slot: np.ndarray) -> Any:
    if not isinstance(value, _Leaf):
        return value
    kind, start, n, dtype, shape = value
    if kind == "bytes":
        return slot[start : start + n].tobytes()
    out = torch.empty(shape, dtype=dtype)
    if n:
        out.reshape(-1).view(torch.uint8).copy_(torch.from_numpy(slot[start : start + n]))
    return out


def unpack(token: str, ring: Any, slot_bytes: int, slot: int, skeleton: Any) -> Any:
    """Copy a packed batch out of its slot and free the slot (runs when it is unpickled)."""
    attached = _attach(token, ring, slot_bytes)
    start = _STATE_BYTES + slot * attached.slot_bytes
    data = attached.bytes[start : start + attached.slot_bytes]
    batch = _walk(skeleton, lambda v: _read(v, data))
    _fence()
    attached.state[slot] = 0
    return batch


def _fence() -> None:
    """Order the copies above before the store that frees the slot (a no-op on x86; on
    weaker memory models a lock's release/acquire pair is a full barrier)."""
    lock = threading.Lock()
    lock.acquire()
    lock.release()
    lock.acquire()


# --- collation -----------------------------------------------------------------------------------


def _stack(batch: list[Any], *, collate_fn_map: Any = None) -> Any:
    # torch's own tensor collation allocates a fresh shared-memory tensor in a worker; the
    # ring replaces that, so stack into ordinary memory.
    return torch.stack(batch, 0)


def _collate_map() -> dict[Any, Any]:
    from torch.utils.data._utils.collate import default_collate_fn_map

    return {**default_collate_fn_map, torch.Tensor: _stack}


def collate(samples: list[Any], *, slots: int = _SLOTS) -> Any:
    """``torch.utils.data.default_collate`` (same output), sent to the main process through a
    reused shared-memory ring when called in a DataLoader worker: pass it as ``collate_fn``
    (``slots``: as for :func:`pack`; a loader with a ``prefetch_factor`` above 2 passes
    it with ``functools.partial``).
    """
    from torch.utils.data._utils.collate import collate as torch_collate

    return pack(torch_collate(samples, collate_fn_map=_collate_map()), slots)
