"""Colour adjustments on a batch ``(N, H, W, 3)`` of RGB images with one factor per image.

The formulas are MindSpore's (which uses OpenCV):

- brightness ``f``: ``img * f``;
- contrast ``f``: ``img * f + m * (1 - f)``, ``m`` the mean of the image's grey version
  (rounded to an integer for uint8 images, as OpenCV stores it in an 8-bit image);
- saturation ``f``: ``img * f + grey * (1 - f)``;
- hue ``h`` in [-0.5, 0.5]: rotate the hue by ``h`` of a turn in HSV space;
- sharpness ``f``: ``blur + f * (img - blur)`` with the 3x3 kernel ``[[1,1,1],[1,5,1],[1,1,1]]/13``,
  border pixels kept (PIL's ``ImageEnhance.Sharpness``).

Grey is OpenCV's ``RGB2GRAY``: for uint8 the exact fixed-point form
``(4899 R + 9617 G + 1868 B + 8192) >> 14``, for floats ``0.299 R + 0.587 G + 0.114 B``.
uint8 results are rounded half-to-even and saturated after each adjustment; float images are
neither rounded nor clipped. Hue is computed in float HSV (OpenCV quantizes hue to 8 bits),
so hue results can differ from MindSpore's by a grey level or two.
"""

from __future__ import annotations

import numpy as np

from mrecord.vision._image import restore_dtype

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_hue",
    "adjust_saturation",
    "adjust_sharpness",
    "grey",
]


def _per_image(factors: np.ndarray, ndim: int) -> np.ndarray:
    return factors.astype(np.float32).reshape((-1,) + (1,) * (ndim - 1))


def grey(batch: np.ndarray) -> np.ndarray:
    """The grey image ``(N, H, W)`` of an RGB batch (uint8 exact, else float32)."""
    if batch.dtype == np.uint8:
        rgb = batch.astype(np.int32)
        g = (rgb[..., 0] * 4899 + rgb[..., 1] * 9617 + rgb[..., 2] * 1868 + 8192) >> 14
        return g.astype(np.uint8)
    f = batch.astype(np.float32)
    out: np.ndarray = f[..., 0] * np.float32(0.299)
    out += f[..., 1] * np.float32(0.587)
    out += f[..., 2] * np.float32(0.114)
    return out


def _blend(batch: np.ndarray, other: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """``batch * f + other * (1 - f)`` per image, back in the batch's dtype."""
    f = _per_image(factors, batch.ndim)
    mixed = batch.astype(np.float32) * f + other.astype(np.float32) * (np.float32(1) - f)
    return restore_dtype(mixed, batch.dtype)


def adjust_brightness(batch: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Scale every pixel by the image's factor."""
    scaled = batch.astype(np.float32) * _per_image(factors, batch.ndim)
    return restore_dtype(scaled, batch.dtype)


def adjust_contrast(batch: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Blend each image with its mean grey level."""
    g = grey(batch).reshape(batch.shape[0], -1)
    if batch.dtype == np.uint8:
        mean = np.rint(g.sum(axis=1, dtype=np.int64) / g.shape[1])
    else:
        mean = g.sum(axis=1, dtype=np.float64) / g.shape[1]
    return _blend(batch, mean.astype(np.float32).reshape(-1, 1, 1, 1), factors)


def adjust_saturation(batch: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Blend each image with its grey version."""
    return _blend(batch, grey(batch)[..., np.newaxis], factors)


def _rgb_to_hsv(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    maxc = rgb.max(axis=-1)
    minc = rgb.min(axis=-1)
    delta = maxc - minc
    safe = np.where(delta > 0, delta, np.float32(1))
    h = np.where(
        maxc == r,
        ((g - b) / safe) % 6,
        np.where(maxc == g, (b - r) / safe + 2, (r - g) / safe + 4),
    )
    h = np.where(delta > 0, h / 6, np.float32(0))
    s = np.where(maxc > 0, delta / np.where(maxc > 0, maxc, np.float32(1)), np.float32(0))
    return h.astype(np.float32), s.astype(np.float32), maxc


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    h6 = h * 6
    sector = np.floor(h6).astype(np.int32) % 6
    frac = h6 - np.floor(h6)
    p = v * (1 - s)
    q = v * (1 - s * frac)
    t = v * (1 - s * (1 - frac))
    choices_r = [v, q, p, p, t, v]
    choices_g = [t, v, v, q, p, p]
    choices_b = [p, p, t, v, v, q]
    r = np.choose(sector, choices_r)
    g = np.choose(sector, choices_g)
    b = np.choose(sector, choices_b)
    return np.stack([r, g, b], axis=-1)


def adjust_hue(batch: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Rotate each image's hue by its factor (a fraction of a full turn)."""
    h, s, v = _rgb_to_hsv(batch.astype(np.float32))
    shift = factors.astype(np.float32).reshape(-1, 1, 1)
    h = (h + shift) % np.float32(1)
    return restore_dtype(_hsv_to_rgb(h, s, v), batch.dtype)


def adjust_sharpness(batch: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Blend each image with its smoothed version (``f > 1`` sharpens, ``f < 1`` blurs)."""
    height, width = batch.shape[1:3]
    f32 = batch.astype(np.float32)
    if height < 3 or width < 3:  # every pixel is a border pixel: nothing to blur
        unchanged: np.ndarray = batch.copy()
        return unchanged
    acc = np.zeros_like(f32[:, 1:-1, 1:-1])
    for dy in range(3):
        for dx in range(3):
            acc += f32[:, dy : dy + height - 2, dx : dx + width - 2]
    acc += np.float32(4) * f32[:, 1:-1, 1:-1]  # centre weight 5 = 1 (in the loop) + 4
    blurred = f32.copy()
    blurred[:, 1:-1, 1:-1] = acc / np.float32(13)
    degenerate = restore_dtype(blurred, batch.dtype).astype(np.float32)
    f = _per_image(factors, batch.ndim)
    out = degenerate + f * (f32 - degenerate)
    return restore_dtype(out, batch.dtype)
