"""The serve extra's third-party packages (and the Starlette types the app is annotated
with), imported in one place with a helpful error."""

from __future__ import annotations

from mrecord.errors import MissingDependencyError

try:
    import anyio
    import anyio.to_thread
    import starlette.applications
    import starlette.background
    import starlette.exceptions
    import starlette.responses
    import starlette.routing
    from starlette.datastructures import QueryParams
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the serve extra is in dev
    raise MissingDependencyError(
        f"mrecord serve needs Starlette and uvicorn ({exc.name} is missing): "
        "pip install 'mrecord[serve]'"
    ) from exc

__all__ = [
    "ASGIApp",
    "JSONResponse",
    "Message",
    "QueryParams",
    "Receive",
    "Request",
    "Response",
    "Scope",
    "Send",
    "anyio",
    "starlette",
]
