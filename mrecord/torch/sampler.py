"""``PermutationSampler``: a shuffled order of a map-style dataset, never held whole.

torch's ``RandomSampler`` and ``DistributedSampler`` build ``torch.randperm(n).tolist()``
each epoch: a Python int per row (~36 bytes), 216 MB for 6M rows in the loader's main
process. A ``MapDataset`` under a ``DataLoader(shuffle=True)`` over 6M rows was
OOM-killed in a 400 MB memory group (1,069 MB unconstrained), where the reader itself
needs a few MB. This sampler draws the epoch's keyed permutation
(:class:`~mrecord.sampling.order.PermutationOrder`: each position's id computed from
(seed, epoch), nothing stored) a chunk of positions at a time::

    sampler = PermutationSampler(ds, seed=0)                  # or num_replicas=, rank=
    loader = DataLoader(ds, batch_size=256, sampler=sampler, num_workers=4)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)                              # optional, see below
        for batch in loader: ...

Each pass is a permutation of every row; without :meth:`set_epoch` each pass takes the
next epoch (as ``RandomSampler`` draws a new order each time), with it the given one (as
``DistributedSampler``). Ranks split an epoch as ``DistributedSampler`` does: rank ``r``
takes positions ``r, r + num_replicas, ...``, the epoch padded from its start to a
multiple of ``num_replicas`` (or cut, ``drop_last``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

import numpy as np

from mrecord.errors import ArgumentError
from mrecord.sampling.order import PermutationOrder
from mrecord.sampling.permutation import derive_key
from mrecord.torch._common import torch

__all__ = ["PermutationSampler"]

_CHUNK = 1 << 16
"""Positions computed at a time (~2.6 MB of Python ints handed out)."""


class PermutationSampler(torch.utils.data.Sampler[int]):
    """A shuffled order of ``len(data_source)`` rows from ``seed`` and the epoch, a chunk at
    a time (see the module docstring)."""

    def __init__(
        self,
        data_source: Sized,
        *,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
    ) -> None:
        for name, value, low in (("num_replicas", num_replicas, 1), ("rank", rank, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(f"{name} must be an int >= {low}, got {value!r}")
        if rank >= num_replicas:
            raise ArgumentError(f"rank must be in [0, {num_replicas}), got {rank!r}")
        self.rows = len(data_source)
        self.seed = int(seed)
        self.num_replicas = num_replicas
        self.rank = rank
        per_rank = self.rows / num_replicas
        self.num_samples = int(per_rank) if drop_last else math.ceil(per_rank)
        self._epoch = 0
        self._fixed = False  # set_epoch called: every pass takes that epoch

    def set_epoch(self, epoch: int) -> None:
        """Take epoch ``epoch``'s order from now on (each pass the same one)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ArgumentError(f"epoch must be an int >= 0, got {epoch!r}")
        self._epoch, self._fixed = epoch, True

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        epoch = self._epoch
        if not self._fixed:
            self._epoch += 1
        if not self.rows:
            return
        order = PermutationOrder(self.rows, derive_key(self.seed, epoch, "torch-sampler"))
        for lo in range(0, self.num_samples, _CHUNK):
            hi = min(self.num_samples, lo + _CHUNK)
            positions = self.rank + self.num_replicas * np.arange(lo, hi, dtype=np.int64)
            # padding (positions past the rows) wraps to the epoch's start
            yield from order.take(positions % self.rows).tolist()
