"""Response bodies written as many buffers with one system call, never joined first.

A block of images is 256 values of ~100 KB lying at random places of the shard files'
memory maps. Written through an asyncio transport it must first be one buffer: the
values were copied into a pooled buffer (``wire._join_into``), 1 GB/s of ``memmove`` on a
server thread at 10 Gbit/s, a fifth of the server's CPU (perf, docs/SERVE.md). Here the
values go from the map to the socket with ``writev`` (the kernel copies each into the
socket buffer, as it copied the joined buffer), and the copy in user space is gone.

:class:`GatheringTransport` stands in for a plain TCP transport of uvicorn's HTTP
protocol (:mod:`~mrecord.serve.server.http_protocol`): uvicorn hands a response body to
``transport.write`` as it is and counts it with ``len``, so a :class:`GatheredBody` (a
list of buffers with a length) passes through it untouched, Content-Length accounting
included. Every write of the connection, headers included, goes through the one queue
here, in order; the wrapped transport keeps reading, closing and the socket, and never
holds bytes of its own to send. Flow control is asyncio's: the protocol is told to pause
above ``high`` bytes queued and to resume at ``low`` (uvicorn then waits before the next
body message). The socket is watched for room through a duplicate of its descriptor, so
the event loop's rule that a transport's descriptor is its own holds.

TLS connections (the bytes must go through the TLS layer) and platforms without
``os.writev`` keep the transport as it is: :func:`gathering` returns it unchanged and
the app sends joined buffers.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
from collections.abc import Iterable
from typing import Any

__all__ = ["GATHER_EXTENSION", "GatheredBody", "GatheringTransport", "gathering"]

GATHER_EXTENSION = "mrecord.gathered_body"
"""The ASGI scope extension that says ``http.response.body`` may carry a
:class:`GatheredBody` (set by the HTTP protocol when its transport gathers)."""

_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_HIGH = 64 << 10  # asyncio's default write buffer limits
_LOW = 16 << 10


class GatheredBody:
    """Buffers sent one after the other as one piece of a response body (no copy made)."""

    __slots__ = ("nbytes", "views")

    def __init__(self, buffers: Iterable[Any]) -> None:
        self.views = [memoryview(b).cast("B") for b in buffers]
        self.nbytes = sum(len(v) for v in self.views)

    def __len__(self) -> int:
        return self.nbytes


def gathering(transport: asyncio.Transport, protocol: asyncio.Protocol) -> asyncio.Transport:
    """``transport`` wrapped in a :class:`GatheringTransport` when it is a plain TCP or
    Unix socket transport and this platform has ``os.writev``; else ``transport``."""
    sock = transport.get_extra_info("socket")
    if (
        not hasattr(os, "writev")
        or sock is None
        or transport.get_extra_info("sslcontext") is not None
        or transport.get_extra_info("ssl_object") is not None
    ):
        return transport
    try:
        watch = os.dup(sock.fileno())
    except OSError:
        return transport
    return GatheringTransport(transport, protocol, watch)  # type: ignore[return-value]


class GatheringTransport:
    """A transport whose writes are queued buffers written with ``writev`` (see the module
    docstring); everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, protocol: asyncio.Protocol, fd: int) -> None:
        self._transport = transport
        self._protocol = protocol
        self._fd = fd  # a duplicate of the socket's descriptor: ours to watch and close
        self._loop = asyncio.get_running_loop()
        self._queue: collections.deque[memoryview] = collections.deque()
        self._queued = 0
        self._watching = False
        self._paused = False
        self._close_when_sent = False
        self._eof_when_sent = False
        self._high, self._low = _HIGH, _LOW

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    # -- writing ------------------------------------------------------------------------------

    def write(self, data: Any) -> None:
        """Queue ``data`` (bytes-like, or a :class:`GatheredBody`) and write what the
        socket takes now."""
        views = data.views if isinstance(data, GatheredBody) else [memoryview(data).cast("B")]
        if self._fd < 0 or self._close_when_sent or self._transport.is_closing():
            return  # asyncio drops writes after close as well
        for view in views:
            if len(view):
                self._queue.append(view)
                self._queued += len(view)
        if not self._watching:
            self._send()
        self._pause_if_full()

    def writelines(self, list_of_data: Iterable[Any]) -> None:
        """Queue each buffer of ``list_of_data`` in order (no copy)."""
        self.write(GatheredBody(list_of_data))

    def get_write_buffer_size(self) -> int:
        """Bytes queued here and not yet taken by the socket."""
        return self._queued + self._transport.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """asyncio's flow control limits (``high`` defaults to 64 KiB, ``low`` to a
        quarter of it)."""
        self._high = _HIGH if high is None else high
        self._low = self._high // 4 if low is None else low

    def _send(self) -> None:
        """``writev`` what the socket takes; watch for room when something is left."""
        while self._queue:
            batch = list(itertools.islice(self._queue, _IOV_MAX))
            try:
                sent = os.writev(self._fd, batch)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # the peer went away: as asyncio does on a failed send
                self._fail(exc)
                return
            self._consume(sent)
        if self._queue and not self._watching:
            self._loop.add_writer(self._fd, self._send)
            self._watching = True
        elif not self._queue:
            self._stop_watching()
            self._resume_if_drained()
            if self._eof_when_sent:
                self._eof_when_sent = False
                self._transport.write_eof()
            if self._close_when_sent:
                self._close_now()
        else:
            self._resume_if_drained()

    def _consume(self, sent: int) -> None:
        self._queued -= sent
        while sent:
            head = self._queue[0]
            if sent < len(head):
                self._queue[0] = head[sent:]
                return
            sent -= len(head)
            self._queue.popleft()

    def _pause_if_full(self) -> None:
        if not self._paused and self._queued > self._high:
            self._paused = True
            self._protocol.pause_writing()

    def _resume_if_drained(self) -> None:
        if self._paused and self._queued <= self._low:
            self._paused = False
            self._protocol.resume_writing()

    def _stop_watching(self) -> None:
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False

    def write_eof(self) -> None:
        """Close the write side once every queued byte is written."""
        if self._queue and self._fd >= 0:
            self._eof_when_sent = True
            return
        self._transport.write_eof()

    # -- closing -------------------------------------------------------------------------------

    def is_closing(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called (or the connection was lost)."""
        return self._close_when_sent or self._transport.is_closing()

    def close(self) -> None:
        """Close once every queued byte is written (asyncio's ``close`` semantics)."""
        if self._queue and self._fd >= 0:
            self._close_when_sent = True
            self._transport.pause_reading()
            return
        self._close_now()

    def abort(self) -> None:
        """Drop what is queued and close at once."""
        self.forget()
        self._transport.abort()

    def forget(self) -> None:
        """Drop what is queued and stop watching the socket (the connection is gone; called
        by the protocol's ``connection_lost``, before asyncio closes the socket)."""
        self._queue.clear()
        self._queued = 0
        self._stop_watching()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _close_now(self) -> None:
        self.forget()
        self._transport.close()

    def _fail(self, exc: OSError) -> None:
        self.forget()
        self._transport.abort()  # the protocol's connection_lost follows, as for asyncio's
