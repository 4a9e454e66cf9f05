"""Pad, Crop, PadToSize and ResizedCrop: fixed (not random) geometry, MindSpore's rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation, to_array
from mrecord.transforms.validators import check_int, check_size
from mrecord.vision._image import check_image, pad_image
from mrecord.vision._resize import resize
from mrecord.vision.enums import Border, Inter
from mrecord.vision.geometry import parse_fill, parse_padding

__all__ = ["Crop", "Pad", "PadToSize", "ResizedCrop"]


def _as_hw(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else size


def _check_border(mode: object) -> Border:
    if not isinstance(mode, Border):
        raise WrongTypeError(f"Argument padding_mode with value {mode!r} is not of type Border")
    return mode


class Pad(TensorOperation):
    """Pad the borders: ``padding`` an int (all four), ``(left/right, top/bottom)`` or
    ``(left, top, right, bottom)``; ``fill_value`` an int or RGB triple for
    ``Border.CONSTANT``; ``padding_mode`` a :class:`Border`."""

    def __init__(
        self,
        padding: int | Sequence[int],
        fill_value: int | tuple[int, int, int] = 0,
        padding_mode: Border = Border.CONSTANT,
    ) -> None:
        self.padding = parse_padding(padding)
        self.fill_value = parse_fill(fill_value)
        self.padding_mode = _check_border(padding_mode)

    def _params(self) -> dict[str, object]:
        return {
            "padding": self.padding,
            "fill_value": self.fill_value,
            "padding_mode": self.padding_mode,
        }

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "Pad")
        check_image(img, "Pad")
        left, top, right, bottom = self.padding
        return pad_image(img, top, bottom, left, right, self.padding_mode, self.fill_value)


class Crop(TensorOperation):
    """Crop the ``size`` (int or ``(h, w)``) region whose top-left corner is
    ``coordinates = (top, left)``; a region past the image raises ArgumentError."""

    def __init__(self, coordinates: Sequence[int], size: int | Sequence[int]) -> None:
        if not isinstance(coordinates, (list, tuple)) or len(coordinates) != 2:
            raise WrongTypeError(f"coordinates must be (top, left), got {coordinates!r}")
        self.coordinates = (
            check_int(coordinates[0], "coordinates"),
            check_int(coordinates[1], "coordinates"),
        )
        self.size = check_size(size)

    def _params(self) -> dict[str, object]:
        return {"coordinates": self.coordinates, "size": self.size}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "Crop")
        check_image(img, "Crop")
        top, left = self.coordinates
        h, w = _as_hw(self.size)
        if top + h > img.shape[0] or left + w > img.shape[1]:
            raise ArgumentError(
                f"Crop: the region rows {top}..{top + h - 1}, columns {left}..{left + w - 1} "
                f"exceeds the image of {img.shape[0]} x {img.shape[1]}"
            )
        return img[top : top + h, left : left + w]


class PadToSize(TensorOperation):
    """Pad the image to ``size`` (int or ``(h, w)``): ``offset`` rows on top and columns
    on the left (int for both, or ``(top, left)``; default: centred, the smaller half
    first), the rest at the bottom and right."""

    def __init__(
        self,
        size: int | Sequence[int],
        offset: int | Sequence[int] | None = None,
        fill_value: int | tuple[int, int, int] = 0,
        padding_mode: Border = Border.CONSTANT,
    ) -> None:
        self.size = check_size(size)
        if offset is None:
            self.offset: tuple[int, int] | None = None
        elif isinstance(offset, int) and not isinstance(offset, bool):
            self.offset = (check_int(offset, "offset"), check_int(offset, "offset"))
        elif isinstance(offset, (list, tuple)) and len(offset) == 2:
            self.offset = (check_int(offset[0], "offset"), check_int(offset[1], "offset"))
        else:
            raise WrongTypeError(f"offset must be None, an int or (top, left), got {offset!r}")
        self.fill_value = parse_fill(fill_value)
        self.padding_mode = _check_border(padding_mode)

    def _params(self) -> dict[str, object]:
        return {
            "size": self.size,
            "offset": self.offset,
            "fill_value": self.fill_value,
            "padding_mode": self.padding_mode,
        }

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "PadToSize")
        check_image(img, "PadToSize")
        h, w = _as_hw(self.size)
        extra_h, extra_w = h - img.shape[0], w - img.shape[1]
        if extra_h < 0 or extra_w < 0:
            raise ArgumentError(
                f"PadToSize: the target size {h} x {w} is smaller than the image "
                f"{img.shape[0]} x {img.shape[1]}"
            )
        top, left = self.offset if self.offset is not None else (extra_h // 2, extra_w // 2)
        if top > extra_h or left > extra_w:
            raise ArgumentError(
                f"PadToSize: offset {self.offset!r} leaves no room in {h} x {w} for the image "
                f"{img.shape[0]} x {img.shape[1]}"
            )
        return pad_image(
            img, top, extra_h - top, left, extra_w - left, self.padding_mode, self.fill_value
        )


class ResizedCrop(TensorOperation):
    """Crop the ``height x width`` region at ``(top, left)``, then resize it to ``size``
    (an int: a square; ``(h, w)``: exact) with ``interpolation``."""

    def __init__(
        self,
        top: int,
        left: int,
        height: int,
        width: int,
        size: int | Sequence[int],
        interpolation: Inter = Inter.LINEAR,
    ) -> None:
        self.box = (
            check_int(top, "top"),
            check_int(left, "left"),
            check_int(height, "height", 1),
            check_int(width, "width", 1),
        )
        self.size = check_size(size)
        if not isinstance(interpolation, Inter):
            raise WrongTypeError(f"interpolation must be an Inter, got {interpolation!r}")
        self.interpolation = interpolation

    def _params(self) -> dict[str, object]:
        top, left, height, width = self.box
        return {
            "top": top,
            "left": left,
            "height": height,
            "width": width,
            "size": self.size,
            "interpolation": self.interpolation,
        }

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "ResizedCrop")
        check_image(img, "ResizedCrop")
        top, left, height, width = self.box
        if top + height > img.shape[0] or left + width > img.shape[1]:
            raise ArgumentError(
                f"ResizedCrop: the region {height} x {width} at ({top}, {left}) exceeds the "
                f"image of {img.shape[0]} x {img.shape[1]}"
            )
        out_h, out_w = _as_hw(self.size)
        crop = np.ascontiguousarray(img[top : top + height, left : left + width])
        return resize(crop, out_h, out_w, self.interpolation)
