"""The fused image tail: flips, Rescale and Normalize, then HWC2CHW, in one pass per channel.

The usual end of an image pipeline (``RandomHorizontalFlip, Rescale, Normalize, HWC2CHW``)
reads and writes the whole batch once per op: a uint8 copy for the flip, two float32
arrays for Rescale and Normalize, a strided copy for HWC2CHW. Here each channel of each
image is computed straight into its place in the ``<N, C, H, W>`` float32 output, reading
the flipped input through a reversed view.

Same result, bit for bit: flips only move pixels and commute with per-channel arithmetic,
and each channel goes through the very float32 operations of the ops' own ``_batch``
(``x * rescale + shift``, then ``(x - mean) / std``), one numpy ufunc at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mrecord.transforms import buffers as _buffers
from mrecord.transforms.fusion import BatchKernel, register_fuser
from mrecord.vision._fastimage import opencv
from mrecord.vision.flip import (
    HorizontalFlip,
    RandomHorizontalFlip,
    RandomVerticalFlip,
    VerticalFlip,
    flip_rows,
)
from mrecord.vision.pixel import HWC2CHW, Normalize, Rescale

__all__ = ["fuse_image_tail"]

_FLIPS = (HorizontalFlip, VerticalFlip, RandomHorizontalFlip, RandomVerticalFlip)
_ROW_BY_ROW_PIXELS = 4096  # from 64x64 images on, loop over images (no flipped copy)

_Step = tuple[Callable[..., Any], list[np.float32]]


def _fusable(op: object) -> bool:
    kind = type(op)
    return kind in _FLIPS or kind is Rescale or (kind is Normalize and op.is_hwc)  # type: ignore[attr-defined]


@register_fuser
def fuse_image_tail(ops: Sequence[Any], start: int) -> tuple[int, BatchKernel] | None:
    """Fuse ``ops[start:]`` when it is flips / Rescale / Normalize(is_hwc) ending in HWC2CHW."""
    end = start
    while end < len(ops) and _fusable(ops[end]):
        end += 1
    if end == start or end >= len(ops) or type(ops[end]) is not HWC2CHW:
        return None
    run = tuple(ops[start:end])
    return end + 1, functools.partial(_image_tail, run)


def _image_tail(
    run: tuple[Any, ...], batch: np.ndarray, seeds: Sequence[np.ndarray]
) -> np.ndarray | None:
    """``run`` then HWC2CHW on a ``<N, H, W, C>`` uint8 / float32 batch (None: not handled)."""
    if batch.ndim != 4 or batch.dtype not in (np.uint8, np.float32) or 0 in batch.shape:
        return None
    n, h, w, c = batch.shape
    hflip = np.zeros(n, dtype=bool)
    vflip = np.zeros(n, dtype=bool)
    steps: list[_Step] = []
    for op, op_seeds in zip(run, seeds, strict=False):
        if isinstance(op, _FLIPS):
            mask = op._mask(np.asarray(op_seeds, dtype=np.uint64))
            flips = vflip if op._axis == 0 else hflip
            if mask is None:
                flips ^= True
            else:
                flips ^= mask
        elif isinstance(op, Rescale):
            steps.append((np.multiply, [np.float32(op.rescale)] * c))
            steps.append((np.add, [np.float32(op.shift)] * c))
        else:  # Normalize, <H, W, C>
            if len(op.mean) not in (1, c):
                return None  # the op itself raises the channel error
            pick = [0] * c if len(op.mean) == 1 else list(range(c))
            steps.append((np.subtract, [op._mean32[k] for k in pick]))
            steps.append((np.divide, [op._std32[k] for k in pick]))
    out = _buffers.empty((n, c, h, w), np.float32 if steps else batch.dtype)
    if h * w >= _ROW_BY_ROW_PIXELS:
        cv2 = opencv() if batch.dtype == np.uint8 and steps and c <= 4 else None
        if cv2 is not None:
            _rows_by_lookup(cv2, batch, out, hflip, vflip, _channel_luts(steps, c))
            return out
        for i in range(n):
            image = batch[i]
            if hflip[i]:
                image = image[:, ::-1]
            if vflip[i]:
                image = image[::-1]
            for k in range(c):
                _channel(image[..., k], out[i, k], steps, k)
        return out
    src = batch
    if hflip.any():
        src = flip_rows(src, 2, np.flatnonzero(hflip))
    if vflip.any():
        src = flip_rows(src, 1, np.flatnonzero(vflip))
    for k in range(c):
        _channel(src[..., k], out[:, k], steps, k)
    return out


def _channel_luts(steps: list[_Step], c: int) -> list[np.ndarray]:
    """Per channel, the float32 result of ``steps`` for each of the 256 uint8 values: the
    same ufuncs on the same values, so looking a pixel up gives exactly its computed value."""
    values = np.arange(256, dtype=np.uint8)
    luts = []
    for k in range(c):
        lut = np.empty(256, dtype=np.float32)
        _channel(values, lut, steps, k)
        luts.append(lut)
    return luts


def _rows_by_lookup(
    cv2: Any,
    batch: np.ndarray,
    out: np.ndarray,
    hflip: np.ndarray,
    vflip: np.ndarray,
    luts: list[np.ndarray],
) -> None:
    """The row-by-row path for uint8 images with OpenCV: flip, split the channels, and one
    table lookup per channel into its output plane (one pass instead of two ufuncs)."""
    codes = {(True, False): 1, (False, True): 0, (True, True): -1}
    for i in range(batch.shape[0]):
        image = np.ascontiguousarray(batch[i])
        code = codes.get((bool(hflip[i]), bool(vflip[i])))
        if code is not None:
            image = cv2.flip(image, code)
        planes = cv2.split(image) if image.ndim == 3 and image.shape[2] > 1 else [image]
        for k, plane in enumerate(planes):
            dst = out[i, k]
            got = cv2.LUT(np.ascontiguousarray(plane.reshape(dst.shape)), luts[k], dst=dst)
            if not np.shares_memory(got, dst):  # OpenCV allocated its own: copy it in
                dst[...] = got


def _channel(src: np.ndarray, dst: np.ndarray, steps: list[_Step], k: int) -> None:
    """Channel ``k``: ``dst = steps(src)``, the first step casting to float32 as the ops do."""
    if not steps:
        dst[...] = src
        return
    first, values = steps[0]
    first(src, values[k], out=dst, dtype=np.float32)
    for fn, operands in steps[1:]:
        fn(dst, operands[k], out=dst)
