"""``bucket_batch_by_length``: batch rows of similar length together (MindSpore's rules).

A row's length is ``element_length_function(*values of column_names)``, or the first
dimension of the single named column. Bucket ``i`` holds lengths in
``[bucket_boundaries[i-1], bucket_boundaries[i])`` (bucket 0 from 0, the last one
unbounded) and is emitted as a batch as soon as it holds ``bucket_batch_sizes[i]`` rows;
at the end of the epoch the partly filled buckets follow in bucket order (dropped with
``drop_remainder``). Each batch pads its columns: ``pad_info`` ``{column: (shape, value)}``
(a ``None`` dimension or shape: the batch's longest), else every column to its longest
with 0 (``""`` for strings); ``pad_to_bucket_boundary`` pads the first dimension to the
bucket's upper boundary minus one instead (the last bucket: its longest).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, OperationError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.columns import as_name_list, to_numpy
from mrecord.transforms.array_ops import pad_to

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["BucketBatchDataset"]

PadInfo = dict[str, tuple[Sequence[int | None] | None, Any]]


class BucketBatchDataset(Dataset):
    """The node ``dataset.bucket_batch_by_length(...)`` makes (see the module docstring)."""

    def __init__(
        self,
        child: Dataset,
        column_names: str | Sequence[str],
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        element_length_function: Callable[..., int] | None = None,
        pad_info: PadInfo | None = None,
        pad_to_bucket_boundary: bool = False,
        drop_remainder: bool = False,
    ) -> None:
        names = as_name_list(column_names, "column_names")
        if not names:
            raise ArgumentError("column_names must name at least one column")
        bounds = [int(b) for b in bucket_boundaries]
        if not bounds or any(b <= 0 for b in bounds) or bounds != sorted(set(bounds)):
            raise ArgumentError(
                f"bucket_boundaries must be positive and strictly increasing, got {bounds!r}"
            )
        sizes = [int(s) for s in bucket_batch_sizes]
        if len(sizes) != len(bounds) + 1 or any(s <= 0 for s in sizes):
            raise ArgumentError(
                f"bucket_batch_sizes must hold len(bucket_boundaries) + 1 = {len(bounds) + 1} "
                f"positive sizes, got {sizes!r}"
            )
        if element_length_function is None and len(names) != 1:
            raise ArgumentError(
                "element_length_function is required when column_names names several columns"
            )
        self.names = names
        self.bounds = bounds
        self.sizes = sizes
        self.length_fn = element_length_function
        self.pad_info = dict(pad_info) if pad_info is not None else None
        self.pad_to_bucket_boundary = bool(pad_to_bucket_boundary)
        self.drop_remainder = bool(drop_remainder)
        super().__init__([child])

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        return None  # depends on the lengths: a pass counts it

    def _describe(self) -> str:
        return (
            f"BucketBatchByLength(column_names={self.names!r}, boundaries={self.bounds!r}, "
            f"batch_sizes={self.sizes!r})"
        )

    def _length(self, row: dict[str, Any]) -> int:
        values = [row[name] for name in self.names]
        if self.length_fn is None:
            return int(np.shape(values[0])[0]) if np.ndim(values[0]) else 1
        try:
            return int(self.length_fn(*values))
        except Exception as exc:
            raise OperationError(
                f"{self!r}: element_length_function raised {type(exc).__name__}: {exc}"
            ) from exc

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        columns = self._column_names()
        buckets: list[list[dict[str, Any]]] = [[] for _ in self.sizes]
        for block in self.children[0]._execute(ctx, epoch):
            cols = [block.columns[name] for name in columns]
            for i in range(len(block)):
                row = {name: to_numpy(col[i]) for name, col in zip(columns, cols, strict=True)}
                b = bisect.bisect_right(self.bounds, self._length(row))
                buckets[b].append(row)
                if len(buckets[b]) == self.sizes[b]:
                    yield self._batch(buckets[b], b, columns)
                    buckets[b] = []
        if not self.drop_remainder:
            for b, rows in enumerate(buckets):
                if rows:
                    yield self._batch(rows, b, columns)

    def _batch(self, rows: list[dict[str, Any]], bucket: int, columns: list[str]) -> Block:
        out: dict[str, ColumnValues] = {}
        for name in columns:
            values = [np.asarray(row[name]) for row in rows]
            if self.pad_info is not None and name not in self.pad_info:
                out[name] = np.stack(values)[None]
                continue
            shape, fill = (None, None) if self.pad_info is None else self.pad_info[name]
            target = list(np.max([v.shape for v in values], axis=0)) if values[0].ndim else []
            if shape is not None:
                target = [t if s is None else int(s) for s, t in zip(shape, target, strict=True)]
            if (
                self.pad_to_bucket_boundary
                and target
                and bucket < len(self.bounds)
                and (shape is None or shape[0] is None)
            ):
                target[0] = self.bounds[bucket] - 1
            out[name] = np.stack([pad_to(v, target, fill) for v in values])[None]
        return Block(out)
