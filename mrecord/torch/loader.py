"""``StreamingDataLoader``: a torch ``DataLoader`` with ``state_dict`` / ``load_state_dict``.

It counts the batches its main process has handed out; since ranks move in
lockstep, ``start + batches * batch_size * world_size`` stream positions are then
delivered over all ranks, and that one number (in the checkpoint dict) resumes any
topology. Without a ``collate_fn`` the workers yield whole batches already collated
from one vectorized read (fixed-width columns as tensors, others as lists), which is
the same stream as per-sample collation, only faster.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.torch._common import torch
from mrecord.torch.audit import AuditLog
from mrecord.torch.streaming import StreamingDataset

__all__ = ["StreamingDataLoader"]


class StreamingDataLoader(torch.utils.data.DataLoader[Any]):
    """A DataLoader over a :class:`StreamingDataset` whose position can be saved and restored.

    ``batch_size`` defaults to the dataset's; both given and different is an error.
    Other keyword arguments go to ``DataLoader`` (``num_workers``, ``pin_memory``,
    ``persistent_workers``, ``prefetch_factor``, ...); ``sampler`` and ``shuffle`` are
    not accepted (the dataset orders itself).
    """

    def __init__(
        self,
        dataset: StreamingDataset,
        batch_size: int | None = None,
        *,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(dataset, StreamingDataset):
            raise WrongTypeError(
                f"StreamingDataLoader needs a mrecord.torch.StreamingDataset, got "
                f"{type(dataset).__name__}; use torch's DataLoader for other datasets"
            )
        for bad in ("sampler", "batch_sampler", "shuffle", "drop_last"):
            if bad in kwargs:
                raise ArgumentError(
                    f"StreamingDataLoader does not take {bad}=: give shuffle / drop_last to "
                    "the StreamingDataset, which orders and splits itself"
                )
        b = batch_size if batch_size is not None else dataset.batch_size
        if b is None:
            b = 1
        if dataset.batch_size is not None and dataset.batch_size != b:
            raise ArgumentError(
                f"batch_size={batch_size!r} differs from the dataset's "
                f"batch_size={dataset.batch_size!r}; give it in one place"
            )
        # A shallow copy shares the reader and the shared epoch/position tensor, so the
        # caller's dataset.set_epoch / state_dict see what this loader does.
        ds = copy.copy(dataset)
        ds.batch_size = b
        ds._emit_batches = collate_fn is None
        # a worker has up to prefetch_factor batches in flight: its ring's slots
        ds._ring_slots = int(kwargs.get("prefetch_factor") or 2)
        self.user_dataset = dataset
        self._stream = ds
        if ds._emit_batches:
            super().__init__(ds, batch_size=None, **kwargs)
        else:
            super().__init__(ds, batch_size=b, collate_fn=collate_fn, drop_last=False, **kwargs)

    def __len__(self) -> int:
        """Batches this rank gets in the next pass."""
        return self._stream.plan().num_batches

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        ds = self._stream
        ds.refresh_topology()
        self.user_dataset.rank, self.user_dataset.world_size = ds.rank, ds.world_size
        ds.begin_pass()
        plan, epoch = ds.plan(), ds.epoch
        log = None
        if ds.audit_dir is not None:
            log = AuditLog(ds.audit_dir, ds.rank, ds.spec.num_rows, ds.resumed_from)
            order = ds.spec.order(epoch)
        if plan.num_batches == 0:
            ds._set_position(epoch, ds.spec.num_rows)
            return
        for index, batch in enumerate(super().__iter__()):
            if log is not None:
                positions = plan.batch_positions(index)
                log.record(epoch, positions, ds.spec.ids(order, positions))
            ds._set_position(epoch, plan.consumed_after(index + 1))
            yield batch

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint: the same small dict on every rank (see ``docs/TORCH.md``)."""
        state = self._stream.state_dict()
        state.pop("worker", None)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (any rank's, any topology's) at the next ``iter()``."""
        self._stream.load_state_dict({k: v for k, v in state.items() if k != "worker"})
