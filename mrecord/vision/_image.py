"""Image helpers shared by the vision ops: shape checks, padding, rounding back to a dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.vision.enums import Border

__all__ = ["check_image", "check_image_shape", "pad_batch", "pad_image", "restore_dtype"]


def check_image(img: np.ndarray, op_name: str, channels: tuple[int, ...] | None = None) -> None:
    """Require an image ``<H, W>`` or ``<H, W, C>`` (with C in ``channels`` when given)."""
    check_image_shape(img.shape, img.dtype, op_name, channels)


def check_image_shape(
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    op_name: str,
    channels: tuple[int, ...] | None = None,
) -> None:
    """:func:`check_image` on a shape and dtype (one row of a batch)."""
    if len(shape) not in (2, 3):
        raise ArgumentError(
            f"{op_name}: the input should be an image of shape <H, W> or <H, W, C>, "
            f"got shape {shape!r}"
        )
    if dtype.kind not in "biuf":
        raise WrongTypeError(f"{op_name}: the input should be a numeric image, got dtype {dtype}")
    if channels is not None:
        c = shape[2] if len(shape) == 3 else 1
        if c not in channels:
            raise ArgumentError(
                f"{op_name}: the channel of the input image should be in {list(channels)!r}, "
                f"got shape {shape!r}"
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
    padded: np.ndarray = pad_batch(img[np.newaxis], top, bottom, left, right, mode, fill)[0]
    return padded


def pad_batch(
    batch: np.ndarray,
    top: int,
    bottom: int,
    left: int,
    right: int,
    mode: Border = Border.CONSTANT,
    fill: tuple[int, ...] | int = 0,
) -> np.ndarray:
    """Pad every image of a batch ``<N, H, W>`` / ``<N, H, W, C>`` the same way (one pass)."""
    if top == bottom == left == right == 0:
        return batch
    widths: list[tuple[int, int]] = [(0, 0), (top, bottom), (left, right)]
    widths += [(0, 0)] * (batch.ndim - 3)
    if mode is not Border.CONSTANT:
        padded: np.ndarray = np.pad(batch, widths, mode=mode.value)  # type: ignore[call-overload]
        return padded
    n, h, w = batch.shape[:3]
    out = np.empty((n, h + top + bottom, w + left + right, *batch.shape[3:]), dtype=batch.dtype)
    if isinstance(fill, tuple) and batch.ndim == 4 and len(fill) == batch.shape[3]:
        value = np.asarray(fill).astype(batch.dtype)
    else:
        value = np.asarray(fill if isinstance(fill, int) else fill[0]).astype(batch.dtype)
    # fill only the borders, then copy the images in
    out[:, :top] = value
    out[:, top + h :] = value
    out[:, top : top + h, :left] = value
    out[:, top : top + h, left + w :] = value
    out[:, top : top + h, left : left + w] = batch
    return out
