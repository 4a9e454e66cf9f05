"""Image resizing in numpy: separable filters as (index, weight) taps per output pixel.

For each axis and each output position ``d`` the filter is a short list of source indices and
weights (``taps``); resizing an axis is ``sum_k w[d, k] * src[idx[d, k]]``, one gather and one
multiply-add per tap over the whole image. Conventions are OpenCV's ``cv2.resize``:

- source coordinate of output pixel ``d``: ``x = (d + 0.5) * in / out - 0.5`` (pixel centres);
- LINEAR: 2 taps, ``x`` clamped into ``[0, in - 1]``;
- CUBIC: 4 taps, Keys kernel with ``a = -0.75``, edges replicated;
- NEAREST: ``floor(d * in / out)``;
- AREA when shrinking: each output pixel averages the source interval it covers, partial
  pixels weighted by coverage; when enlarging, AREA behaves as LINEAR;
- PILCUBIC / ANTIALIAS: Pillow's BICUBIC / LANCZOS (run channel by channel).

Integer images are computed in float32 and rounded half-to-even with saturation, so results
can differ from OpenCV's fixed-point arithmetic by one grey level. When OpenCV is installed
(``opencv-python-headless``), :func:`resize` uses ``cv2.resize`` itself for LINEAR and CUBIC.
"""

from __future__ import annotations

import math

import numpy as np

from mrecord.vision import _fastimage
from mrecord.vision._image import restore_dtype
from mrecord.vision._pil import pil_image
from mrecord.vision.enums import Inter

__all__ = ["resize", "resize_numpy"]

_CUBIC_A = -0.75


def _linear_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    x = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    x = np.clip(x, 0.0, n_in - 1)
    x0 = np.floor(x).astype(np.intp)
    t = x - x0
    idx = np.stack([x0, np.minimum(x0 + 1, n_in - 1)], axis=1)
    w = np.stack([1.0 - t, t], axis=1)
    return idx, w


def _cubic_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    a = _CUBIC_A
    x = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    x0 = np.floor(x).astype(np.intp)
    t = x - x0
    w0 = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + 1
    w2 = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1
    w3 = 1.0 - w0 - w1 - w2
    idx = np.clip(np.stack([x0 - 1, x0, x0 + 1, x0 + 2], axis=1), 0, n_in - 1)
    return idx, np.stack([w0, w1, w2, w3], axis=1)


def _nearest_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.minimum(np.floor(np.arange(n_out) * (n_in / n_out)).astype(np.intp), n_in - 1)
    return idx[:, np.newaxis], np.ones((n_out, 1))


def _area_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    if n_out >= n_in:
        return _linear_taps(n_in, n_out)
    scale = n_in / n_out
    start = np.arange(n_out) * scale
    end = start + scale
    first = np.floor(start).astype(np.intp)
    k = math.ceil(scale) + 1
    idx = first[:, np.newaxis] + np.arange(k)
    lo = np.maximum(idx, start[:, np.newaxis])
    hi = np.minimum(idx + 1, end[:, np.newaxis])
    w = np.clip(hi - lo, 0.0, None) / scale
    return np.minimum(idx, n_in - 1), w


_TAPS = {
    Inter.LINEAR: _linear_taps,
    Inter.CUBIC: _cubic_taps,
    Inter.NEAREST: _nearest_taps,
    Inter.AREA: _area_taps,
}


def _resize_axis(img: np.ndarray, axis: int, n_out: int, inter: Inter) -> np.ndarray:
    """Resize float32 ``img`` along ``axis`` (0: rows, 1: columns) to ``n_out``.

    The image is viewed as 2-D ``(H, W * C)`` so that each tap is one fast gather of whole
    rows (axis 0) or of precomputed flat column indices (axis 1), then a multiply-add.
    """
    height, width = img.shape[:2]
    chans = int(np.prod(img.shape[2:], dtype=np.int64))
    flat = img.reshape(height, width * chans)
    idx, w = _TAPS[inter](img.shape[axis], n_out)
    w32 = w.astype(np.float32)

    def tap(k: int) -> np.ndarray:
        if axis == 0:
            term: np.ndarray = flat[idx[:, k]]
            term *= w32[:, k, np.newaxis]
        else:
            cols = (idx[:, k, np.newaxis] * chans + np.arange(chans)).ravel()
            term = np.take(flat, cols, axis=1)
            term *= np.repeat(w32[:, k], chans)[np.newaxis, :]
        return term

    out = tap(0)  # every filter has at least one tap
    for k in range(1, idx.shape[1]):
        out += tap(k)
    shape = (n_out, width) if axis == 0 else (height, n_out)
    return out.reshape(*shape, *img.shape[2:])


def _resize_pil(img: np.ndarray, out_h: int, out_w: int, inter: Inter) -> np.ndarray:
    image_mod = pil_image("Resize")
    resample = image_mod.Resampling.BICUBIC if inter is Inter.PILCUBIC else image_mod.LANCZOS
    planes = img[..., np.newaxis] if img.ndim == 2 else img
    mode = "L" if planes.dtype == np.uint8 else "F"
    chans = []
    for c in range(planes.shape[2]):
        plane = np.ascontiguousarray(planes[..., c])
        if mode == "F":
            plane = plane.astype(np.float32)
        pic = image_mod.fromarray(plane, mode=mode)
        chans.append(np.asarray(pic.resize((out_w, out_h), resample=resample)))
    out = np.stack(chans, axis=2)
    if img.ndim == 2:
        out = out[..., 0]
    return restore_dtype(out, img.dtype)


def resize(img: np.ndarray, out_h: int, out_w: int, inter: Inter) -> np.ndarray:
    """Resize an ``<H, W>`` or ``<H, W, C>`` image to ``(out_h, out_w)``; dtype is kept.

    OpenCV's ``cv2.resize`` when it is installed and takes the input (see ``_fastimage``),
    else the numpy filters above.
    """
    h, w = img.shape[:2]
    if (h, w) == (out_h, out_w):
        return img
    if inter in (Inter.PILCUBIC, Inter.ANTIALIAS):
        return _resize_pil(img, out_h, out_w, inter)
    fast = _fastimage.resize_cv2(img, out_h, out_w, inter)
    if fast is not None:
        return fast
    return resize_numpy(img, out_h, out_w, inter)


def resize_numpy(img: np.ndarray, out_h: int, out_w: int, inter: Inter) -> np.ndarray:
    """:func:`resize` with the numpy filters only (LINEAR, CUBIC, NEAREST, AREA)."""
    h, w = img.shape[:2]
    if (h, w) == (out_h, out_w):
        return img
    work = img if img.dtype == np.float32 else img.astype(np.float32)
    # shrink rows first when that makes the second pass cheaper (the order is fixed per shape)
    axes = ((0, out_h), (1, out_w)) if out_h <= h else ((1, out_w), (0, out_h))
    for axis, n_out in axes:
        if work.shape[axis] != n_out:
            work = _resize_axis(work, axis, n_out, inter)
    if img.dtype == np.uint8:  # ``work`` is a fresh array here: round and clip in place
        np.rint(work, out=work)
        np.clip(work, 0, 255, out=work)
        return work.astype(np.uint8)
    return restore_dtype(work, img.dtype)
