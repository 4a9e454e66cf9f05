"""``Dataset.split``: non-overlapping parts of a dataset (MindSpore's sizes rule).

Each part is a node of its own that reads the split dataset through a nested iterator
and keeps the rows at its positions, so the parts are independent pipelines (the
pipeline stays a tree). ``randomize=True`` assigns positions to parts by a permutation
drawn from ``config.get_seed()`` once, when ``split`` is called; rows keep the split
dataset's order inside each part.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from mrecord import config
from mrecord.block import Block
from mrecord.errors import PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["SplitDataset", "split_sizes"]


def split_sizes(sizes: Sequence[int | float], total: int) -> list[int]:
    """Rows per part for ``sizes`` (ints summing to ``total``, or fractions summing to 1).

    Fractions become ``round(f * total)``; a shortfall goes to the first part, an excess
    is taken from the first part that keeps at least one row (MindSpore's rule).
    """
    values = list(sizes)
    if not values or isinstance(sizes, (str, bytes)):
        raise WrongTypeError(f"sizes must be a non-empty list of ints or floats, got {sizes!r}")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        ints = [int(v) for v in values]
        if any(v <= 0 for v in ints):
            raise PipelineError(f"split sizes must be positive, got {ints!r}")
        if sum(ints) != total:
            raise PipelineError(
                f"Sum of split sizes {sum(ints)} is not equal to dataset size {total}."
            )
        return ints
    if not all(isinstance(v, float) for v in values):
        raise WrongTypeError(f"sizes must be all ints or all floats, got {sizes!r}")
    if any(not 0 < v <= 1 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise PipelineError(f"split percentages must be in (0, 1] and sum to 1, got {values!r}")
    rows = [round(v * total) for v in values]
    for v, n in zip(values, rows, strict=True):
        if n == 0:
            raise PipelineError(f"Split percentage {v} is too small.")
    diff = sum(rows) - total
    if diff < 0:
        rows[0] -= diff
    elif diff > 0:
        for i, n in enumerate(rows):
            if n > diff:
                rows[i] -= diff
                break
    return rows


class SplitDataset(Dataset):
    """One part made by :meth:`Dataset.split`: the rows of ``parent`` at ``positions``."""

    def __init__(self, parent: Dataset, positions: np.ndarray, total: int, part: int) -> None:
        super().__init__()  # no child: the parent runs in its own nested pipeline
        self.parent = parent
        self.part = part
        self._mask = np.zeros(total, dtype=bool)
        self._mask[positions] = True
        self._rows = len(positions)

    def _column_names(self) -> list[str]:
        return self.parent.get_col_names()

    def _num_rows(self) -> int | None:
        return self._rows

    def _describe(self) -> str:
        return f"Split(part={self.part}, rows={self._rows}, of={self.parent!r})"

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        from mrecord.pipeline.engine.iterator import BlockIterator

        start = 0
        with BlockIterator(self.parent, num_epochs=1) as blocks:
            for block in blocks:
                ctx.check_stop()
                n = min(len(block), len(self._mask) - start)
                keep = np.flatnonzero(self._mask[start : start + n])
                start += n
                if len(keep):
                    yield block.take(keep)
                if start >= len(self._mask):
                    return


def split(dataset: Dataset, sizes: Sequence[int | float], randomize: bool) -> list[Dataset]:
    """The parts of ``dataset`` (see :meth:`Dataset.split`)."""
    if not isinstance(randomize, bool):
        raise WrongTypeError(f"randomize must be a bool, got {randomize!r}")
    total = dataset.get_dataset_size()
    if total < 0:
        raise PipelineError("split needs a dataset of known, finite size (not an endless repeat)")
    rows = split_sizes(sizes, total)
    order = (
        np.random.default_rng(config.get_seed()).permutation(total)
        if randomize
        else np.arange(total)
    )
    bounds = np.cumsum([0, *rows])
    return [
        SplitDataset(dataset, order[bounds[i] : bounds[i + 1]], total, i)
        for i in range(len(rows))
    ]
