"""Optional fast image backends: OpenCV and simplejpeg, with Pillow and numpy as fallback.

- ``opencv-python-headless`` (``cv2``): the LINEAR and CUBIC interpolations of ``Resize`` and
  the resized crops (faster than the numpy filters; OpenCV's arithmetic is what
  MindSpore uses, the numpy fallback can differ by one grey level), JPEG decoding at reduced
  scale, flips, channel splits and table lookups for the fused image tail.
- ``simplejpeg``: full-scale JPEG decoding, faster than OpenCV's or Pillow's (all three are
  libjpeg-turbo with the same settings, so the pixels are the same; docs/BENCHMARKS.md's JPEG
  pipeline runs with them).

All of them release the GIL, so map worker threads scale. Without them everything runs on
Pillow and numpy. ``MRECORD_DISABLE_FAST_IMAGE=1`` in the environment (read at first use)
forces the fallback.

``mrecord.vision`` loads the backends when it is imported (a one-off cost once numpy is
loaded), so that the first pipeline run does not pay for it, as MindSpore loads its image
libraries when it is imported.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any

import numpy as np

from mrecord.vision.enums import Inter

__all__ = [
    "bgr_to_rgb",
    "decode_jpeg",
    "fast_jpeg_available",
    "jpeg_header",
    "opencv",
    "resize_cv2",
    "simplejpeg",
]

_DISABLE_ENV = "MRECORD_DISABLE_FAST_IMAGE"


def _disabled() -> bool:
    return os.environ.get(_DISABLE_ENV, "") not in ("", "0")


@functools.lru_cache(maxsize=1)
def opencv() -> Any | None:
    """The ``cv2`` module, or None when it is not installed or disabled by the environment."""
    if _disabled():
        return None
    try:
        import cv2
    except ImportError:
        return None
    return cv2


@functools.lru_cache(maxsize=1)
def simplejpeg() -> Any | None:
    """The ``simplejpeg`` module, or None when it is not installed or disabled."""
    if _disabled():
        return None
    try:  # imported by name: the package ships no type information
        return importlib.import_module("simplejpeg")
    except ImportError:
        return None


def fast_jpeg_available() -> bool:
    """Whether a fast JPEG decoder (simplejpeg or OpenCV) is there."""
    return simplejpeg() is not None or opencv() is not None


def clear_cache() -> None:
    """Look the backends up again at next use (after changing the environment; for tests)."""
    opencv.cache_clear()
    simplejpeg.cache_clear()


# Only the two whose OpenCV results stay within one grey level of the numpy filters (checked
# by tests/transforms/test_vision_fastimage.py); OpenCV's NEAREST and AREA index pixels
# slightly differently.
_CV2_INTER = {Inter.LINEAR: "INTER_LINEAR", Inter.CUBIC: "INTER_CUBIC"}


def resize_cv2(img: np.ndarray, out_h: int, out_w: int, inter: Inter) -> np.ndarray | None:
    """``img`` resized by OpenCV, or None when OpenCV is missing or cannot take this input.

    Taken: uint8 or float32 ``<H, W>`` / ``<H, W, C>`` images with 1 to 4 channels, LINEAR
    or CUBIC. The dtype and the channel axis are kept.
    """
    cv2 = opencv()
    name = _CV2_INTER.get(inter)
    if cv2 is None or name is None or img.dtype not in (np.uint8, np.float32):
        return None
    if img.ndim == 3 and not 1 <= img.shape[2] <= 4:
        return None
    if img.ndim not in (2, 3) or min(img.shape[:2]) < 1 or min(out_h, out_w) < 1:
        return None
    src = img if img.strides[-1] == img.itemsize else np.ascontiguousarray(img)
    out: np.ndarray = cv2.resize(src, (out_w, out_h), interpolation=getattr(cv2, name))
    if out.ndim < img.ndim:  # OpenCV drops a channel axis of length 1
        out = out.reshape(out_h, out_w, *img.shape[2:])
    return out


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # not DHT, JPG, DAC


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """``(width, height, components)`` of an 8-bit JPEG from its frame header, or None.

    Walks the marker segments up to the first SOF marker (a few steps, microseconds; Pillow's
    header parse costs far more). None for anything that is not a well-formed 8-bit JPEG.
    """
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    pos = 2
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xD8 or 0xD0 <= marker <= 0xD7 or marker == 0x01:  # no length
            pos += 2
            continue
        length = (data[pos + 2] << 8) | data[pos + 3]
        if length < 2:
            return None
        if marker in _SOF_MARKERS:
            if pos + 10 > n or data[pos + 4] != 8:
                return None
            height = (data[pos + 5] << 8) | data[pos + 6]
            width = (data[pos + 7] << 8) | data[pos + 8]
            components = data[pos + 9]
            return (width, height, components) if width and height else None
        if marker in (0xD9, 0xDA):  # end of image or scan before any frame header
            return None
        pos += 2 + length
    return None


def decode_jpeg(data: bytes, reduce: int = 1) -> tuple[np.ndarray, bool] | None:
    """A JPEG decoded at ``1 / reduce`` scale: ``(<H, W, 3> uint8, is_rgb)``.

    Full scale: simplejpeg (RGB) when installed, else OpenCV. ``reduce`` 2, 4 or 8: OpenCV
    (libjpeg's DCT-domain scaling, as Pillow's ``draft``). OpenCV gives RGB when it can
    (OpenCV >= 4.11, full scale), BGR otherwise: callers swap the channels
    (:func:`bgr_to_rgb`) after cropping and resizing, which work per channel, so the result
    is the same. None when no backend is there or it fails: the caller then decodes with
    Pillow, which also reports what is wrong with the data. EXIF orientation is ignored, as
    Pillow does.
    """
    sj = simplejpeg() if reduce == 1 else None
    if sj is not None:
        try:
            return sj.decode_jpeg(data, colorspace="RGB"), True
        except (ValueError, TypeError):  # damaged data: Pillow reports it
            return None
    cv2 = opencv()
    if cv2 is None or data[-2:] != b"\xff\xd9":  # no end marker: maybe truncated, ask Pillow
        return None
    flags = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4}
    flag = flags.get(reduce, cv2.IMREAD_REDUCED_COLOR_8)
    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.11: RGB straight away
    if reduce == 1 and rgb_flag is not None:
        flag = rgb_flag
    try:
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
    except cv2.error:
        return None
    if bgr is None or bgr.ndim != 3 or bgr.shape[2] != 3:
        return None
    out: np.ndarray = bgr
    return out, flag == rgb_flag


def bgr_to_rgb(bgr: np.ndarray) -> np.ndarray:
    """A C-contiguous RGB copy of a BGR ``<H, W, 3>`` uint8 image (OpenCV's SIMD swap)."""
    cv2 = opencv()
    if cv2 is not None and bgr.dtype == np.uint8 and bgr.ndim == 3 and bgr.shape[2] == 3:
        src = bgr if bgr.strides[-1] == 1 else np.ascontiguousarray(bgr)
        swapped: np.ndarray = cv2.cvtColor(src, cv2.COLOR_BGR2RGB)
        return swapped
    rgb: np.ndarray = np.ascontiguousarray(bgr[..., ::-1])
    return rgb
