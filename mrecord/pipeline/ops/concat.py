"""``concat`` / ``+``: the rows of several datasets one after the other.

Every child must have the same column names in the same order. Each epoch runs
every child's same epoch in turn.

``use_sampler(DistributedSampler(k, s, shuffle=False))`` gives shard ``s`` one
contiguous block of every child: child ``j`` gets offset
``(sum of the sizes before it) % k`` so the remainders spread over the shards
(MindSpore's rule, ``mrecord.sampling.sharding.concat_shard_positions``). Children
smaller than ``k`` work (MindSpore crashes there). Sources that can read a range
of their order directly (``MindDataset``) read only their block.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mrecord.block import Block
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.effects import ColumnEffects
from mrecord.sampling import DistributedSampler, concat_shard_positions

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["ConcatDataset"]


class ConcatDataset(Dataset):
    """The node ``a + b`` / ``a.concat([b, c])`` makes."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        if len(datasets) < 2:
            raise WrongTypeError(f"concat needs at least two datasets, got {list(datasets)!r}")
        flat: list[Dataset] = []
        for ds in datasets:
            if not isinstance(ds, Dataset):
                raise WrongTypeError(f"concat takes datasets, got {ds!r} ({type(ds).__name__})")
            flat.append(ds)
        super().__init__(flat)
        self._sampler: Any = None

    def use_sampler(self, sampler: Any) -> None:
        """Split every child across shards with a ``DistributedSampler(k, s, shuffle=False)``."""
        if not isinstance(sampler, DistributedSampler):
            raise WrongTypeError(
                f"ConcatDataset.use_sampler takes a DistributedSampler, got {sampler!r}"
            )
        if sampler.shuffle is not False:
            raise ArgumentError(
                "ConcatDataset.use_sampler needs DistributedSampler(..., shuffle=False): each "
                "shard takes a contiguous block of every child; shuffle afterwards with "
                ".shuffle(buffer_size)"
            )
        if sampler.get_num_samples() is not None:
            raise ArgumentError(
                "ConcatDataset.use_sampler does not support num_samples; use take()"
            )
        for child in self._leaves():
            if child._num_rows() is None:
                raise ArgumentError(
                    f"ConcatDataset.use_sampler needs the size of every child; {child!r} has none"
                )
        self._sampler = sampler

    def _use_sampler(self, sampler: Any) -> None:
        self.use_sampler(sampler)

    def _leaves(self) -> list[Dataset]:
        """The children with nested concats flattened (``a + b + c`` has three leaves)."""
        leaves: list[Dataset] = []
        for child in self.children:
            if isinstance(child, ConcatDataset) and child._sampler is None:
                leaves.extend(child._leaves())
            else:
                leaves.append(child)
        return leaves

    def _ranges(self) -> list[tuple[int, int]] | None:
        if self._sampler is None:
            return None

        sizes = [child._num_rows() or 0 for child in self._leaves()]
        ranges = concat_shard_positions(sizes, self._sampler.num_shards, self._sampler.shard_id)
        return [(r.start, r.stop) for r in ranges]

    def _validate(self) -> None:
        first = self.children[0]._column_names()
        for child in self.children[1:]:
            names = child._column_names()
            if names != first:
                raise PipelineError(
                    f"concat needs the same columns in every dataset: {self.children[0]!r} has "
                    f"{first!r} but {child!r} has {names!r}; use project/rename to align them"
                )

    def _column_effects(self) -> ColumnEffects:
        return ColumnEffects(joins=True)

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        ranges = self._ranges()
        if ranges is not None:
            return sum(stop - start for start, stop in ranges)
        sizes = [child._num_rows() for child in self.children]
        if any(s is not None and s < 0 for s in sizes):
            return -1
        if any(s is None for s in sizes):
            return None
        return sum(s for s in sizes if s is not None)

    def _describe(self) -> str:
        return f"Concat({len(self.children)} datasets)"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        ranges = self._ranges()
        if ranges is None:
            for child in self.children:
                yield from child._execute(ctx, epoch)
            return
        for child, (start, stop) in zip(self._leaves(), ranges, strict=True):
            if stop > start:
                yield from _child_range(child, ctx, epoch, start, stop)


def _child_range(
    child: Dataset, ctx: ExecContext, epoch: int, start: int, stop: int
) -> Iterator[Block]:
    """Rows ``start:stop`` of a child's epoch (read directly when the source can)."""
    for block in child._iter_blocks_range(ctx, epoch, start, stop):
        ctx.check_stop()
        yield block
