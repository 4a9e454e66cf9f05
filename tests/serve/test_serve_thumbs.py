"""Thumbnails: every image form gives a small PNG of the same picture; hostile sizes are refused."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from harness.gallery import picture
from mrecord.errors import DecodeError
from mrecord.serve.server.thumbs import MAX_SOURCE_PIXELS, ThumbnailCache, thumbnail_png


def _png_of(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("form", ["hwc", "chw", "hw", "hw1", "png", "jpeg"])
def test_every_image_form_gives_a_capped_png_of_the_picture(form: str) -> None:
    img = picture(2, 0)  # 48x48x3
    value: object
    if form == "hwc":
        value = img
    elif form == "chw":
        value = np.ascontiguousarray(np.moveaxis(img, -1, 0))
    elif form in ("hw", "hw1"):
        img = np.ascontiguousarray(img[:, :, 1])
        value = img[:, :, None] if form == "hw1" else img
    else:
        out = io.BytesIO()
        Image.fromarray(img).save(out, format=form.upper(), quality=95)
        value = out.getvalue()
    got = _png_of(thumbnail_png(value, 24))
    assert got.shape[:2] == (24, 24)
    want = img if img.ndim == 3 else np.repeat(img[:, :, None], 3, axis=2)
    small = want.reshape(24, 2, 24, 2, 3).mean(axis=(1, 3))
    assert np.abs(got.astype(np.float64) - small).mean() < 12


def test_a_picture_is_never_enlarged() -> None:
    got = _png_of(thumbnail_png(picture(1, 1), 256))
    assert got.shape[:2] == (48, 48)


def _png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def test_a_huge_declared_picture_is_refused_before_decoding() -> None:
    with pytest.raises(DecodeError, match="pixels"):
        thumbnail_png(_png_header_only(20_000, MAX_SOURCE_PIXELS // 20_000 + 1), 64)


@pytest.mark.parametrize("value", [b"", b"not an image", np.zeros(5, dtype=np.uint8), "text", 3])
def test_non_images_are_decode_errors(value: object) -> None:
    with pytest.raises(DecodeError):
        thumbnail_png(value, 64)


def test_the_cache_keeps_recent_thumbnails_within_its_size() -> None:
    cache = ThumbnailCache(max_bytes=100)
    cache.put(("a",), b"x" * 60)
    cache.put(("b",), b"y" * 30)
    assert cache.get(("a",)) == b"x" * 60  # a is now the most recent
    cache.put(("c",), b"z" * 30)  # 120 bytes: b, the least recent, goes
    assert cache.get(("b",)) is None
    assert cache.get(("a",)) is not None and cache.get(("c",)) is not None
    cache.put(("big",), b"w" * 101)  # larger than the whole cache: not kept
    assert cache.get(("big",)) is None
