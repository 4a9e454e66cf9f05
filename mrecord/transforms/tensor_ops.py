"""Small tensor ops: OneHot, Fill, Duplicate."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import RuntimeArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation, to_array
from mrecord.transforms.validators import INT32_MAX, check_float, check_int, type_check

__all__ = ["Duplicate", "Fill", "OneHot"]


class OneHot(TensorOperation):
    """One-hot encode integer labels: shape ``s`` becomes ``s + (num_classes,)``.

    With ``smoothing_rate`` ``r > 0`` the output is float64 ``onehot * (1 - r) + r / num_classes``
    (label smoothing); otherwise it keeps the label's integer dtype, as MindSpore does.
    A label outside ``[0, num_classes)`` raises :class:`mrecord.errors.ArgumentError`.
    """

    def __init__(self, num_classes: int, smoothing_rate: float = 0.0) -> None:
        self.num_classes = check_int(num_classes, "num_classes", 1, INT32_MAX)
        self.smoothing_rate = check_float(smoothing_rate, "smoothing_rate", 0.0, 1.0)

    def _params(self) -> dict[str, object]:
        return {"num_classes": self.num_classes, "smoothing_rate": self.smoothing_rate}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        labels = to_array(arrays[0], "OneHot")
        if labels.dtype.kind not in "iu":
            raise WrongTypeError(
                f"OneHot: the input should be integer labels, got dtype {labels.dtype}"
            )
        bad = (labels < 0) | (labels >= self.num_classes)
        if np.any(bad):
            first = labels[bad].flat[0]
            raise RuntimeArgumentError(  # MindSpore: RuntimeError
                f"OneHot: label {int(first)!r} is outside [0, {self.num_classes}); "
                f"check num_classes={self.num_classes!r}"
            )
        hot: np.ndarray = np.arange(self.num_classes) == labels[..., np.newaxis]
        if self.smoothing_rate > 0:
            r = self.smoothing_rate
            smooth: np.ndarray = hot.astype(np.float64) * (1.0 - r)
            smooth += r / self.num_classes
            return smooth
        return hot.astype(labels.dtype)


class Fill(TensorOperation):
    """Return an array of the input's shape and dtype with every element set to ``fill_value``."""

    def __init__(self, fill_value: int | float | bool | str | bytes) -> None:
        type_check(fill_value, (int, float, bool, str, bytes), "fill_value")
        self.fill_value = fill_value

    def _params(self) -> dict[str, object]:
        return {"fill_value": self.fill_value}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        arr = to_array(arrays[0], "Fill")
        try:
            value = np.asarray(self.fill_value).astype(arr.dtype)
        except (TypeError, ValueError) as exc:
            raise WrongTypeError(
                f"Fill: fill_value {self.fill_value!r} cannot be cast to the input's dtype "
                f"{arr.dtype}"
            ) from exc
        return np.full(arr.shape, value, dtype=arr.dtype)


class Duplicate(TensorOperation):
    """Return the input and a copy of it (two output columns from one)."""

    def _compute(self, *arrays: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
        arr = to_array(arrays[0], "Duplicate")
        return arr, arr.copy()
