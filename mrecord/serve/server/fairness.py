"""Each client's share of the server, so that one cannot starve the others.

Requests read data on ``Limits.read_threads`` threads. Without shares, a client with 16
requests in flight takes every thread and a second client's request waits behind all of
them. Here a client (its address: several trainers on one host are one client, and
every reader of a deployment may share one token) first waits for one of *its own*
``Limits.client_read_threads`` slots, and only then queues for a server thread; so a
greedy client's extra requests wait in its own queue, and the server's queue (first
come, first served) holds at most a share of each client. A client with more than
``Limits.client_max_requests`` requests waiting or being answered gets ``busy`` (HTTP
503) for the extra ones, which a ``RemoteDataset`` retries after a back-off: its queue
is bounded, like uvicorn's ``--limit-concurrency`` but per client.

The same-host socket needs none of this: one thread answers its connections a message
at a time, in turn (:mod:`~mrecord.serve.server.local`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mrecord.serve.server._deps import anyio
from mrecord.serve.server.answers import ApiError

__all__ = ["ClientShares"]


@dataclass
class _Client:
    limiter: anyio.CapacityLimiter
    requests: int = 0
    """Requests waiting for a slot or being answered."""
    most: int = field(default=0)
    """The most requests this client had at once (for tests and diagnosis)."""


class ClientShares:
    """Per-client slots (module docstring). Used from the event loop only."""

    def __init__(self, read_threads: int, max_requests: int) -> None:
        self.read_threads = max(1, read_threads)
        self.max_requests = max(1, max_requests)
        self._clients: dict[str, _Client] = {}

    def requests(self, client: str) -> int:
        """Requests ``client`` has waiting or being answered now."""
        entry = self._clients.get(client)
        return 0 if entry is None else entry.requests

    @contextlib.asynccontextmanager
    async def slot(self, client: str | None) -> AsyncIterator[None]:
        """Hold one of ``client``'s slots (none needed for an unknown client); ApiError
        ``busy`` when it already has ``max_requests`` requests."""
        if client is None:
            yield
            return
        entry = self._clients.get(client)
        if entry is None:
            entry = self._clients[client] = _Client(anyio.CapacityLimiter(self.read_threads))
        if entry.requests >= self.max_requests:
            raise ApiError(
                "busy",
                f"client {client} has {entry.requests} requests waiting or being answered, "
                f"at most {self.max_requests} per client: wait for answers before sending more",
            )
        entry.requests += 1
        entry.most = max(entry.most, entry.requests)
        try:
            async with entry.limiter:
                yield
        finally:
            entry.requests -= 1
            if entry.requests == 0:
                del self._clients[client]  # an idle client costs nothing
