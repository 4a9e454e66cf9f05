"""Random colour ops, offloadable: RandomColorAdjust, RandomSharpness."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import BatchOperation
from mrecord.transforms.validators import FLOAT_MAX, check_factor_range, check_minmax_pair
from mrecord.vision import _color

__all__ = ["RandomColorAdjust", "RandomSharpness"]

_Adjust = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _draw(u: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    lo, hi = bounds
    return lo + (hi - lo) * u


def _check_rgb(op_name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
    if len(shape) != 3 or shape[2] != 3:
        raise ArgumentError(
            f"{op_name}: the input should be an RGB image of shape <H, W, 3>, got shape {shape!r}"
        )
    if dtype.kind not in "uf":
        raise WrongTypeError(f"{op_name}: the input should be uint8 or float, got dtype {dtype}")


class RandomColorAdjust(BatchOperation):
    """Randomly adjust brightness, contrast, saturation and hue, in a random order per image.

    Each argument is a number ``v`` (factor drawn from ``[max(0, 1 - v), 1 + v]``; hue from
    ``[-v, v]``, ``v <= 0.5``) or a ``(min, max)`` range. An adjustment whose range is the
    identity (``(1, 1)``, hue ``(0, 0)``) is skipped. Factors and order come from the row's seed.
    """

    is_random = True
    _NAMES = ("brightness", "contrast", "saturation", "hue")

    def __init__(
        self,
        brightness: float | tuple[float, float] = (1, 1),
        contrast: float | tuple[float, float] = (1, 1),
        saturation: float | tuple[float, float] = (1, 1),
        hue: float | tuple[float, float] = (0, 0),
    ) -> None:
        self.brightness = check_factor_range(brightness, "brightness", center=1.0, bound=FLOAT_MAX)
        self.contrast = check_factor_range(contrast, "contrast", center=1.0, bound=FLOAT_MAX)
        self.saturation = check_factor_range(saturation, "saturation", center=1.0, bound=FLOAT_MAX)
        self.hue = check_factor_range(hue, "hue", center=0.0, bound=0.5)

    def _params(self) -> dict[str, object]:
        return {name: list(getattr(self, name)) for name in self._NAMES}

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        _check_rgb("RandomColorAdjust", shape, dtype)

    def _steps(self) -> list[tuple[int, tuple[float, float], _Adjust]]:
        funcs: list[_Adjust] = [
            _color.adjust_brightness,
            _color.adjust_contrast,
            _color.adjust_saturation,
            _color.adjust_hue,
        ]
        identity = [(1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (0.0, 0.0)]
        steps = []
        for j, name in enumerate(self._NAMES):
            bounds: tuple[float, float] = getattr(self, name)
            if bounds != identity[j]:
                steps.append((j, bounds, funcs[j]))
        return steps

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        steps = self._steps()
        if not steps:
            same: np.ndarray = batch.copy()
            return same
        u = self._uniforms(seeds, 8)  # 0..3: factors, 4..7: keys of the random order
        order = np.argsort(u[:, 4:8], axis=1, kind="stable")  # a permutation of 0..3 per image
        out: np.ndarray = batch.copy()
        for position in range(4):
            for j, bounds, func in steps:
                rows = np.flatnonzero(order[:, position] == j)
                if rows.size:
                    out[rows] = func(out[rows], _draw(u[rows, j], bounds))
        return out


class RandomSharpness(BatchOperation):
    """Adjust sharpness by a factor drawn from ``degrees`` (0: blurred, 1: original, 2: sharper)."""

    is_random = True

    def __init__(self, degrees: tuple[float, float] = (0.1, 1.9)) -> None:
        self.degrees = check_minmax_pair(degrees, "degrees", 0.0, FLOAT_MAX)

    def _params(self) -> dict[str, object]:
        return {"degrees": list(self.degrees)}

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] not in (1, 3)):
            raise ArgumentError(
                f"RandomSharpness: the input should be an image of shape <H, W>, <H, W, 1> or "
                f"<H, W, 3>, got shape {shape!r}"
            )

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        factors = _draw(self._uniforms(seeds, 1)[:, 0], self.degrees)
        return _color.adjust_sharpness(batch, factors)
