"""Dataset slicing: which SlicePatches column each rank keeps, and ``dataset_strategy`` checks.

In MindSpore's dataset slicing (semi/auto parallel) every rank reads the same rows (same
seed), cuts each image into ``num_height x num_width`` patches with ``vision.SlicePatches``
and keeps only patch ``rank % (num_height * num_width)``. The training side is told how the
data is split with a ``dataset_strategy``: one tuple per network input giving the number of
slices per dimension, e.g. ``((1, 1, 1, 8), (1,))`` for an NCHW image cut into 8 along W
and an unsliced label. MindSpore accepts a strategy only if

1. each input is sliced in at most one dimension, and
2. the input with the most dimensions has the most slices: no other input is sliced into
   more parts than it (when several inputs share the most dimensions, the first one counts).

:func:`check_dataset_strategy` enforces both rules with
:class:`mrecord.errors.ArgumentError`; :func:`plan_slices` also checks that the strategy's
last two dimensions of that input match the patch grid and says which column to project.

Example::

    >>> plan = plan_slices(rank=5, num_height=1, num_width=8,
    ...                    dataset_strategy=((1, 1, 1, 8), (1,)))
    >>> plan.column, plan.columns[:2]
    ('img5', ['img0', 'img1'])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from mrecord.arguments import require_int
from mrecord.errors import ArgumentError, WrongTypeError

__all__ = [
    "SlicePlan",
    "check_dataset_strategy",
    "get_group_size",
    "get_rank",
    "patch_columns",
    "patch_index",
    "plan_slices",
]

Strategy = tuple[tuple[int, ...], ...]


def _slices(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def check_dataset_strategy(dataset_strategy: object) -> Strategy:
    """Validate a ``dataset_strategy`` by MindSpore's two rules and return it as tuples.

    Raises ``TypeError`` for a malformed value and :class:`~mrecord.errors.ArgumentError` when
    an input is sliced in more than one dimension or has more slices than the input with
    the most dimensions.
    """
    if not isinstance(dataset_strategy, (tuple, list)) or not dataset_strategy:
        raise WrongTypeError(
            f"dataset_strategy must be a non-empty tuple of tuples such as ((1, 1, 1, 8), (1,)), "
            f"got {dataset_strategy!r}"
        )
    strategy: list[tuple[int, ...]] = []
    for i, item in enumerate(cast(Sequence[object], dataset_strategy)):
        if not isinstance(item, (tuple, list)) or not item:
            raise WrongTypeError(
                f"dataset_strategy[{i}] must be a non-empty tuple of ints, got {item!r}"
            )
        strategy.append(
            tuple(require_int(v, f"dataset_strategy[{i}][{j}]", 1) for j, v in enumerate(item))
        )
    for i, dims in enumerate(strategy):
        sliced = [d for d, n in enumerate(dims) if n > 1]
        if len(sliced) > 1:
            raise ArgumentError(
                f"dataset_strategy[{i}] = {dims!r} slices input {i} in dimensions {sliced!r}; "
                f"each input may be sliced in at most one dimension (e.g. {_one_dim(dims)!r})"
            )
    main = max(range(len(strategy)), key=lambda i: (len(strategy[i]), -i))
    main_slices = _slices(strategy[main])
    for i, dims in enumerate(strategy):
        if _slices(dims) > main_slices:
            raise ArgumentError(
                f"dataset_strategy[{i}] = {dims!r} cuts input {i} into {_slices(dims)} slices, "
                f"more than the {main_slices} of input {main} {strategy[main]!r}, which has the "
                f"most dimensions; the input with the most dimensions must have the most slices"
            )
    return tuple(strategy)


def _one_dim(dims: tuple[int, ...]) -> tuple[int, ...]:
    return (*([1] * (len(dims) - 1)), _slices(dims))


def patch_index(rank: int, num_height: int, num_width: int) -> int:
    """The patch a rank keeps: ``rank % (num_height * num_width)`` (row-major patch order)."""
    require_int(rank, "rank", 0)
    cells = require_int(num_height, "num_height", 1) * require_int(num_width, "num_width", 1)
    return rank % cells


def patch_columns(num_height: int, num_width: int, prefix: str = "img") -> list[str]:
    """Names of SlicePatches' output columns: ``img0 .. img{N-1}``, as in MindSpore's example."""
    count = require_int(num_height, "num_height", 1) * require_int(num_width, "num_width", 1)
    return [f"{prefix}{i}" for i in range(count)]


@dataclass(frozen=True)
class SlicePlan:
    """What one rank does: slice into ``columns`` and keep ``column`` (index ``index``)."""

    rank: int
    num_height: int
    num_width: int
    columns: list[str]
    index: int
    dataset_strategy: Strategy | None

    @property
    def column(self) -> str:
        """The patch column this rank keeps (project it with the label)."""
        return self.columns[self.index]


def plan_slices(
    rank: int,
    num_height: int = 1,
    num_width: int = 1,
    dataset_strategy: object = None,
    prefix: str = "img",
) -> SlicePlan:
    """Check the slicing setup for ``rank`` and say which patch column it keeps.

    With a ``dataset_strategy``, it is validated (:func:`check_dataset_strategy`) and the
    input with the most dimensions, taken as a batched NCHW image, must be sliced
    ``num_height`` times along H and ``num_width`` times along W (its last two entries).
    """
    index = patch_index(rank, num_height, num_width)
    strategy = None
    if dataset_strategy is not None:
        strategy = check_dataset_strategy(dataset_strategy)
        main = max(range(len(strategy)), key=lambda i: (len(strategy[i]), -i))
        dims = strategy[main]
        grid = (dims[-2] if len(dims) >= 2 else 1, dims[-1])
        if grid != (num_height, num_width) and num_height > 1 and num_width > 1:
            raise ArgumentError(
                f"SlicePatches cuts the image num_height={num_height!r} x "
                f"num_width={num_width!r}, which no dataset_strategy can describe (each input "
                f"may be sliced in at most one dimension); slice along H or W only"
            )
        if grid != (num_height, num_width):
            raise ArgumentError(
                f"dataset_strategy[{main}] = {dims!r} slices the image {grid[0]} x {grid[1]} "
                f"(H x W), but SlicePatches cuts it num_height={num_height!r} x "
                f"num_width={num_width!r}; use dataset_strategy[{main}] = "
                f"{(*dims[:-2], num_height, num_width)!r}"
            )
    return SlicePlan(
        rank=rank,
        num_height=num_height,
        num_width=num_width,
        columns=patch_columns(num_height, num_width, prefix),
        index=index,
        dataset_strategy=strategy,
    )


def _env_int(names: Sequence[str], default: int) -> int:
    for name in names:
        raw = os.environ.get(name)
        if raw is not None and raw.strip():
            try:
                return int(raw)
            except ValueError as exc:
                raise ArgumentError(f"environment variable {name}={raw!r} is not an int") from exc
    return default


def get_rank() -> int:
    """This process's rank from ``RANK_ID`` (MindSpore) or ``RANK`` (torchrun); default 0."""
    return _env_int(("RANK_ID", "RANK"), 0)


def get_group_size() -> int:
    """The number of ranks from ``RANK_SIZE`` (MindSpore) or ``WORLD_SIZE``; default 1."""
    return _env_int(("RANK_SIZE", "WORLD_SIZE"), 1)
