"""Image helpers shared by the vision ops: shape checks, padding, rounding back to a dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import ArgumentError
from mrecord.vision.enums import Border

__all__ = ["check_image", "pad_image", "restore_dtype"]


def check_image(img: np.ndarray, op_name: str, channels: tuple[int, ...] | None = None) -> None:
    """Require an image ``<H, W>`` or ``<H, W, C>`` (with C in ``channels`` when given)."""
    if img.ndim not in (2, 3):
        raise ArgumentError(
            f"{op_name}: the input should be an image of shape <H, W> or <H, W, C>, "
            f"got shape {img.shape!r}"
        )
    if img.dtype.kind not in "biuf":
        raise TypeError(f"{op_name}: the input should be a numeric image, got dtype {img.dtype}")
    if channels is not None:
        c = img.shape[2] if img.ndim == 3 else 1
        if c not in channels:
            raise ArgumentError(
                f"{op_name}: the channel of the input image should be in {list(channels)!r}, "
                f"got shape {img.shape!r}"
            )


def restore_dtype(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Float results back to ``dtype``: integers are rounded half-to-even and saturated."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out: np.ndarray = np.clip(np.rint(values), info.min, info.max).astype(dtype)
        return out
    if dtype.kind == "b":
        return values > 0.5
    return values.astype(dtype, copy=False)


def pad_image(
    img: np.ndarray,
    top: int,
    bottom: int,
    left: int,
    right: int,
    mode: Border = Border.CONSTANT,
    fill: tuple[int, ...] | int = 0,
) -> np.ndarray:
    """Pad an ``<H, W>`` / ``<H, W, C>`` image (``fill``: one value or one per channel)."""
    if top == bottom == left == right == 0:
        return img
    widths: list[tuple[int, int]] = [(top, bottom), (left, right)] + [(0, 0)] * (img.ndim - 2)
    if mode is not Border.CONSTANT:
        padded: np.ndarray = np.pad(img, widths, mode=mode.value)  # type: ignore[call-overload]
        return padded
    h, w = img.shape[:2]
    out = np.empty((h + top + bottom, w + left + right, *img.shape[2:]), dtype=img.dtype)
    if isinstance(fill, tuple) and img.ndim == 3 and len(fill) == img.shape[2]:
        out[...] = np.asarray(fill).astype(img.dtype)
    else:
        out[...] = np.asarray(fill if isinstance(fill, int) else fill[0]).astype(img.dtype)
    out[top : top + h, left : left + w] = img
    return out
