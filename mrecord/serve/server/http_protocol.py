"""uvicorn's HTTP protocol with a deadline on every request's line and headers.

uvicorn closes an idle keep-alive connection only after a response (its keep-alive
timeout starts then), and ``limit_concurrency`` counts open connections: a client that
connects and sends nothing, or sends its headers a byte at a time (slowloris), would hold
one of ``--max-connections`` slots forever. Here a connection must deliver each request's
line and headers within ``header_timeout`` seconds of the connection (for the first
request) or of the request's first byte (for later ones), or it is closed. Bodies have
their own deadline in the app (``Limits.body_timeout_s``).

A plain (not TLS) connection's transport is a
:class:`~mrecord.serve.server.gather.GatheringTransport`: response bodies of many buffers
go out with ``writev``, not joined first; the scope's ``extensions`` say so
(``GATHER_EXTENSION``).
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mrecord.serve.server.gather import GATHER_EXTENSION, GatheringTransport, gathering

__all__ = ["protocol_with_header_timeout"]


class _HeaderDeadline(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` plus the header deadline (see the module docstring)."""

    header_timeout: ClassVar[float] = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(gathering(transport, self))
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        if isinstance(self.transport, GatheringTransport):
            self.scope.setdefault("extensions", {})[GATHER_EXTENSION] = {}
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if isinstance(self.transport, GatheringTransport):
            self.transport.forget()  # before asyncio closes the socket it watches
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.logger.debug("closed a connection that sent no whole request in time")
            self.transport.close()


def protocol_with_header_timeout(seconds: float) -> type[asyncio.Protocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``: requests' headers must
    arrive within ``seconds``."""
    return type("HeaderDeadlineProtocol", (_HeaderDeadline,), {"header_timeout": float(seconds)})
