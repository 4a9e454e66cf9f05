"""The serve extra's third-party packages, imported in one place with a helpful error."""

from __future__ import annotations

try:
    import anyio
    import anyio.to_thread
    import starlette.applications
    import starlette.exceptions
    import starlette.responses
    import starlette.routing
except ImportError as exc:  # pragma: no cover - the serve extra is in dev
    raise ImportError(
        f"mrecord serve needs Starlette and uvicorn ({exc.name} is missing): "
        "pip install 'mrecord[serve]'"
    ) from exc

__all__ = ["anyio", "starlette"]
