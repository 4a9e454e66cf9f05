"""The random crop box of RandomResizedCrop and RandomCropDecodeResize (MindSpore's algorithm).

Up to ``max_attempts`` times: draw an area fraction ``s`` uniform in ``scale`` and an aspect
ratio ``r`` log-uniform in ``ratio``; the box is ``w = round(sqrt(H*W*s*r))``,
``h = round(w / r)``; if it fits, its corner is uniform over the valid positions. If no
attempt fits, fall back to the largest centred box whose aspect ratio is clamped into ``ratio``.
Each attempt uses 4 uniforms from the row's seed, so the box is a pure function of the seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["UNIFORMS_PER_ATTEMPT", "crop_box_for_seed", "random_resized_crop_box"]

UNIFORMS_PER_ATTEMPT = 4


def random_resized_crop_box(
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    max_attempts: int,
    u: np.ndarray,
) -> tuple[int, int, int, int]:
    """``(top, left, crop_h, crop_w)`` for an image ``height x width`` from uniforms ``u``."""
    found = _attempts(height, width, scale, ratio, u.tolist(), 0, max_attempts)
    return found if found is not None else _fallback(height, width, ratio)


def crop_box_for_seed(
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    max_attempts: int,
    draw: Callable[[int], np.ndarray],
) -> tuple[int, int, int, int]:
    """:func:`random_resized_crop_box` with the uniforms drawn on demand: ``draw(k)`` gives
    the first ``k`` uniforms of the row's stream (a prefix of the same stream, so the box is
    the same); most boxes fit at the first attempt and need only 4 of them."""
    first = min(max_attempts, _FIRST_ATTEMPTS)
    found = _attempts(height, width, scale, ratio, draw(4 * first)[0].tolist(), 0, first)
    if found is None and max_attempts > first:
        u = draw(4 * max_attempts)[0].tolist()
        found = _attempts(height, width, scale, ratio, u, first, max_attempts)
    return found if found is not None else _fallback(height, width, ratio)


_FIRST_ATTEMPTS = 2  # 8 uniforms: one cheap draw (see mrecord.transforms.seeding)


def _attempts(
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    u: list[float],
    first: int,
    stop: int,
) -> tuple[int, int, int, int] | None:
    """Attempts ``first`` to ``stop - 1``; the first box that fits, or None."""
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for attempt in range(first, stop):
        u0, u1, u2, u3 = u[attempt * 4 : attempt * 4 + 4]
        sample_scale = scale[0] + (scale[1] - scale[0]) * u0
        aspect = math.exp(log_lo + (log_hi - log_lo) * u1)
        crop_w = round(math.sqrt(area * sample_scale * aspect))
        crop_h = round(crop_w / aspect)
        if 0 < crop_w <= width and 0 < crop_h <= height:
            top = min(int(u2 * (height - crop_h + 1)), height - crop_h)
            left = min(int(u3 * (width - crop_w + 1)), width - crop_w)
            return top, left, crop_h, crop_w
    return None


def _fallback(height: int, width: int, ratio: tuple[float, float]) -> tuple[int, int, int, int]:
    """The centred box when no attempt fits (aspect ratio clamped into ``ratio``)."""
    img_aspect = width / height
    if img_aspect < ratio[0]:
        crop_w, crop_h = width, round(width / ratio[0])
    elif img_aspect > ratio[1]:
        crop_h, crop_w = height, round(height * ratio[1])
    else:
        crop_h, crop_w = height, width
    crop_h, crop_w = max(1, min(crop_h, height)), max(1, min(crop_w, width))
    return (height - crop_h) // 2, (width - crop_w) // 2, crop_h, crop_w
