"""Invert, Grayscale and ConvertColor (with ConvertMode), MindSpore's numerics.

Grey levels use the same fixed-point sums as the libraries MindSpore calls:
``ConvertColor`` OpenCV's ``(4899 R + 9617 G + 1868 B + 8192) >> 14`` and ``Grayscale``
Pillow's ``(19595 R + 38470 G + 7471 B + 32768) >> 16``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation, to_array
from mrecord.vision._image import check_image

__all__ = ["ConvertColor", "ConvertMode", "Grayscale", "Invert"]


class ConvertMode(IntEnum):
    """Colour conversions of :class:`ConvertColor` (MindSpore's names and values)."""

    COLOR_BGR2BGRA = 0
    COLOR_RGB2RGBA = 0
    COLOR_BGRA2BGR = 1
    COLOR_RGBA2RGB = 1
    COLOR_BGR2RGBA = 2
    COLOR_RGB2BGRA = 2
    COLOR_RGBA2BGR = 3
    COLOR_BGRA2RGB = 3
    COLOR_BGR2RGB = 4
    COLOR_RGB2BGR = 4
    COLOR_BGRA2RGBA = 5
    COLOR_RGBA2BGRA = 5
    COLOR_BGR2GRAY = 6
    COLOR_RGB2GRAY = 7
    COLOR_GRAY2BGR = 8
    COLOR_GRAY2RGB = 8
    COLOR_GRAY2BGRA = 9
    COLOR_GRAY2RGBA = 9
    COLOR_BGRA2GRAY = 10
    COLOR_RGBA2GRAY = 11


def _grey_opencv(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = r.astype(np.int64) * 4899 + g.astype(np.int64) * 9617 + b.astype(np.int64) * 1868
    return ((total + 8192) >> 14).astype(np.uint8)


def _grey_pil(img: np.ndarray) -> np.ndarray:
    r, g, b = (img[..., i].astype(np.int64) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16).astype(np.uint8)


def _alpha(img: np.ndarray) -> np.ndarray:
    return np.concatenate([img, np.full((*img.shape[:2], 1), 255, dtype=img.dtype)], axis=2)


class ConvertColor(TensorOperation):
    """Change the colour space (``convert_mode`` a :class:`ConvertMode`); uint8 images."""

    def __init__(self, convert_mode: ConvertMode) -> None:
        if not isinstance(convert_mode, ConvertMode):
            raise WrongTypeError(f"convert_mode must be a ConvertMode, got {convert_mode!r}")
        self.convert_mode = convert_mode

    def _params(self) -> dict[str, object]:
        return {"convert_mode": self.convert_mode}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "ConvertColor")
        check_image(img, "ConvertColor")
        mode = int(self.convert_mode)
        channels = 1 if img.ndim == 2 else img.shape[2]
        needs = {0: 3, 1: 4, 2: 3, 3: 4, 4: 3, 5: 4, 6: 3, 7: 3, 8: 1, 9: 1, 10: 4, 11: 4}[mode]
        if channels != needs:
            raise ArgumentError(
                f"ConvertColor({self.convert_mode.name}): the image must have {needs} "
                f"channel(s), got shape {list(img.shape)}"
            )
        if mode in (8, 9):
            grey = img if img.ndim == 2 else img[..., 0]
            out = np.repeat(grey[..., None], 3, axis=2)
            return _alpha(out) if mode == 9 else out
        if mode in (6, 7, 10, 11):
            rgb_first = mode in (7, 11)
            r, b = (img[..., 0], img[..., 2]) if rgb_first else (img[..., 2], img[..., 0])
            return _grey_opencv(r, img[..., 1], b)
        swapped = img[..., [2, 1, 0]]
        if mode == 0:
            return _alpha(img)
        if mode == 1:
            return np.ascontiguousarray(img[..., :3])
        if mode == 2:
            return _alpha(swapped)
        if mode == 3:
            return np.ascontiguousarray(swapped)
        if mode == 4:
            return np.ascontiguousarray(swapped)
        return np.ascontiguousarray(img[..., [2, 1, 0, 3]])  # mode 5


class Invert(TensorOperation):
    """``255 - pixel`` on every channel of a uint8 image."""

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "Invert")
        check_image(img, "Invert")
        if img.dtype != np.uint8:
            raise WrongTypeError(f"Invert: the image must be uint8, got {img.dtype}")
        out: np.ndarray = np.uint8(255) - img
        return out


class Grayscale(TensorOperation):
    """RGB to grey (Pillow's weights), ``num_output_channels`` 1 (``<H, W>``) or 3.

    Takes a numpy RGB image (MindSpore requires a PIL image; both work here) and returns
    the same kind it was given.
    """

    def __init__(self, num_output_channels: int = 1) -> None:
        if isinstance(num_output_channels, bool) or not isinstance(num_output_channels, int):
            raise WrongTypeError(
                f"num_output_channels must be an int, got {num_output_channels!r}"
            )
        if num_output_channels not in (1, 3):
            raise ArgumentError(
                f"num_output_channels must be 1 or 3, got {num_output_channels!r}"
            )
        self.num_output_channels = num_output_channels

    def _params(self) -> dict[str, object]:
        return {"num_output_channels": self.num_output_channels}

    def _compute(self, *arrays: Any, seed: int) -> Any:
        value = arrays[0]
        is_pil = hasattr(value, "convert") and hasattr(value, "mode")
        if is_pil:
            grey_pil = value.convert("L")
            return grey_pil.convert("RGB") if self.num_output_channels == 3 else grey_pil
        img = to_array(value, "Grayscale")
        check_image(img, "Grayscale", channels=(3,))
        grey = _grey_pil(img)
        return np.repeat(grey[..., None], 3, axis=2) if self.num_output_channels == 3 else grey
