"""Per-field statistics of a dataset, computed a chunk of rows at a time (``mrecord stats``,
and ``GET /api/datasets/{name}/stats`` of ``mrecord serve``).

- every field: ``count``;
- numbers (scalars and arrays, over all elements): ``min``, ``max``, ``mean``
  (NaN ignored, ``nan_count`` reported for floats);
- bytes and strings (length in bytes / characters), and variable-shape arrays
  (elements per row): ``min``/``max``/``mean`` length and percentiles p50/p90/p99;
- integer scalar fields used as labels: a histogram (value → rows).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = ["FieldStats", "compute_stats"]

_MAX_CLASSES = 1000


@dataclass
class FieldStats:
    """Running statistics of one field."""

    name: str
    type: str
    count: int = 0
    elements: int = 0
    total: float = 0.0
    minimum: float | None = None
    maximum: float | None = None
    nan_count: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    """Rows by length: one entry a distinct length, not one a row (6M file names' lengths
    kept and sorted got ``mrecord stats`` OOM-killed in a 150 MB memory group)."""
    histogram: Counter[int] | None = None

    def add_lengths(self, lengths: np.ndarray) -> None:
        """Count the lengths of a block's values."""
        if lengths.size:
            found, counts = np.unique(lengths, return_counts=True)
            self.lengths.update(dict(zip(found.tolist(), counts.tolist(), strict=True)))

    def add_numbers(self, values: np.ndarray) -> None:
        """Fold numeric values (any shape) into min/max/mean."""
        flat = np.asarray(values).reshape(-1)
        if flat.dtype.kind == "f":
            nans = np.isnan(flat)
            self.nan_count += int(nans.sum())
            flat = flat[~nans]
        if flat.size == 0:
            return
        lo, hi = flat.min(), flat.max()
        self.minimum = _num(lo) if self.minimum is None else min(self.minimum, _num(lo))
        self.maximum = _num(hi) if self.maximum is None else max(self.maximum, _num(hi))
        self.total += float(flat.sum(dtype=np.float64))
        self.elements += int(flat.size)

    def to_dict(self) -> dict[str, Any]:
        """The statistics as JSON-able values."""
        out: dict[str, Any] = {"type": self.type, "count": self.count}
        if self.elements or self.minimum is not None:
            out.update(
                min=self.minimum,
                max=self.maximum,
                mean=self.total / self.elements if self.elements else None,
            )
        if self.type.startswith("float"):
            out["nan_count"] = self.nan_count
        if self.lengths:
            values = np.array(sorted(self.lengths), dtype=np.int64)
            counts = np.array([self.lengths[v] for v in values.tolist()], dtype=np.int64)
            rows = int(counts.sum())
            p50, p90, p99 = (_percentile(values, counts, q) for q in (50, 90, 99))
            out["length"] = {
                "min": int(values[0]),
                "max": int(values[-1]),
                "mean": float((values * counts).sum() / rows),
                "p50": p50,
                "p90": p90,
                "p99": p99,
            }
        if self.histogram is not None:
            out["histogram"] = {str(k): v for k, v in sorted(self.histogram.items())}
        return out


def _percentile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """``np.percentile`` of the rows ``values`` repeated ``counts`` times (sorted values):
    linear interpolation between the order statistics around ``q / 100 * (rows - 1)``."""
    ends = np.cumsum(counts)  # the order statistics below ends[k] are values[k] or smaller
    position = q / 100 * (int(ends[-1]) - 1)
    below = math.floor(position)

    def order_statistic(k: int) -> float:
        return float(values[int(np.searchsorted(ends, k, side="right"))])

    low = order_statistic(below)
    high = order_statistic(min(below + 1, int(ends[-1]) - 1))
    return low + (high - low) * (position - below)


def _num(v: Any) -> float:
    return int(v) if isinstance(v, (np.integer, int)) else float(v)


def compute_stats(
    schema_fields: Sequence[tuple[str, str, tuple[int, ...] | None]],
    blocks: Iterable[Block],
    *,
    label_fields: Sequence[str] = ("label",),
) -> dict[str, dict[str, Any]]:
    """Statistics per field over ``blocks`` (``schema_fields``: name, type, shape)."""
    stats = {name: FieldStats(name, type_) for name, type_, _ in schema_fields}
    for name, type_, shape in schema_fields:
        if name in label_fields and shape is None and type_.startswith(("int", "uint")):
            stats[name].histogram = Counter()
    for block in blocks:
        for name, type_, _shape in schema_fields:
            if name not in block.columns:
                continue
            values = block.columns[name]
            st = stats[name]
            st.count += len(values)
            if type_ in ("bytes", "string"):
                st.add_lengths(np.fromiter((len(v) for v in values), np.int64, len(values)))
            elif isinstance(values, np.ndarray):
                st.add_numbers(values)
                if st.histogram is not None:
                    uniq, counts = np.unique(values, return_counts=True)
                    st.histogram.update(dict(zip(uniq.tolist(), counts.tolist(), strict=True)))
                    if len(st.histogram) > _MAX_CLASSES:
                        st.histogram = None
            else:  # variable-shape arrays: one array per row
                st.add_lengths(np.fromiter((np.size(v) for v in values), np.int64, len(values)))
                for v in values:
                    st.add_numbers(np.asarray(v))
    return {name: st.to_dict() for name, st in stats.items()}
