"""The source contract: the leaves of a pipeline (``MindDataset``, ``GeneratorDataset``...).

A source subclasses :class:`SourceDataset` and provides three methods::

    def _source_num_rows(self) -> int                 # rows per epoch, without reading data
    def _source_column_names(self) -> list[str]
    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]   # epoch: 0, 1, ...

``ctx`` is the running pipeline's :class:`~mrecord.pipeline.engine.context.ExecContext`: take
settings from it (``ctx.seed`` is the seed snapshot taken when the iterator was
created, never ``config.get_seed()`` read live), and its ``stop`` event for any
worker pool. Blocks may have any number of rows (a few hundred is typical); the pipeline never
assumes a size. ``epoch`` counts passes over the source, repeats included, so a
shuffling source reshuffles for every repeat. ``_iter_blocks`` runs in a pipeline
thread; it is closed early (``GeneratorExit``) when the consumer stops.
A source whose row count is only known by reading may return -1 from
``_source_num_rows``; ``get_dataset_size`` then counts rows with a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mrecord.block import Block
from mrecord.errors import ArgumentError, PipelineError

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

from mrecord.pipeline.dataset import Dataset

__all__ = ["SourceDataset"]


class SourceDataset(Dataset):
    """Base class of pipeline sources (see the module docstring for the contract)."""

    def __init__(self) -> None:
        super().__init__(())

    def _source_num_rows(self) -> int:
        """Rows per epoch without reading data (-1 when unknown)."""
        raise NotImplementedError

    def _source_column_names(self) -> list[str]:
        """Names of the columns the blocks hold."""
        raise NotImplementedError

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        """Yield the blocks of ``epoch`` (settings such as the seed come from ``ctx``)."""
        raise NotImplementedError

    def _use_sampler(self, sampler: Any) -> None:
        raise ArgumentError(
            f"{self!r} cannot take a sampler: it reads its rows in its own order "
            "(random-access sources such as MindDataset, Cifar10Dataset or a GeneratorDataset "
            "over an object with __getitem__ and __len__ can)"
        )

    def _column_names(self) -> list[str]:
        return list(self._source_column_names())

    def _num_rows(self) -> int | None:
        rows = self._source_num_rows()
        return None if rows < 0 else rows

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        names = self._column_names()
        for block in self._iter_blocks(ctx, epoch):
            ctx.check_stop()
            if block.column_names != names:
                raise PipelineError(
                    f"{self!r} yielded a block with columns {block.column_names!r}, "
                    f"expected {names!r}"
                )
            if len(block):
                yield block
