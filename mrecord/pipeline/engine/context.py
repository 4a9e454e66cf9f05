"""The state one running pipeline shares between its nodes (an :class:`ExecContext`).

An iterator builds one context: the settings read at creation time (seed,
prefetch size, default worker count, the bytes its queues may hold), every node's
position, the offload plan, where nodes resume (:meth:`ExecContext.take_resume`), the
stop event, and the worker pools, which live as long as the iterator and are shut down
by :meth:`ExecContext.close`, and what nodes asked to run then
(:meth:`ExecContext.at_close`).

Resume positions live here, in the run, and never on the dataset's nodes: two
iterators over one dataset each skip only what their own state says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mrecord import config
from mrecord.pool import PoolStopped
from mrecord.storage.probe import memory_budget

if TYPE_CHECKING:
    from mrecord.pipeline.dataset import Dataset
    from mrecord.pipeline.engine.graph import Graph

__all__ = [
    "PREFETCH_BUDGET_SHARE",
    "ExecContext",
    "PipelineStopped",
    "Pool",
    "ResumePositions",
    "close_iterator",
]

PREFETCH_BUDGET_SHARE = 8
"""What a pipeline keeps ahead of its consumer stops at ``1 / PREFETCH_BUDGET_SHARE`` of
the memory budget (``mrecord.storage.probe.memory_budget``: the memory group's limit less
what is charged to it, or the machine's available memory), asked when a run starts: the
iterator's queue of output blocks and a map's finished chunks each (``prefetch_bytes``),
as well as their counts (``prefetch``). Counted in blocks only, a map making 150 KB values
ahead of ``batch(256)`` queued 16 batches of 38 MB behind a slow consumer and was
OOM-killed in a 763 MB group (2026-11-29, tests/pipeline/test_prefetch_memory.py). An
eighth each, beside the reader's read-ahead (another eighth, a ``MindDataset``'s), leaves
the rest to what no queue counts: a batch being put together, the consumer's, the
allocator's free lists (that run: a quarter each, still killed; an eighth each, a peak
of 651 MB)."""

ResumePositions = Mapping[int, tuple[int, int]]
"""``id(node) -> (epoch, rows)``: where each node of a run starts (what
:meth:`~mrecord.pipeline.dataset.Dataset.resume_positions` computes from a saved state)."""


def close_iterator(it: object) -> None:
    """Close a generator early (runs its ``finally`` blocks); other iterators are left."""
    close = getattr(it, "close", None)
    if close is not None:
        close()


PipelineStopped = PoolStopped
"""Raised inside the pipeline's own threads to unwind them once stop is requested (the
pool's :class:`~mrecord.pool.PoolStopped`, so a pool's stop unwinds the pipeline too)."""


class Pool(Protocol):
    """A worker pool: shut down once when the pipeline stops."""

    def shutdown(self) -> None:
        """Stop the workers and free what they hold."""


class ExecContext:
    """Everything a running pipeline shares (see the module docstring)."""

    def __init__(self, graph: Graph, resume: ResumePositions | None = None) -> None:
        self.graph = graph
        self.seed = config.get_seed()
        self.prefetch = config.get_prefetch_size()
        budget = memory_budget()
        self.memory_budget: int | None = budget
        """The memory budget asked when the run started (None: none known)."""
        self.prefetch_bytes: int | None = (
            None if budget is None else max(1, budget // PREFETCH_BUDGET_SHARE)
        )
        """The bytes the iterator's queue and a map's finished chunks may each hold (None:
        no budget known, counts only)."""
        self.default_workers = config.get_num_parallel_workers()
        self.stop = threading.Event()
        # The iterator's epoch (repeats inside it do not count): BatchInfo.get_epoch_num().
        self.epoch = 0
        self._pools: dict[int, Any] = {}
        self._at_close: dict[int, Callable[[], object]] = {}
        self._resume = dict(resume or {})
        self._lock = threading.Lock()
        self._closed = False

    def position(self, node: Dataset) -> int:
        """The node's post-order index (stable when nodes are added above it)."""
        return self.graph.positions[id(node)]

    def take_resume(self, node: Dataset, epoch: int) -> int:
        """Rows of ``epoch`` the node skips before its first output (0 when it does not
        resume there). The position is used by the node's first run of that epoch only."""
        with self._lock:
            at = self._resume.get(id(node))
            if at is None or at[0] != epoch:
                return 0
            del self._resume[id(node)]
            return at[1]

    def check_stop(self) -> None:
        """Raise :class:`PipelineStopped` once stop was requested."""
        if self.stop.is_set():
            raise PipelineStopped

    def pool(self, node: Dataset | object, factory: Callable[[], Any]) -> Any:
        """The node's worker pool, made on first use and reused for every epoch (a node
        with a second pool names it by an object of its own)."""
        with self._lock:
            if self._closed:
                raise PipelineStopped
            pool = self._pools.get(id(node))
            if pool is None:
                pool = factory()
                self._pools[id(node)] = pool
            return pool

    def at_close(self, key: object, callback: Callable[[], object]) -> None:
        """Run ``callback`` once when the run ends, after its pools are shut down (a
        source giving back memory its reads kept); a second call with the same ``key``
        changes nothing, and nothing runs for a run already closed."""
        with self._lock:
            if not self._closed:
                self._at_close.setdefault(id(key), callback)

    def close(self) -> None:
        """Set stop, shut every pool down, then run the callbacks of :meth:`at_close`
        (idempotent)."""
        self.stop.set()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pools = list(self._pools.values())
            self._pools.clear()
            callbacks = list(self._at_close.values())
            self._at_close.clear()
        for pool in reversed(pools):
            pool.shutdown()
        for callback in callbacks:
            callback()
