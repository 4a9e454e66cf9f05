"""Pillow, imported on first use with an error that names the extra to install."""

from __future__ import annotations

from types import ModuleType

from mrecord.errors import MissingDependencyError

__all__ = ["pil_image"]


def pil_image(op_name: str) -> ModuleType:
    """Return ``PIL.Image`` or raise ImportError telling how to install Pillow."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow is a dev dependency
        raise MissingDependencyError(
            f"{op_name} needs Pillow to decode images: pip install 'mrecord[vision]'"
        ) from exc
    return Image
