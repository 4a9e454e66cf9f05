"""Which global row ids a rank and a worker deliver: pure functions, no torch, no I/O.

One epoch is a **stream** of sample positions ``0, 1, 2, ...`` that does not depend on
the topology (world size, workers, batch size)::

    order   = shuffle_order(mode, file_row_counts, seed, epoch)     # mrecord's shuffle modes
    stream  = order read through C canonical partitions            # C = num_canonical_nodes
    rank r  of W, resumed at position c:  positions c + r, c + r + W, c + r + 2W, ...
    worker w of K (batches of b):          that rank's batches w, w + K, w + 2K, ...

- **Canonical partitions.** The order (length N) is cut into ``C`` contiguous
  partitions, partition ``j`` holding ``ceil((N - j) / C)`` positions; stream position
  ``q`` is index ``q // C`` of partition ``q % C``. ``C = 1`` (the default) makes the
  stream the order itself, and the rank split is then exactly MindSpore's strided
  shard split. With ``W == C`` rank ``r`` reads partition ``r``, one contiguous run of
  the order (file locality under ``Shuffle.FILES`` / ``INFILE`` / ``PARTIAL``). Either
  way the stream is a pure function of (seed, epoch, sizes, mode, C): a checkpoint is
  one number, the stream positions consumed, and any world size can continue it.
- **Lockstep.** After every rank delivered ``k`` batches of ``b`` samples, the
  delivered positions are exactly ``[c, c + k * b * W)``: a prefix of the stream.
- **Tail.** ``R = N - c`` positions remain. ``tail="pad"`` (MindSpore's rule) gives
  every rank ``ceil(R / W)`` samples, positions past ``N`` wrapping around to the start
  of the stream (``q mod N``, at most ``W - 1`` repeated samples); ``tail="drop"``
  gives every rank ``floor(R / W)`` and leaves the last ``R mod W`` positions unread.
  ``drop_last`` then rounds each rank's count down to whole batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError
from mrecord.sampling import Order, Shuffle, derive_key, shuffle_order

IdArray = npt.NDArray[np.int64]
"""Stream positions or global row ids."""

__all__ = [
    "TAILS",
    "RankPlan",
    "StreamSpec",
    "Tail",
    "rank_count",
    "sample_rng",
]

Tail = Literal["pad", "drop"]
TAILS: tuple[Tail, ...] = ("pad", "drop")


@dataclass(frozen=True)
class StreamSpec:
    """What defines an epoch's stream: sizes, shuffle mode, seed and canonical partitions."""

    file_row_counts: tuple[int, ...]
    shuffle: Shuffle | None
    seed: int
    num_canonical_nodes: int = 1
    partial_window: int = 1_000_000
    adaptive_threshold: int = 100_000_000

    @property
    def num_rows(self) -> int:
        """Rows in the dataset (N)."""
        return int(sum(self.file_row_counts))

    def order(self, epoch: int) -> Order:
        """This epoch's order of the global row ids (mrecord's shuffle modes)."""
        return shuffle_order(
            self.shuffle,
            list(self.file_row_counts),
            self.seed,
            epoch,
            partial_window=self.partial_window,
            adaptive_threshold=self.adaptive_threshold,
        )

    def ids(self, order: Order, positions: IdArray) -> IdArray:
        """Global row ids at stream ``positions`` (positions past N wrap around)."""
        n = self.num_rows
        q = np.asarray(positions, dtype=np.int64) % n
        c = self.num_canonical_nodes
        if c > 1:
            sizes = (n - np.arange(c, dtype=np.int64) + c - 1) // c
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            q = starts[q % c] + q // c
        return order.take(q)


def rank_count(remaining: int, world: int, tail: Tail, batch_size: int, drop_last: bool) -> int:
    """Samples each rank delivers when ``remaining`` stream positions are left (module doc)."""
    per_rank = -(-remaining // world) if tail == "pad" else remaining // world
    if drop_last:
        per_rank -= per_rank % batch_size
    return max(0, per_rank)


@dataclass(frozen=True)
class RankPlan:
    """One rank's share of one pass over an epoch, starting at stream position ``start``."""

    num_rows: int
    start: int
    rank: int
    world: int
    batch_size: int
    tail: Tail = "pad"
    drop_last: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world:
            raise ArgumentError(
                f"rank must be in [0, world_size={self.world}), got rank={self.rank!r}"
            )
        if self.batch_size < 1:
            raise ArgumentError(f"batch_size must be >= 1, got {self.batch_size!r}")
        if self.tail not in TAILS:
            raise ArgumentError(f"tail must be one of {TAILS!r}, got {self.tail!r}")

    @property
    def count(self) -> int:
        """Samples this rank delivers in this pass."""
        remaining = max(0, self.num_rows - self.start)
        return rank_count(remaining, self.world, self.tail, self.batch_size, self.drop_last)

    @property
    def num_batches(self) -> int:
        """Batches this rank delivers (the last one may be short unless ``drop_last``)."""
        return -(-self.count // self.batch_size)

    @property
    def global_batch(self) -> int:
        """Stream positions consumed by one lockstep batch of every rank."""
        return self.batch_size * self.world

    def positions(self, first: int, stop: int) -> IdArray:
        """Stream positions of this rank's samples ``first:stop`` (rank-local indexes)."""
        stop = min(stop, self.count)
        local = np.arange(first, max(first, stop), dtype=np.int64)
        return self.start + self.rank + self.world * local

    def batch_positions(self, batch: int) -> IdArray:
        """Stream positions of this rank's batch number ``batch``."""
        b = self.batch_size
        return self.positions(batch * b, (batch + 1) * b)

    def worker_batches(self, worker: int, num_workers: int, skip: int = 0) -> range:
        """Batch numbers worker ``worker`` of ``num_workers`` delivers, round-robin.

        DataLoader collects batches from its workers in turn (0, 1, ..., K-1, 0, ...),
        so dealing batch ``i`` to worker ``i mod K`` keeps the rank's stream the same
        for every ``num_workers``. ``skip`` drops that many of the worker's first batches
        (torchdata's per-worker resume).
        """
        return range(worker + skip * num_workers, self.num_batches, num_workers)

    def consumed_after(self, batches: int) -> int:
        """Stream positions consumed once every rank delivered ``batches`` batches."""
        if batches >= self.num_batches:
            return max(self.num_rows, self.start + self.count * self.world)
        return self.start + batches * self.global_batch


def sample_rng(seed: int, epoch: int, position: int) -> np.random.Generator:
    """The random generator of one sample: a pure function of (seed, epoch, stream position).

    Random transforms draw from it instead of worker or global RNG state, so a
    sample's augmentation is the same for any world size, worker count or resume.
    """
    base = derive_key(seed, epoch, "mrecord.torch.transform")
    key = np.array([base, int(position) & ((1 << 64) - 1)], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))
