"""PNG thumbnails of image values, size-capped and kept in a small LRU cache.

An image value is either encoded bytes (PNG, JPEG, GIF, BMP, WebP: decoded with
Pillow) or a ``uint8`` array shaped HW, HWC or CHW (C in 1, 3, 4). A picture
larger than :data:`MAX_SOURCE_PIXELS` is refused before it is decoded, so a
hostile value cannot make the server allocate without bound.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from mrecord.errors import DecodeError, MissingDependencyError

__all__ = ["MAX_SOURCE_PIXELS", "ThumbnailCache", "thumbnail_png"]

MAX_SOURCE_PIXELS = 40_000_000


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow is in the serve extra
        raise MissingDependencyError(
            "thumbnails need Pillow: pip install 'mrecord[serve]'"
        ) from exc
    return Image


def thumbnail_png(value: Any, max_side: int) -> bytes:
    """A PNG of ``value`` scaled to fit ``max_side`` x ``max_side``; DecodeError if not an image."""
    image_mod = _pillow()
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim in (2, 3):
        image = image_mod.fromarray(_hwc(value))
    elif isinstance(value, (bytes, bytearray, memoryview, np.ndarray)):
        data = bytes(value)
        try:
            image = image_mod.open(io.BytesIO(data))
            width, height = image.size
            if width * height > MAX_SOURCE_PIXELS:
                raise DecodeError(
                    f"image is {width}x{height} pixels, more than the {MAX_SOURCE_PIXELS:,} "
                    "a thumbnail is made from"
                )
            image.draft("RGB", (max_side, max_side))  # JPEG: decode at a reduced scale
            image.load()
        except DecodeError:
            raise
        except Exception as exc:  # Pillow raises many types for unreadable data
            raise DecodeError(
                f"value is not a readable image ({len(data)} bytes starting {data[:8]!r}): {exc}"
            ) from exc
    else:
        raise DecodeError(f"a {type(value).__name__} value is not an image")
    if image.mode not in ("RGB", "RGBA", "L"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    image.thumbnail((max_side, max_side))
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _hwc(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[2] not in (1, 3, 4) and arr.shape[0] in (1, 3, 4):
        arr = np.moveaxis(arr, 0, -1)  # CHW -> HWC
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 3 and arr.shape[2] not in (3, 4):
        raise DecodeError(f"a uint8 array of shape {arr.shape} is not an image")
    return np.ascontiguousarray(arr)


class ThumbnailCache:
    """A thread-safe LRU of PNG bytes, bounded by their total size."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._items: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> bytes | None:
        """The cached PNG for ``key`` (marking it recently used), or None."""
        with self._lock:
            png = self._items.get(key)
            if png is not None:
                self._items.move_to_end(key)
            return png

    def put(self, key: tuple[Any, ...], png: bytes) -> None:
        """Keep ``png``, dropping the least recently used entries beyond the size bound."""
        if len(png) > self._max:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = png
            self._bytes += len(png)
            while self._bytes > self._max:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)
