"""Geometric ops on one image: Resize, CenterCrop, RandomCrop, RandomResizedCrop."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import BatchOperation, TensorOperation, to_array
from mrecord.transforms.validators import (
    FLOAT_MAX,
    check_int,
    check_minmax_pair,
    check_size,
    type_check,
)
from mrecord.vision._crop_box import crop_box_for_seed
from mrecord.vision._image import check_image, check_image_shape, pad_batch, pad_image
from mrecord.vision._resize import resize
from mrecord.vision.enums import Border, Inter

__all__ = [
    "CenterCrop",
    "RandomCrop",
    "RandomResizedCrop",
    "Resize",
    "output_size_for",
    "parse_fill",
    "parse_padding",
]


def output_size_for(height: int, width: int, size: int | tuple[int, int]) -> tuple[int, int]:
    """Resize's target ``(h, w)``: an int sets the shorter side, keeping the aspect ratio.

    MindSpore's rule: the longer side is ``floor(longer / shorter * size)`` (computed in float).
    """
    if isinstance(size, tuple):
        return size
    if height < width:
        return size, max(1, math.floor(width / height * size))
    return max(1, math.floor(height / width * size)), size


def _as_hw(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else size


def parse_fill(fill_value: object) -> int | tuple[int, int, int]:
    """``fill_value``: an int in [0, 255] or a 3-tuple of them (one per channel)."""
    type_check(fill_value, (int, tuple), "fill_value")
    if isinstance(fill_value, int):
        return check_int(fill_value, "fill_value", 0, 255)
    values = cast(tuple[object, ...], fill_value)
    if len(values) != 3:
        raise WrongTypeError(
            f"fill_value should be a single integer or a 3-tuple, got {fill_value!r}."
        )
    r, g, b = (check_int(v, "fill_value", 0, 255) for v in values)
    return (r, g, b)


def parse_padding(padding: object) -> tuple[int, int, int, int]:
    """``padding`` as (left, top, right, bottom).

    An int pads all four borders; two values are (left and right, top and bottom).
    """
    type_check(padding, (int, list, tuple), "padding")
    if isinstance(padding, int):
        p = check_int(padding, "padding", 0)
        return (p, p, p, p)
    seq = cast(Sequence[object], padding)
    if len(seq) == 2:
        lr, tb = (check_int(v, "padding", 0) for v in seq)
        return (lr, tb, lr, tb)
    if len(seq) == 4:
        left, top, right, bottom = (check_int(v, "padding", 0) for v in seq)
        return (left, top, right, bottom)
    raise WrongTypeError(
        f"The size of the padding list or tuple should be 2 or 4, got {padding!r}."
    )


def _check_inter(interpolation: object) -> Inter:
    type_check(interpolation, (Inter,), "interpolation")
    return cast(Inter, interpolation)


class Resize(TensorOperation):
    """Resize to ``size``: an int sets the shorter side (aspect ratio kept), ``(h, w)`` is exact.

    Example::

        >>> Resize(16)(np.zeros((32, 64, 3), np.uint8)).shape
        (16, 32, 3)
    """

    def __init__(self, size: int | Sequence[int], interpolation: Inter = Inter.LINEAR) -> None:
        self.size = check_size(size)
        self.interpolation = _check_inter(interpolation)

    def _params(self) -> dict[str, object]:
        return {"size": self.size, "interpolation": self.interpolation}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "Resize")
        check_image(img, "Resize")
        out_h, out_w = output_size_for(img.shape[0], img.shape[1], self.size)
        return resize(img, out_h, out_w, self.interpolation)


class CenterCrop(TensorOperation):
    """Crop the centre ``size`` region; an image smaller than ``size`` is zero-padded first.

    The crop starts at ``floor((H - h) / 2)``, ``floor((W - w) / 2)``. Padding puts
    ``ceil(missing / 2)`` rows (columns) on the top (left), as MindSpore does.
    """

    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = check_size(size)

    def _params(self) -> dict[str, object]:
        return {"size": self.size}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "CenterCrop")
        check_image(img, "CenterCrop")
        crop_h, crop_w = _as_hw(self.size)
        height, width = img.shape[:2]
        pad_h, pad_w = max(0, crop_h - height), max(0, crop_w - width)
        if pad_h or pad_w:
            # MindSpore puts the larger half of an odd padding on the top / left.
            top, left = pad_h - pad_h // 2, pad_w - pad_w // 2
            img = pad_image(img, top, pad_h - top, left, pad_w - left)
            height, width = img.shape[:2]
        top, left = (height - crop_h) // 2, (width - crop_w) // 2
        return img[top : top + crop_h, left : left + crop_w]


class RandomCrop(BatchOperation):
    """Crop a random ``size`` region, after optional padding (MindSpore's arguments).

    ``padding``: int (all borders), ``(left/right, top/bottom)`` or ``(left, top, right, bottom)``.
    ``pad_if_needed``: pad left/right (top/bottom) by the missing width (height) when the
    padded image is still smaller than ``size``. ``fill_value``: the constant for
    ``Border.CONSTANT`` (int or RGB tuple). The crop corner is uniform, drawn from the row seed.

    Vectorized: ``apply_batch(batch, seeds)`` pads the whole batch once and copies each row's
    window, equal to the per-row calls. It is not offloadable (as in MindSpore): it changes the
    image size, so it must run before ``batch`` stacks the rows; a map runs it once per chunk.
    """

    is_random = True
    offloadable = False

    def __init__(
        self,
        size: int | Sequence[int],
        padding: int | Sequence[int] | None = None,
        pad_if_needed: bool = False,
        fill_value: int | tuple[int, int, int] = 0,
        padding_mode: Border = Border.CONSTANT,
    ) -> None:
        self.size = check_size(size)
        self.padding = None if padding is None else parse_padding(padding)
        type_check(pad_if_needed, (bool,), "pad_if_needed")
        self.pad_if_needed = pad_if_needed
        self.fill_value = parse_fill(fill_value)
        type_check(padding_mode, (Border,), "padding_mode")
        self.padding_mode = padding_mode

    def _params(self) -> dict[str, object]:
        return {
            "size": self.size,
            "padding": self.padding,
            "pad_if_needed": self.pad_if_needed,
            "fill_value": self.fill_value,
            "padding_mode": self.padding_mode,
        }

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        check_image_shape(shape, dtype, "RandomCrop")

    def _pad(self, batch: np.ndarray) -> np.ndarray:
        crop_h, crop_w = _as_hw(self.size)
        left, top, right, bottom = self.padding or (0, 0, 0, 0)
        if self.pad_if_needed:
            missing_w = crop_w - (batch.shape[2] + left + right)
            missing_h = crop_h - (batch.shape[1] + top + bottom)
            if missing_w > 0:
                left, right = left + missing_w, right + missing_w
            if missing_h > 0:
                top, bottom = top + missing_h, bottom + missing_h
        return pad_batch(batch, top, bottom, left, right, self.padding_mode, self.fill_value)

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        padded = self._pad(batch)
        crop_h, crop_w = _as_hw(self.size)
        height, width = padded.shape[1:3]
        if crop_h > height or crop_w > width:
            raise ArgumentError(
                f"RandomCrop: crop size {(crop_h, crop_w)!r} is bigger than the (padded) image "
                f"{(height, width)!r}; use padding or pad_if_needed=True"
            )
        u = self._uniforms(seeds, 2)
        tops = np.minimum((u[:, 0] * (height - crop_h + 1)).astype(np.intp), height - crop_h)
        lefts = np.minimum((u[:, 1] * (width - crop_w + 1)).astype(np.intp), width - crop_w)
        out = np.empty((padded.shape[0], crop_h, crop_w, *padded.shape[3:]), padded.dtype)
        for i, (top, left) in enumerate(zip(tops.tolist(), lefts.tolist(), strict=True)):
            out[i] = padded[i, top : top + crop_h, left : left + crop_w]
        return out


def check_crop_resize_args(
    size: object, scale: object, ratio: object, interpolation: object, max_attempts: object
) -> tuple[tuple[int, int], tuple[float, float], tuple[float, float], Inter, int]:
    """Validate the arguments shared by RandomResizedCrop and RandomCropDecodeResize."""
    return (
        _as_hw(check_size(size)),
        check_minmax_pair(scale, "scale", 0.0, FLOAT_MAX),
        check_minmax_pair(ratio, "ratio", 0.0, FLOAT_MAX, left_open=True),
        _check_inter(interpolation),
        check_int(max_attempts, "max_attempts", 1),
    )


class CropResizeOperation(TensorOperation):
    """Base of the ops that crop a random area/aspect-ratio box and resize it to ``size``:
    MindSpore's (size, scale, ratio, interpolation, max_attempts) arguments, checked once."""

    is_random = True

    def __init__(
        self,
        size: int | Sequence[int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: Inter = Inter.LINEAR,
        max_attempts: int = 10,
    ) -> None:
        (self.size, self.scale, self.ratio, self.interpolation, self.max_attempts) = (
            check_crop_resize_args(size, scale, ratio, interpolation, max_attempts)
        )

    def _params(self) -> dict[str, object]:
        return {
            "size": self.size,
            "scale": self.scale,
            "ratio": self.ratio,
            "interpolation": self.interpolation,
            "max_attempts": self.max_attempts,
        }


class RandomResizedCrop(CropResizeOperation):
    """Crop a random area/aspect-ratio region and resize it to ``size`` (int: square).

    See ``mrecord/vision/_crop_box.py`` for the box algorithm (MindSpore's).
    """

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "RandomResizedCrop")
        check_image(img, "RandomResizedCrop")
        top, left, crop_h, crop_w = crop_box_for_seed(
            img.shape[0],
            img.shape[1],
            self.scale,
            self.ratio,
            self.max_attempts,
            functools.partial(self._uniforms, np.array([seed], dtype=np.uint64)),
        )
        crop = img[top : top + crop_h, left : left + crop_w]
        return resize(crop, self.size[0], self.size[1], self.interpolation)
