"""What the ``RemoteDataset`` readers of a process share, in one object, not globals.

A :class:`Session` holds the receive buffers of HTTP answers, the shared-memory segments
of same-host answers and the same-host links (their connections, and the server's maps
of this process's segments): a new ``RemoteDataset`` (the next epoch's, the evaluation
set's) reuses them instead of paying again for fresh memory and fresh maps.
:func:`default_session` is the process's own, made on first use; a forked child starts
it empty, and its idle connections are closed at exit.
"""

from __future__ import annotations

import atexit
import functools
import os

from mrecord.serve.buffers import BufferPool
from mrecord.serve.client.transports.local import Links, Segments

__all__ = ["Session", "default_session"]


class Session:
    """Receive buffers, shared-memory segments and same-host links (module docstring)."""

    def __init__(self) -> None:
        self.receive_buffers = BufferPool(keep=0)
        """HTTP bodies are received into these; a transport keeps as many as it has
        connections (``keep_at_least``)."""
        self.segments = Segments()
        self.links = Links(self.segments)

    def forget(self) -> None:
        """Start empty (in a forked child: the parent's buffers, segments and connections
        are not this process's, and a lock may be held by a thread that does not exist)."""
        self.receive_buffers.forget()
        self.segments.forget()
        self.links.forget()

    def close_idle(self) -> None:
        """Close the idle same-host connections."""
        self.links.close_idle()


@functools.cache
def default_session() -> Session:
    """The process's session (made on first use)."""
    session = Session()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=session.forget)
    atexit.register(session.close_idle)
    return session
