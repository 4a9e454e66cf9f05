"""Lazy imports of the optional ``mrecord[arrow]`` packages (pyarrow, datasets)."""

from __future__ import annotations

from types import ModuleType

__all__ = ["import_datasets", "import_pyarrow"]


def import_pyarrow() -> ModuleType:
    """``pyarrow``, or an ImportError naming the extra to install."""
    try:
        import pyarrow as module
    except ImportError as exc:
        raise ImportError(
            "Arrow, Parquet and Hugging Face support needs pyarrow: "
            "pip install 'mrecord[arrow]'"
        ) from exc
    return module  # type: ignore[no-any-return]


def import_datasets() -> ModuleType:
    """Hugging Face ``datasets``, or an ImportError naming the extra to install."""
    try:
        import datasets as module
    except ImportError as exc:
        raise ImportError(
            "Hugging Face support needs the datasets package: pip install 'mrecord[arrow]'"
        ) from exc
    return module  # type: ignore[no-any-return]
