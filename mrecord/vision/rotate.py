"""Rotate: OpenCV's affine rotation as MindSpore runs it, in numpy.

The rotation matrix is ``getRotationMatrix2D(center, degrees, 1)`` with the default centre
``((W - 1) / 2, (H - 1) / 2)``; positive degrees turn counter-clockwise. With ``expand`` the
output is the rotated image's bounding box (``round`` of its float size) and the matrix is
shifted to centre the image in it. Each output pixel samples the input through the inverse
matrix, coordinates kept to 1/1024 of a pixel as OpenCV's ``warpAffine`` does; NEAREST picks
the pixel at ``floor(x + 0.5)``, LINEAR blends the four neighbours. Pixels that come from
outside the input get ``fill_value``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation, to_array
from mrecord.vision._image import check_image
from mrecord.vision.enums import Inter
from mrecord.vision.geometry import parse_fill

__all__ = ["Rotate"]

_SCALE = 1024  # OpenCV's AB_SCALE: source coordinates in 1/1024 pixel


class Rotate(TensorOperation):
    """Rotate the image by ``degrees`` counter-clockwise (MindSpore's ``vision.Rotate``).

    Args:
        degrees: the angle in degrees.
        resample: ``Inter.NEAREST`` (default), ``Inter.LINEAR`` / ``BILINEAR``.
        expand: grow the output to hold the whole rotated image.
        center: ``(x, y)`` of the rotation centre (default the image centre).
        fill_value: the value (or RGB triple) of pixels from outside the image.
    """

    def __init__(
        self,
        degrees: float,
        resample: Inter = Inter.NEAREST,
        expand: bool = False,
        center: Sequence[float] | None = None,
        fill_value: int | tuple[int, int, int] = 0,
    ) -> None:
        if isinstance(degrees, bool) or not isinstance(degrees, (int, float)):
            raise WrongTypeError(f"Argument degrees with value {degrees!r} is not a number")
        if resample not in (Inter.NEAREST, Inter.LINEAR):
            raise ArgumentError(
                f"Rotate: resample must be Inter.NEAREST or Inter.LINEAR, got {resample!r}"
            )
        if not isinstance(expand, bool):
            raise WrongTypeError(f"Argument expand with value {expand!r} is not a bool")
        if center is not None and len(center) != 2:
            raise ArgumentError(f"Rotate: center must be (x, y), got {center!r}")
        self.degrees = float(degrees)
        self.resample = resample
        self.expand = expand
        self.center = None if center is None else (float(center[0]), float(center[1]))
        self.fill_value = parse_fill(fill_value)

    def _params(self) -> dict[str, object]:
        return {
            "degrees": self.degrees,
            "resample": self.resample,
            "expand": self.expand,
            "center": self.center,
            "fill_value": self.fill_value,
        }

    def _matrix(self, height: int, width: int) -> tuple[np.ndarray, int, int]:
        cx, cy = self.center if self.center is not None else ((width - 1) / 2, (height - 1) / 2)
        rad = math.radians(self.degrees)
        a, b = math.cos(rad), math.sin(rad)
        m = np.array([[a, b, (1 - a) * cx - b * cy], [-b, a, b * cx + (1 - a) * cy]])
        out_h, out_w = height, width
        if self.expand:
            bw = abs(a) * width + abs(b) * height
            bh = abs(b) * width + abs(a) * height
            out_w, out_h = round(bw), round(bh)
            m[0, 2] += bw / 2 - cx - 0.5
            m[1, 2] += bh / 2 - cy - 0.5
        return m, out_h, out_w

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "Rotate")
        check_image(img, "Rotate")
        height, width = img.shape[:2]
        m, out_h, out_w = self._matrix(height, width)
        inv = np.linalg.inv(np.vstack([m, [0.0, 0.0, 1.0]]))[:2]
        ys, xs = np.mgrid[0:out_h, 0:out_w].astype(np.float64)
        # OpenCV adds the x and y parts separately, each rounded to 1/1024 pixel
        sx = np.rint(inv[0, 0] * xs * _SCALE) + np.rint((inv[0, 1] * ys + inv[0, 2]) * _SCALE)
        sy = np.rint(inv[1, 0] * xs * _SCALE) + np.rint((inv[1, 1] * ys + inv[1, 2]) * _SCALE)
        fill = np.asarray(self.fill_value, dtype=img.dtype)
        if img.ndim == 3 and fill.ndim == 1 and len(fill) != img.shape[2]:
            fill = fill[:1]
        if self.resample is Inter.NEAREST:
            xi = np.floor((sx + _SCALE // 2) / _SCALE).astype(np.int64)
            yi = np.floor((sy + _SCALE // 2) / _SCALE).astype(np.int64)
            inside = (xi >= 0) & (xi < width) & (yi >= 0) & (yi < height)
            out = np.empty((out_h, out_w, *img.shape[2:]), dtype=img.dtype)
            out[...] = fill
            out[inside] = img[yi[inside], xi[inside]]
            return out
        # LINEAR: OpenCV keeps 1/32 pixel (INTER_TAB_SIZE) for the blend weights
        qx = np.floor((sx + _SCALE // 64) / (_SCALE // 32)) / 32
        qy = np.floor((sy + _SCALE // 64) / (_SCALE // 32)) / 32
        return _bilinear(img, qx, qy, fill)


def _bilinear(img: np.ndarray, sx: np.ndarray, sy: np.ndarray, fill: np.ndarray) -> np.ndarray:
    height, width = img.shape[:2]
    padded = np.empty((height + 2, width + 2, *img.shape[2:]), dtype=np.float64)
    padded[...] = fill
    padded[1:-1, 1:-1] = img
    x0 = np.floor(sx)
    y0 = np.floor(sy)
    fx, fy = sx - x0, sy - y0
    xi = np.clip(x0.astype(np.int64) + 1, 0, width + 1)
    yi = np.clip(y0.astype(np.int64) + 1, 0, height + 1)
    xj = np.clip(xi + 1, 0, width + 1)
    yj = np.clip(yi + 1, 0, height + 1)
    if img.ndim == 3:
        fx, fy = fx[..., None], fy[..., None]
    top = padded[yi, xi] * (1 - fx) + padded[yi, xj] * fx
    bottom = padded[yj, xi] * (1 - fx) + padded[yj, xj] * fx
    out = top * (1 - fy) + bottom * fy
    outside = (sx <= -1) | (sx >= width) | (sy <= -1) | (sy >= height)
    out[outside] = fill
    if img.dtype.kind in "iu":
        info = np.iinfo(img.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    result: np.ndarray = out.astype(img.dtype)
    return result
