"""``StreamingDataset``: an mrecord dataset as a resumable ``torch.utils.data.IterableDataset``.

::

    ds = StreamingDataset("train.mrecord", shuffle=Shuffle.GLOBAL, seed=0, batch_size=64)
    loader = StreamingDataLoader(ds, num_workers=4)
    for epoch in range(start_epoch, epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...

Which samples a rank and a worker deliver is the pure function of
:mod:`mrecord.torch.plan`; reads are one ``DatasetReader.read_rows`` per chunk of
batches. The epoch and the stream position to start from live in a small shared
tensor, so ``set_epoch`` / ``load_state_dict`` reach persistent DataLoader workers too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, CheckpointError
from mrecord.sampling import Shuffle, parse_shuffle, scattered_ids
from mrecord.torch._common import (
    DatasetFiles,
    ReaderHandle,
    block_batch,
    block_samples,
    in_worker,
    resolve_topology,
    torch,
)
from mrecord.torch.audit import record_skips
from mrecord.torch.checkpoint import Checkpoint, fingerprint
from mrecord.torch.plan import TAILS, RankPlan, StreamSpec, Tail, sample_rng
from mrecord.torch.skips import SkipLog, scan_windows, substitutes
from mrecord.torch.transport import collate, pack

__all__ = ["StreamingDataset", "Transform"]

Transform = Callable[[dict[str, Any], np.random.Generator], Any]
"""``transform(sample, rng)``: ``rng`` is the sample's own generator (see ``sample_rng``)."""

_READ_ROWS = 4096
_READ_BYTES = 4 << 20
"""A worker reads whole batches per ``read_rows`` call: up to ``_READ_ROWS`` rows and about
``_READ_BYTES`` bytes (measured on the previous read), at least one batch."""


class StreamingDataset(torch.utils.data.IterableDataset[Any]):
    """Stream an mrecord dataset to PyTorch, split over ranks and DataLoader workers.

    Args:
        dataset_files: one shard file (its siblings are read too) or a list of files.
        columns: columns to read (default all).
        shuffle: a :class:`~mrecord.Shuffle` mode, ``True`` (GLOBAL), ``False`` (file
            order) or ``None`` (ADAPTIVE).
        seed: the order and the per-sample transform randomness derive from it.
        batch_size: per-rank batch size. Whole batches are dealt to workers round-robin
            so a rank's stream does not depend on ``num_workers``; needed for resume
            (``StreamingDataLoader`` fills it in from its own ``batch_size``).
        drop_last: drop each rank's last, short batch.
        transform: ``transform(sample, rng) -> sample``; ``rng`` is a numpy Generator
            seeded from (seed, epoch, stream position): never worker RNG state.
        num_canonical_nodes: ``C`` canonical partitions of the order (default 1); the
            stream is defined over them, not over the physical ranks, so any world size
            resumes it exactly. ``C == world_size`` gives each rank one contiguous run
            of the order (see :mod:`mrecord.torch.plan`).
        rank, world_size: override ``torch.distributed`` and ``RANK`` / ``WORLD_SIZE``.
        tail: ``"pad"`` (every rank ``ceil(R / W)`` samples, wrapping around, as
            MindSpore) or ``"drop"`` (``floor(R / W)``).
        audit_dir: record delivered sample ids there (see :mod:`mrecord.torch.audit`).
        verify, partial_window, adaptive_threshold: as for ``MindDataset``.
        storage_options: for a URL (``s3://...``): passed to fsspec, as for
            ``MindDataset`` (docs/REMOTE.md); DataLoader workers reopen with them.
        on_error: a read that meets a damaged chunk (``ChecksumError``, ...):
            ``"raise"`` (default) ends the pass with the error naming file, page and
            bytes; ``"skip"`` leaves that chunk's rows out (``"warn"`` also warns once
            per chunk), recorded in :attr:`skipped_rows`, :meth:`skip_report` and the
            audit. Batch and sample counts never change (DDP lockstep): see
            :mod:`mrecord.torch.skips` and docs/TORCH.md "Damaged data".
    """

    def __init__(
        self,
        dataset_files: DatasetFiles,
        columns: Sequence[str] | None = None,
        shuffle: bool | Shuffle | None = Shuffle.GLOBAL,
        seed: int = 0,
        batch_size: int | None = None,
        drop_last: bool = False,
        transform: Transform | None = None,
        num_canonical_nodes: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        *,
        tail: Tail = "pad",
        audit_dir: str | None = None,
        verify: str = "once",
        partial_window: int = 1_000_000,
        adaptive_threshold: int = 100_000_000,
        storage_options: Mapping[str, Any] | None = None,
        on_error: str = "raise",
    ) -> None:
        super().__init__()
        self._skips = SkipLog(on_error)
        if tail not in TAILS:
            raise ArgumentError(f"tail must be one of {TAILS!r}, got {tail!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ArgumentError(f"batch_size must be an int >= 1 or None, got {batch_size!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ArgumentError(f"seed must be an int >= 0, got {seed!r}")
        if num_canonical_nodes is not None and num_canonical_nodes < 1:
            raise ArgumentError(f"num_canonical_nodes must be >= 1, got {num_canonical_nodes!r}")
        self._handle = ReaderHandle(dataset_files, columns, verify, storage_options)
        names, counts = self._handle.fingerprint_parts()
        if sum(counts) == 0:
            raise ArgumentError(f"the dataset {names!r} has no rows")
        self.fingerprint = fingerprint(names, counts)
        self._explicit_nodes = num_canonical_nodes is not None
        self.spec = StreamSpec(
            file_row_counts=tuple(counts),
            shuffle=parse_shuffle(shuffle),
            seed=seed,
            num_canonical_nodes=num_canonical_nodes or 1,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.transform = transform
        self.tail: Tail = tail
        self.audit_dir = audit_dir
        self.resumed_from: tuple[int, int] | None = None
        """(epoch, samples_consumed) of the checkpoint this run resumed from (the audit's
        name for the run), or None."""
        self._args_topology = (rank, world_size)
        self.rank, self.world_size = resolve_topology(rank, world_size)
        # [pass epoch, pass start, epoch, consumed], shared so that persistent workers see
        # set_epoch / load_state_dict. Workers read the pass (fixed when a pass begins);
        # the loader's main process advances the progress as it hands out batches.
        state = torch.zeros(4, dtype=torch.int64)
        self._state = state.share_memory_()  # type: ignore[no-untyped-call]
        self._emit_batches = False
        self._ring_slots = 2  # its loader's prefetch_factor (mrecord.torch.transport.pack)
        self._skip = 0  # samples of this worker's share to skip (torchdata's worker resume)
        self._yielded: int | None = None  # samples this process yielded in the current pass
        self._worker = (0, 1)

    # -- epoch and resume ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next pass reads."""
        return int(self._state.numpy()[2])

    @property
    def samples_consumed(self) -> int:
        """Stream positions of this epoch already delivered (by all ranks together)."""
        return int(self._state.numpy()[3])

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next; a new epoch starts at its beginning, the current one
        continues where it was (so calling it after ``load_state_dict`` keeps the resume)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ArgumentError(f"epoch must be an int >= 0, got {epoch!r}")
        if epoch != self.epoch:
            self._set_position(epoch, 0)
        self.begin_pass()

    def _set_position(self, epoch: int, consumed: int) -> None:
        """Record delivery progress (the pass that workers read is not touched)."""
        if consumed >= self.spec.num_rows:
            epoch, consumed = epoch + 1, 0
        state = self._state.numpy()  # numpy item access: ~50x cheaper than a tensor's
        state[2] = epoch
        state[3] = consumed

    def begin_pass(self) -> None:
        """Make the next pass start at the current progress (StreamingDataLoader calls it)."""
        state = self._state.numpy()
        state[0:2] = state[2:4]

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint (a JSON-serialisable dict; see :mod:`mrecord.torch.checkpoint`).

        Inside a DataLoader worker that is iterating (torchdata's StatefulDataLoader
        asks there), it also says how far this worker got.
        """
        state = Checkpoint(
            epoch=self.epoch,
            seed=self.spec.seed,
            shuffle=self.spec.shuffle,
            samples_consumed=self.samples_consumed,
            global_batch=(self.batch_size or 1) * self.world_size,
            num_canonical_nodes=self.spec.num_canonical_nodes,
            fingerprint=self.fingerprint,
        ).to_dict()
        if self._yielded is not None:
            worker, workers = self._worker
            state["worker"] = {"id": worker, "num_workers": workers, "samples": self._yielded}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint of any rank, any world size, any ``num_workers``.

        Raises :class:`~mrecord.errors.CheckpointError` when it was written for another
        dataset (shard names, row counts), seed, shuffle mode or canonical node count.
        """
        ckpt = Checkpoint.from_dict(state)
        ckpt.check_dataset(self.fingerprint, self.spec.seed, self.spec.shuffle)
        nodes = self.spec.num_canonical_nodes
        if ckpt.num_canonical_nodes != nodes:
            if self._explicit_nodes:
                raise CheckpointError(
                    f"the checkpoint has num_canonical_nodes={ckpt.num_canonical_nodes!r}, "
                    f"this dataset {nodes!r}: leave it None to take the checkpoint's"
                )
            self.spec = replace(self.spec, num_canonical_nodes=ckpt.num_canonical_nodes)
        self._set_position(ckpt.epoch, ckpt.samples_consumed)
        self.resumed_from = (ckpt.epoch, ckpt.samples_consumed)
        self.begin_pass()
        worker = state.get("worker")
        self._skip = 0
        if isinstance(worker, dict):
            self._skip = self._worker_skip(worker)

    def _worker_skip(self, worker: dict[str, Any]) -> int:
        info = torch.utils.data.get_worker_info()
        current = (info.id, info.num_workers) if info is not None else (0, 1)
        if (worker.get("id"), worker.get("num_workers")) != current:
            raise CheckpointError(
                f"this per-worker state is for worker {worker.get('id')!r} of "
                f"{worker.get('num_workers')!r}, not {current[0]} of {current[1]}; drop its "
                "'worker' entry to resume elastically at the pass start"
            )
        return int(worker.get("samples", 0))

    # -- topology and plan -----------------------------------------------------------------------

    def refresh_topology(self) -> None:
        """Re-read rank and world size (after ``torch.distributed`` was initialised)."""
        self.rank, self.world_size = resolve_topology(*self._args_topology)

    def plan(self, start: int | None = None) -> RankPlan:
        """This rank's share of a pass starting at ``start`` (default: the progress)."""
        return RankPlan(
            num_rows=self.spec.num_rows,
            start=self.samples_consumed if start is None else start,
            rank=self.rank,
            world=self.world_size,
            batch_size=self.batch_size or 1,
            tail=self.tail,
            drop_last=self.drop_last,
        )

    def __len__(self) -> int:
        """Samples this rank yields in the next pass (batches, under StreamingDataLoader)."""
        plan = self.plan()
        return plan.num_batches if self._emit_batches else plan.count

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        # A worker sending whole batches copies bytes values from the file straight into
        # the shared-memory ring (transport.pack), skipping the bytes objects in between.
        views = in_worker() and self._emit_batches and self.transform is None
        info = torch.utils.data.get_worker_info()
        self._worker = (info.id, info.num_workers) if info is not None else (0, 1)
        worker, workers = self._worker
        epoch, start = (int(v) for v in self._state.numpy()[0:2])
        plan = self.plan(start)
        order = self.spec.order(epoch)
        skip, self._skip = self._skip, 0
        b = plan.batch_size
        batches = plan.worker_batches(worker, workers, skip // b)
        self._yielded = skip  # skipped samples count as yielded (torchdata resumes by count)
        per_read = 1
        reader = self._handle.reader
        # Shards read from a store by range requests evict by next use: tell them the
        # rows this worker reads in this pass, then in the next epoch's (as MindDataset).
        reader.plan_reads(
            lambda e: self._worker_ids(e, start, skip // b) if e == epoch else self._worker_ids(e),
            epoch,
        )

        # Small rows beyond memory in a random order: a window of them at a time, each
        # read in one pass over the files (DatasetReader.sweep_rows, as MindDataset).
        sweep = reader.sweep_rows(rows=len(batches) * b)  # at most that many rows
        swept = -1  # rows of the read that sweeps; the damage search's halves do not

        def read(ids: np.ndarray) -> Block:
            return reader.read_rows(ids, bytes_as_arrays=views, sweep=len(ids) == swept)

        first = 0
        while first < len(batches):
            group = batches[first : first + per_read]
            first += len(group)
            positions = np.concatenate([plan.batch_positions(i) for i in group])
            ids = self.spec.ids(order, positions)
            scattered = sweep and scattered_ids(ids)  # not file order
            swept = len(ids) if scattered else -1
            block, lost, errors = self._skips.read(read, ids)
            swept = -1
            row_bytes = max(1, _nbytes(block) // max(1, len(block)))
            per_read = max(1, min(_READ_ROWS, _READ_BYTES // row_bytes) // b)
            if scattered:
                per_read = max(1, sweep // b)
            # kept_before[k]: rows of `block` before position k of the group
            kept_before = np.concatenate([[0], np.cumsum(~lost)])
            offset = 0
            for i in group:
                size = len(plan.batch_positions(i))
                part = block.slice(int(kept_before[offset]), int(kept_before[offset + size]))
                pos = positions[offset : offset + size]
                gone = lost[offset : offset + size]
                if gone.any():
                    part, pos = self._around_damage(
                        read, (block, ids[~lost]), part, pos, ids[offset : offset + size],
                        gone, errors, offset, (plan, order, epoch, i),
                    )
                offset += size
                yield from self._deliver(
                    part, pos, epoch, skip % b if i == batches[0] else 0, size
                )

    def _worker_ids(self, epoch: int, start: int = 0, skip_batches: int = 0) -> np.ndarray:
        """The global ids this worker reads in a pass over ``epoch`` from stream position
        ``start`` (its first ``skip_batches`` batches skipped), in read order."""
        plan = self.plan(start)
        worker, workers = self._worker
        b = plan.batch_size
        local = np.arange(plan.count, dtype=np.int64)
        batch = local // b
        mine = local[(batch % workers == worker) & (batch >= worker + skip_batches * workers)]
        positions = plan.start + plan.rank + plan.world * mine
        return self.spec.ids(self.spec.order(epoch), positions)

    def _around_damage(
        self,
        read: Callable[[np.ndarray], Block],
        group_rows: tuple[Block, np.ndarray],
        part: Block,
        positions: np.ndarray,
        ids: np.ndarray,
        gone: np.ndarray,
        errors: dict[int, str],
        offset: int,
        where: tuple[RankPlan, Any, int, int],
    ) -> tuple[Block, np.ndarray]:
        """A batch some of whose rows were skipped as damaged: ``(block, positions)`` to
        deliver, by the policy of :mod:`mrecord.torch.skips` (never fewer batches or
        samples than the plan), recorded for the audit."""
        plan, order, epoch, batch = where
        group, group_ids = group_rows
        messages = [errors.get(offset + int(k), "") for k in np.flatnonzero(gone)]
        if self._emit_batches and len(part):
            # A whole batch travels: it is delivered shorter, without the damaged rows.
            self._audit_skips(epoch, positions[gone], ids[gone], None, messages)
            return part, positions[~gone]
        need = int(gone.sum())
        if len(part) or len(group):
            # Replace from the read's good rows, the batch's own first.
            pool, pool_ids = (part, ids[~gone]) if len(part) else (group, group_ids)
            pick = np.arange(need) % len(pool)
            subs_block, found = pool.take(pick), pool_ids[pick]
        else:
            # No good row in this read: the rank's next readable samples, wrapping around.
            count = plan.count
            found = substitutes(
                read,
                scan_windows(
                    count,
                    (batch + 1) * plan.batch_size % max(1, count),
                    lambda local: self.spec.ids(order, plan.start + plan.rank + plan.world * local),
                ),
                need,
                f"rank {plan.rank}'s share of epoch {epoch}",
            )
            subs_block = read(found)
        # The batch in its order: good rows where they were, substitutes where rows were lost.
        merged = Block.concat([part, subs_block])
        where_from = np.empty(len(gone), dtype=np.int64)
        where_from[~gone] = np.arange(len(part))
        where_from[gone] = len(part) + np.arange(need)
        self._audit_skips(epoch, positions[gone], ids[gone], found, messages)
        return merged.take(where_from), positions

    def _audit_skips(
        self,
        epoch: int,
        positions: np.ndarray,
        ids: np.ndarray,
        substituted: np.ndarray | None,
        messages: list[str],
    ) -> None:
        if self.audit_dir is not None:
            record_skips(
                self.audit_dir, epoch, self.rank, self.resumed_from, positions, ids,
                substituted, messages,
            )

    @property
    def skipped_rows(self) -> list[int]:
        """Row ids skipped as damaged so far (``on_error``), DataLoader workers included."""
        return self._skips.skipped_rows

    def skip_report(self) -> str:
        """How many rows ``on_error`` skipped, naming the damaged files and pages."""
        return self._skips.report()

    def _deliver(
        self, block: Any, positions: np.ndarray, epoch: int, skip: int, planned: int
    ) -> Iterator[Any]:
        if self.transform is None and self._emit_batches:
            self._yielded = (self._yielded or 0) + planned
            yield pack(block_batch(block), self._ring_slots)
            return
        samples = block_samples(block)
        if self.transform is not None:
            seed = self.spec.seed
            samples = [
                self.transform(s, sample_rng(seed, epoch, int(p)))
                for s, p in zip(samples, positions.tolist(), strict=True)
            ]
        if self._emit_batches:
            self._yielded = (self._yielded or 0) + planned
            yield collate(samples, slots=self._ring_slots)
            return
        for sample in samples[skip:]:
            self._yielded = (self._yielded or 0) + 1
            yield sample
        self._yielded = self._yielded or 0

    def __repr__(self) -> str:
        return (
            f"StreamingDataset(files={self.fingerprint['files']!r}, shuffle={self.spec.shuffle!r}, "
            f"seed={self.spec.seed}, batch_size={self.batch_size}, rank={self.rank}, "
            f"world_size={self.world_size})"
        )


def _nbytes(block: Any) -> int:
    """Payload bytes of a block (arrays and blobs)."""
    total = 0
    for values in block.columns.values():
        if isinstance(values, np.ndarray) and values.dtype != object:
            total += values.nbytes
        else:
            total += sum(len(v) if isinstance(v, (bytes, str)) else np.asarray(v).nbytes
                         for v in values)
    return total
