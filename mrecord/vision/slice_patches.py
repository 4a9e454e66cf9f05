"""SlicePatches: cut an image into a grid of patches (for dataset slicing across ranks)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mrecord.transforms.base import TensorOperation, to_array
from mrecord.transforms.validators import check_int, type_check
from mrecord.vision._image import check_image, pad_image
from mrecord.vision.enums import SliceMode

__all__ = ["SlicePatches"]


class SlicePatches(TensorOperation):
    """Slice an ``<H, W>`` / ``<H, W, C>`` image into ``num_height x num_width`` patches.

    Returns a tuple of ``num_height * num_width`` arrays in row-major order (patch
    ``i * num_width + j`` is row ``i``, column ``j`` of the grid). With ``SliceMode.PAD`` the
    image is padded at the bottom and right with ``fill_value`` to ``ceil(H / num_height)``
    by ``ceil(W / num_width)`` patches; with ``SliceMode.DROP`` patches are
    ``floor(H / num_height)`` by ``floor(W / num_width)`` and the remainder is dropped.

    Example::

        >>> patches = SlicePatches(1, 2)(np.zeros((4, 6, 3), np.uint8))
        >>> [p.shape for p in patches]
        [(4, 3, 3), (4, 3, 3)]
    """

    def __init__(
        self,
        num_height: int = 1,
        num_width: int = 1,
        slice_mode: SliceMode = SliceMode.PAD,
        fill_value: int = 0,
    ) -> None:
        self.num_height = check_int(num_height, "num_height", 1, 512)
        self.num_width = check_int(num_width, "num_width", 1, 512)
        type_check(slice_mode, (SliceMode,), "slice_mode")
        self.slice_mode = slice_mode
        self.fill_value = check_int(fill_value, "fill_value", 0, 255)

    def _params(self) -> dict[str, object]:
        return {
            "num_height": self.num_height,
            "num_width": self.num_width,
            "slice_mode": self.slice_mode,
            "fill_value": self.fill_value,
        }

    def _compute(self, *arrays: Any, seed: int) -> tuple[np.ndarray, ...]:
        img = to_array(arrays[0], "SlicePatches")
        check_image(img, "SlicePatches")
        nh, nw = self.num_height, self.num_width
        height, width = img.shape[:2]
        if self.slice_mode is SliceMode.PAD:
            ph, pw = math.ceil(height / nh), math.ceil(width / nw)
            img = pad_image(img, 0, ph * nh - height, 0, pw * nw - width, fill=self.fill_value)
        else:
            ph, pw = height // nh, width // nw
            img = img[: ph * nh, : pw * nw]
        tail = img.shape[2:]
        grid = img.reshape(nh, ph, nw, pw, *tail).swapaxes(1, 2)
        return tuple(np.ascontiguousarray(grid[i, j]) for i in range(nh) for j in range(nw))
