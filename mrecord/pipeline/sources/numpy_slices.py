"""``NumpySlicesDataset``: rows sliced from in-memory arrays along the first axis.

``data`` is a dict of columns (names from the keys), a tuple of columns
(``column_0``, ``column_1``, ...), or one array / list (one column). Rows are read
a chunk at a time with one numpy gather per column. Like MindSpore, ``shuffle=None``
shuffles; pass ``shuffle=False`` for the stored order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError
from mrecord.pipeline.sources.generator import GeneratorDataset

__all__ = ["NumpySlicesDataset"]


def _columns(data: Any) -> tuple[list[str], list[Any]]:
    if isinstance(data, dict):
        return [str(k) for k in data], list(data.values())
    if isinstance(data, tuple):
        return [f"column_{i}" for i in range(len(data))], list(data)
    return ["column_0"], [data]


def _as_column(values: Any) -> ColumnValues:
    if isinstance(values, np.ndarray):
        return values
    arr = np.asarray(values) if isinstance(values, (list, tuple)) else None
    if arr is not None and arr.dtype != object:
        return arr
    return list(values)


class _Columns:
    """Random access over the columns (used when rows are read one by one)."""

    def __init__(self, columns: list[ColumnValues]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        return tuple(col[i] for col in self.columns)

    def __repr__(self) -> str:
        return f"<{len(self.columns)} column(s) of {len(self)} rows>"


class NumpySlicesDataset(GeneratorDataset):
    """A source slicing in-memory columns (see the module docstring)."""

    def __init__(
        self,
        data: Any,
        column_names: str | Sequence[str] | None = None,
        *,
        num_samples: int | None = None,
        num_parallel_workers: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
    ) -> None:
        default_names, raw = _columns(data)
        if not raw:
            raise ArgumentError("data must hold at least one column, got an empty container")
        columns = [_as_column(values) for values in raw]
        lengths = {len(col) for col in columns}
        if len(lengths) != 1:
            raise ArgumentError(
                f"every column of data must have the same length, got lengths "
                f"{[len(c) for c in columns]!r} for columns {default_names!r}"
            )
        names = default_names if column_names is None else column_names
        if not isinstance(names, str) and len(names) != len(columns):
            raise ArgumentError(
                f"column_names {names!r} has {len(names)} names for {len(columns)} columns"
            )
        self._cols = columns
        super().__init__(
            _Columns(columns),
            names,
            num_samples=num_samples,
            num_parallel_workers=num_parallel_workers,
            shuffle=shuffle,
            sampler=sampler,
            num_shards=num_shards,
            shard_id=shard_id,
        )

    def _read_indices(self, ids: np.ndarray) -> Block:
        cols: dict[str, ColumnValues] = {}
        for name, col in zip(self.column_names, self._cols, strict=True):
            if isinstance(col, np.ndarray):
                cols[name] = col[ids]
            else:
                cols[name] = [col[i] for i in ids.tolist()]
        return Block(cols, np.asarray(ids, dtype=np.int64))
