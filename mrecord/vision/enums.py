"""Enums of ``mrecord.vision``: interpolation, border and slice modes (MindSpore's names)."""

from __future__ import annotations

from enum import Enum


class _ReadableEnum(str, Enum):
    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


__all__ = ["Border", "Inter", "SliceMode"]


class Inter(_ReadableEnum):
    """Interpolation used by Resize and the resized crops.

    ``LINEAR``/``BILINEAR``, ``NEAREST``, ``CUBIC``/``BICUBIC`` and ``AREA`` follow OpenCV's
    ``cv2.resize`` conventions (pixel centres at +0.5, cubic a = -0.75, edge replication);
    ``PILCUBIC`` and ``ANTIALIAS`` use Pillow's bicubic and Lanczos filters.
    """

    NEAREST = "nearest"
    LINEAR = "linear"
    BILINEAR = "linear"
    CUBIC = "cubic"
    BICUBIC = "cubic"
    AREA = "area"
    PILCUBIC = "pilcubic"
    ANTIALIAS = "antialias"


class Border(_ReadableEnum):
    """How padding fills new pixels (values are ``numpy.pad`` mode names).

    ``CONSTANT``: ``fill_value``; ``EDGE``: repeat the edge pixel; ``REFLECT``: mirror without
    repeating the edge (``3 2 1 | 1 2 3`` is ``3 2 | 1 2 3``); ``SYMMETRIC``: mirror repeating it.
    """

    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


class SliceMode(_ReadableEnum):
    """What SlicePatches does when the image does not divide evenly.

    ``PAD``: pad right and bottom with ``fill_value`` up to the next multiple;
    ``DROP``: drop the remainder rows and columns.
    """

    PAD = "pad"
    DROP = "drop"
