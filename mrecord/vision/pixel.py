"""Per-pixel ops, all offloadable: Rescale, Normalize, HWC2CHW."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import BatchOperation
from mrecord.transforms.validators import check_float, type_check

__all__ = ["HWC2CHW", "Normalize", "Rescale"]

_FLOAT_LIMIT = 16_777_216.0


class Rescale(BatchOperation):
    """``output = image * rescale + shift`` in float32 (MindSpore: any shape, float32 output).

    Example::

        >>> Rescale(0.5, -1.0)(np.array([[[0, 4, 255]]], dtype=np.uint8)).tolist()
        [[[-1.0, 1.0, 126.5]]]
    """

    def __init__(self, rescale: float, shift: float) -> None:
        self.rescale = check_float(rescale, "rescale", -_FLOAT_LIMIT, _FLOAT_LIMIT)
        self.shift = check_float(shift, "shift", -_FLOAT_LIMIT, _FLOAT_LIMIT)

    def _params(self) -> dict[str, object]:
        return {"rescale": self.rescale, "shift": self.shift}

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        if dtype.kind not in "biuf":
            raise WrongTypeError(f"Rescale: the input should be numeric, got dtype {dtype}")

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out: np.ndarray = batch.astype(np.float32)  # a new array: scaled in place
        out *= np.float32(self.rescale)
        out += np.float32(self.shift)
        return out


def _channel_values(
    value: object, name: str, low: float, high: float, open_low: bool
) -> list[float]:
    type_check(value, (list, tuple), name)
    seq = cast(Sequence[object], value)
    if not seq:
        raise ArgumentError(f"{name} should not be empty, got {value!r}.")
    return [check_float(v, f"{name}_value", low, high, left_open=open_low) for v in seq]


class Normalize(BatchOperation):
    """``output = (image - mean) / std`` per channel, float32.

    ``mean`` and ``std`` have one value per channel (or one value for all), in [0, 255] and
    (0, 255]. ``is_hwc=True`` expects ``<H, W, C>`` (or ``<H, W>``), ``False`` ``<C, H, W>``.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], is_hwc: bool = True) -> None:
        self.mean = _channel_values(mean, "mean", 0.0, 255.0, False)
        self.std = _channel_values(std, "std", 0.0, 255.0, True)
        if len(self.mean) != len(self.std):
            raise ArgumentError(
                f"Length of mean and std must be equal, got mean={self.mean!r}, std={self.std!r}."
            )
        type_check(is_hwc, (bool,), "is_hwc")
        self.is_hwc = is_hwc
        self._mean32 = np.asarray(self.mean, dtype=np.float32)
        self._std32 = np.asarray(self.std, dtype=np.float32)

    def _params(self) -> dict[str, object]:
        return {"mean": self.mean, "std": self.std, "is_hwc": self.is_hwc}

    def _channels(self, shape: tuple[int, ...]) -> int:
        if len(shape) == 2:
            return 1
        return shape[2] if self.is_hwc else shape[0]

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        layout = "<H, W, C>" if self.is_hwc else "<C, H, W>"
        if len(shape) not in (2, 3):
            raise ArgumentError(
                f"Normalize: the input should be an image of shape <H, W> or {layout}, "
                f"got shape {shape!r}"
            )
        if dtype.kind not in "biuf":
            raise WrongTypeError(f"Normalize: the input should be numeric, got dtype {dtype}")
        c = self._channels(shape)
        if len(self.mean) != 1 and len(self.mean) != c:
            raise ArgumentError(
                f"Normalize: the image has {c} channels (shape {shape!r}, {layout}) but mean "
                f"and std have {len(self.mean)} values; give one value or one per channel"
            )

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        mean, std = self._mean32, self._std32
        if batch.ndim == 4 and not self.is_hwc:
            mean, std = mean.reshape(-1, 1, 1), std.reshape(-1, 1, 1)
        elif batch.ndim == 3:  # <H, W> rows: one value
            mean, std = mean[:1], std[:1]
        elif batch.ndim == 4 and batch.shape[2] and batch.flags.c_contiguous:
            # <H, W, C> rows: view each image row as W * C values and tile mean and std to
            # match, so numpy's inner loop runs over W * C elements instead of C (same values)
            n, h, w, c = batch.shape
            mean = np.tile(np.broadcast_to(mean, (c,)), w)
            std = np.tile(np.broadcast_to(std, (c,)), w)
            flat = self._normalized(batch.reshape(n * h, w * c), mean, std)
            return flat.reshape(batch.shape)
        return self._normalized(batch, mean, std)

    @staticmethod
    def _normalized(batch: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        """``(batch - mean) / std`` in float32 with a single new array."""
        out: np.ndarray = np.subtract(batch, mean, dtype=np.float32)
        out /= std
        return out


class HWC2CHW(BatchOperation):
    """Transpose ``<H, W, C>`` to ``<C, H, W>``; an ``<H, W>`` image is returned unchanged."""

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        if len(shape) not in (2, 3):
            raise ArgumentError(
                f"HWC2CHW: the input should be an image of shape <H, W> or <H, W, C>, "
                f"got shape {shape!r}"
            )

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        if batch.ndim == 3:
            return batch
        return np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
