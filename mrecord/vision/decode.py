"""Decoding encoded images (Pillow): Decode and RandomCropDecodeResize."""

from __future__ import annotations

import functools
import io
import math
from typing import Any

import numpy as np

from mrecord.errors import DecodeError, WrongTypeError
from mrecord.transforms.base import TensorOperation
from mrecord.transforms.validators import type_check
from mrecord.vision._crop_box import crop_box_for_seed
from mrecord.vision._fastimage import bgr_to_rgb, decode_jpeg, fast_jpeg_available, jpeg_header
from mrecord.vision._pil import pil_image
from mrecord.vision._resize import resize
from mrecord.vision.geometry import CropResizeOperation

__all__ = ["Decode", "RandomCropDecodeResize", "draft_reduction", "encoded_bytes", "open_image"]


def encoded_bytes(value: object, op_name: str) -> bytes:
    """The encoded image bytes of a ``bytes``-like value or a 1-D numeric array (its raw bytes)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.dtype.kind in "iuf":
            # The raw bytes, whatever the dtype: MindSpore decodes np.fromfile(path)
            # (float64 by default) the same way.
            return value.tobytes()
        if value.dtype.kind == "S" and value.ndim == 0:
            return bytes(value.item())
        hint = " (it looks already decoded; remove Decode)" if value.ndim in (2, 3) else ""
        raise WrongTypeError(
            f"{op_name}: the input should be encoded image bytes (bytes or a 1-D uint8 array), "
            f"got an array of shape {value.shape!r} and dtype {value.dtype}{hint}"
        )
    raise WrongTypeError(
        f"{op_name}: the input should be encoded image bytes (bytes or a 1-D uint8 array), "
        f"got {type(value).__name__}"
    )


def open_image(data: bytes, op_name: str) -> Any:
    """Open ``data`` lazily with Pillow (header only), raising DecodeError for non-images."""
    image_mod = pil_image(op_name)
    try:
        return image_mod.open(io.BytesIO(data))
    except Exception as exc:  # Pillow raises UnidentifiedImageError, OSError, ValueError, ...
        raise DecodeError(
            f"{op_name}: image decode failed: {len(data)} bytes starting with {data[:16]!r} are "
            f"not a JPEG, PNG, BMP, GIF, TIFF or WebP image; check that the column holds "
            f"encoded images"
        ) from exc


def draft_reduction(crop_h: int, crop_w: int, out_h: int, out_w: int) -> int:
    """The largest JPEG scale-down (1, 2, 4 or 8) keeping the crop at least ``out`` pixels."""
    reduce = 1
    while reduce < 8 and crop_h // (2 * reduce) >= out_h and crop_w // (2 * reduce) >= out_w:
        reduce *= 2
    return reduce


def _load_rgb(image: Any, data: bytes, op_name: str) -> np.ndarray:
    try:
        rgb = image.convert("RGB") if image.mode != "RGB" else image
        rgb.load()
        return np.asarray(rgb)
    except Exception as exc:  # truncated or damaged data fails at load time
        raise DecodeError(
            f"{op_name}: image decode failed: the {image.format or 'image'} data "
            f"({len(data)} bytes) is damaged or truncated: {exc}"
        ) from exc


class Decode(TensorOperation):
    """Decode JPEG/PNG/BMP/... bytes to an RGB ``<H, W, 3>`` uint8 image (Pillow).

    Greyscale, palette and RGBA images are converted to RGB, as MindSpore's Decode does.
    Non-image bytes raise :class:`mrecord.errors.DecodeError` naming their length and first bytes.
    """

    def __init__(self, to_pil: bool = False) -> None:
        type_check(to_pil, (bool,), "to_pil")
        self.to_pil = to_pil

    def _params(self) -> dict[str, object]:
        return {"to_pil": self.to_pil} if self.to_pil else {}

    def _compute(self, *arrays: Any, seed: int) -> Any:
        data = encoded_bytes(arrays[0], "Decode")
        size = _fast_jpeg_size(data)
        decoded = _fast_jpeg(data, 1, size) if size is not None else None
        if decoded is not None:
            rgb = decoded[0] if decoded[1] else bgr_to_rgb(decoded[0])
        else:
            rgb = _load_rgb(open_image(data, "Decode"), data, "Decode")
        if self.to_pil:
            return pil_image("Decode").fromarray(rgb)
        return rgb


def _fast_jpeg_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` when a fast decoder is installed and ``data`` is an 8-bit colour or
    grey JPEG (where simplejpeg, OpenCV and Pillow give the same pixels: all are libjpeg);
    None otherwise (CMYK JPEGs and other formats go to Pillow)."""
    if not fast_jpeg_available():
        return None
    header = jpeg_header(data)
    if header is None or header[2] not in (1, 3):
        return None
    return header[0], header[1]


def _fast_jpeg(data: bytes, reduce: int, size: tuple[int, int]) -> tuple[np.ndarray, bool] | None:
    """The fast decode at ``1 / reduce`` scale, ``(pixels, is_rgb)`` (else BGR), or None
    (then Pillow decodes)."""
    decoded = decode_jpeg(data, reduce)
    width, height = size
    expected = (math.ceil(height / reduce), math.ceil(width / reduce))
    if decoded is None or decoded[0].shape[:2] != expected:
        return None
    return decoded


class RandomCropDecodeResize(CropResizeOperation):
    """Decode, crop a random region (RandomResizedCrop's box) and resize it to ``size``.

    The box is computed from the image header alone. For JPEG only what is needed is decoded:
    libjpeg decodes at 1/2, 1/4 or 1/8 scale (Pillow's ``draft``, OpenCV's
    ``IMREAD_REDUCED_*``) when the crop would still be at least ``size`` pixels, which is much
    faster on large images (the result differs slightly from a full decode followed by a
    crop). With simplejpeg / OpenCV installed, colour and grey JPEGs are decoded by them (same
    pixels as Pillow's decode) and resized by OpenCV (its arithmetic), without Pillow at all.
    """

    def _compute(self, *arrays: Any, seed: int) -> np.ndarray:
        name = "RandomCropDecodeResize"
        data = encoded_bytes(arrays[0], name)
        fast_size = _fast_jpeg_size(data)
        image: Any = open_image(data, name) if fast_size is None else None
        width, height = fast_size if fast_size is not None else image.size
        draw = functools.partial(self._uniforms, np.array([seed], dtype=np.uint64))
        box = crop_box_for_seed(height, width, self.scale, self.ratio, self.max_attempts, draw)
        reduce = 1
        if fast_size is not None or image.format == "JPEG":
            reduce = draft_reduction(box[2], box[3], self.size[0], self.size[1])
        if fast_size is not None:
            decoded = _fast_jpeg(data, reduce, fast_size)
            if decoded is not None:  # crop and resize work per channel: swap the channels last
                out = _crop_resize(decoded[0], box, (width, height), self)
                return out if decoded[1] else bgr_to_rgb(out)
            image = open_image(data, name)  # Pillow decodes it, or names what is wrong
        if reduce > 1:
            image.draft("RGB", (math.ceil(width / reduce), math.ceil(height / reduce)))
        rgb = _load_rgb(image, data, name)
        return _crop_resize(rgb, box, (width, height), self)


def _crop_resize(
    img: np.ndarray,
    box: tuple[int, int, int, int],
    full_size: tuple[int, int],
    op: RandomCropDecodeResize,
) -> np.ndarray:
    """Crop ``box`` (in full-size pixels) out of ``img`` (full size or reduced), then resize."""
    top, left, crop_h, crop_w = box
    width, height = full_size
    sy, sx = img.shape[0] / height, img.shape[1] / width
    y0, x0 = round(top * sy), round(left * sx)
    y1 = max(y0 + 1, min(img.shape[0], round((top + crop_h) * sy)))
    x1 = max(x0 + 1, min(img.shape[1], round((left + crop_w) * sx)))
    return resize(img[y0:y1, x0:x1], op.size[0], op.size[1], op.interpolation)
