"""ToTensor, ToType and ToPIL: conversions between image representations."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.transforms.base import TensorOperation, to_array
from mrecord.transforms.type_cast import TypeCast, parse_dtype
from mrecord.vision._image import check_image
from mrecord.vision._pil import pil_image

__all__ = ["ToPIL", "ToTensor", "ToType"]


class ToTensor(TensorOperation):
    """``<H, W, C>`` (or ``<H, W>``) pixels in [0, 255] to ``<C, H, W>`` in [0, 1] of
    ``output_type`` (default float32); a PIL image is converted first."""

    def __init__(self, output_type: object = np.float32) -> None:
        self.output_type = parse_dtype(output_type, "output_type")

    def _params(self) -> dict[str, object]:
        return {"output_type": self.output_type.name}

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        img = to_array(arrays[0], "ToTensor")
        check_image(img, "ToTensor")
        if img.ndim == 2:
            img = img[..., None]
        scaled = img.astype(np.float32) / np.float32(255)
        out: np.ndarray = np.ascontiguousarray(scaled.transpose(2, 0, 1)).astype(
            self.output_type
        )
        return out


class ToType(TypeCast):
    """Cast the image to ``data_type`` (the same as ``transforms.TypeCast``)."""


class ToPIL(TensorOperation):
    """A decoded numpy image as a ``PIL.Image`` (needs Pillow: ``mrecord[vision]``)."""

    def _compute(self, *arrays: Any, seed: int) -> Any:
        value = arrays[0]
        if hasattr(value, "convert") and hasattr(value, "mode"):
            return value
        img = to_array(value, "ToPIL")
        check_image(img, "ToPIL")
        if img.ndim == 3 and img.shape[2] == 1:
            img = img[..., 0]
        return pil_image("ToPIL").fromarray(img)
