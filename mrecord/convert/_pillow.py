"""Optional Pillow import with an error that names the extra to install."""

from __future__ import annotations

import re
from typing import Any

from mrecord.errors import MissingDependencyError

__all__ = ["describe_image_error", "require_pillow"]

# Pillow names the in-memory file it was given: "cannot identify image file <_io.BytesIO
# object at 0x7f...>". That says nothing to a user, so it is replaced.
_OBJECT_REPR = re.compile(r"\s*<_?[\w.]+ object at 0x[0-9a-fA-F]+>")


def require_pillow() -> Any:
    """Return ``PIL.Image``, or raise ImportError saying how to install it."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow is a dev dependency
        raise MissingDependencyError(
            "this conversion needs Pillow: pip install 'mrecord[vision]'"
        ) from exc
    return Image


def describe_image_error(exc: BaseException, data: bytes) -> str:
    """Why Pillow could not read ``data``, without Pillow's in-memory file repr."""
    if type(exc).__name__ == "UnidentifiedImageError":
        return (
            f"not a readable image: {len(data)} bytes starting with {data[:8]!r} are not a "
            "format Pillow knows (JPEG, PNG, GIF, BMP, TIFF, WebP, ...)"
        )
    text = _OBJECT_REPR.sub("", str(exc)).strip() or type(exc).__name__
    return f"not a readable image: {type(exc).__name__}: {text}"
