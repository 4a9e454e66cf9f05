"""Flips: HorizontalFlip, VerticalFlip and their random, offloadable versions."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import ArgumentError
from mrecord.transforms.base import BatchOperation
from mrecord.transforms.validators import check_float

__all__ = [
    "HorizontalFlip",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "VerticalFlip",
    "flip_rows",
]


def _check_image_shape(op_name: str, shape: tuple[int, ...]) -> None:
    if len(shape) not in (2, 3):
        raise ArgumentError(
            f"{op_name}: the input should be an image of shape <H, W> or <H, W, C>, "
            f"got shape {shape!r}"
        )


class _Flip(BatchOperation):
    """Flip along image axis ``_axis`` (0: rows, 1: columns) of each row picked by ``_mask``."""

    _axis = 1

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        _check_image_shape(type(self).__name__, shape)

    def _mask(self, seeds: np.ndarray) -> np.ndarray | None:
        return None  # flip every row

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        mask = self._mask(seeds)
        if mask is None:
            mask = np.ones(batch.shape[0], dtype=bool)
        return flip_rows(batch, 1 + self._axis, np.flatnonzero(mask))


def flip_rows(batch: np.ndarray, axis: int, rows: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``batch`` with ``rows`` reversed along ``axis``.

    When only some rows flip, the axes after ``axis`` are viewed as one opaque element
    (``np.void``), so numpy copies whole pixels (or whole image rows) instead of looping over
    a short channel axis.
    """
    if len(rows) == 0:
        same: np.ndarray = np.array(batch, copy=True, order="C")
        return same
    if len(rows) == batch.shape[0]:
        every: np.ndarray = np.array(np.flip(batch, axis=axis), order="C")
        return every
    arr: np.ndarray = np.ascontiguousarray(batch)
    unit = int(np.prod(arr.shape[axis + 1 :], dtype=np.int64)) * arr.itemsize
    if unit == 0 or arr.size == 0 or arr.dtype.hasobject:
        out: np.ndarray = arr.copy()
        out[rows] = np.flip(arr[rows], axis=axis)
        return out
    merged = arr.reshape(*arr.shape[: axis + 1], unit // arr.itemsize)
    view = merged.view(np.dtype((np.void, unit)))[..., 0]
    flipped: np.ndarray = view.copy()
    flipped[rows] = np.flip(view[rows], axis=axis)
    return flipped.view(arr.dtype).reshape(arr.shape)


class HorizontalFlip(_Flip):
    """Mirror the image left to right (not offloadable, like MindSpore's)."""

    offloadable = False


class VerticalFlip(_Flip):
    """Mirror the image top to bottom (not offloadable, like MindSpore's)."""

    offloadable = False

    _axis = 0


class _RandomFlip(_Flip):
    is_random = True
    offloadable = True

    def __init__(self, prob: float = 0.5) -> None:
        self.prob = check_float(prob, "prob", 0.0, 1.0)

    def _params(self) -> dict[str, object]:
        return {"prob": self.prob}

    def _mask(self, seeds: np.ndarray) -> np.ndarray | None:
        mask: np.ndarray = self._uniforms(seeds, 1)[:, 0] < self.prob
        return mask


class RandomHorizontalFlip(_RandomFlip):
    """Mirror the image left to right with probability ``prob`` (decided by the row's seed)."""


class RandomVerticalFlip(_RandomFlip):
    """Mirror the image top to bottom with probability ``prob`` (decided by the row's seed)."""

    _axis = 0
