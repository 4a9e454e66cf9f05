"""Optional Pillow import with an error that names the extra to install."""

from __future__ import annotations

from typing import Any

__all__ = ["require_pillow"]


def require_pillow() -> Any:
    """Return ``PIL.Image``, or raise ImportError saying how to install it."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow is a dev dependency
        raise ImportError("this conversion needs Pillow: pip install 'mrecord[vision]'") from exc
    return Image
