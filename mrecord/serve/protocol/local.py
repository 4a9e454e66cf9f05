"""The same-host transport's messages: length-prefixed MessagePack over a Unix socket.

A message is ``[length: uint32 LE][MessagePack map]`` (at most ``MAX_MESSAGE_BYTES``); file
descriptors travel with a message as ``SCM_RIGHTS`` ancillary data (none with a hello, one
with a ``map``; more are closed). The exchanges, in order (docs/SERVE.md, "Same-host
readers"):

- ``{"op": "hello", "version": 1, "dataset": name, "token": str | None}``
  -> ``{"ok": True, "rows": n, "instance": id}``: ``instance`` is new each time the
  server starts (a reader that sees another one forgets the shard files it mapped);
  or ``{"error": {"code": "busy", ...}}`` when the server has ``--max-connections``
  connections (sent at once, before the hello is read; the connection is closed once the
  hello has come): wait and try again, as for HTTP's 503;
- ``{"op": "map", "segment": k, "unmap": [j, ...]}`` + one memfd (sealed against
  shrinking) -> ``{"ok": True}``: the server maps the client's segment ``k`` (and
  unmaps the segments ``unmap`` lists, a list of ints, if it has them);
- ``{"op": "read", "ids": int64 LE bytes, "columns": [...] | nil, "segment": k,
  "unmap": [j, ...]}`` -> ``{"ok": True, "block": header}`` (the block's buffers are in
  segment ``k`` where ``header`` says; ``header["files"]`` lists the shard files its bytes
  values lie in, see :mod:`~mrecord.serve.protocol.wire`) or ``{"need": nbytes}`` (the
  segment is too small: map one of ``nbytes`` and ask again);
- ``{"op": "files", "files": [f, ...]}`` (1 to 64 file numbers) -> ``{"ok": True,
  "files": [f, ...]}`` with one read-only descriptor per file: the reader maps them
  itself and views the values in place.

Any answer may instead be ``{"error": {"code": ..., "message": ...}}`` with the codes of
:mod:`~mrecord.serve.protocol.errors`; a refused hello ends the connection, any other
error leaves it usable. The server writes only into segments the client gave it, never
past their size.
"""

from __future__ import annotations

import array
import ipaddress
import os
import socket
import struct
import sys
from typing import Any

import msgpack

from mrecord.errors import DatasetServerError

__all__ = [
    "MAX_MESSAGE_BYTES",
    "VERSION",
    "Inbox",
    "available",
    "encode",
    "is_loopback",
    "receive",
    "send",
    "send_fds_with",
]

VERSION = 1
MAX_MESSAGE_BYTES = 4 << 20
"""Largest message either side accepts (a request's ids: 65,536 int64 are 512 KiB)."""
_LEN = struct.Struct("<I")


def available() -> bool:
    """True where the transport works: Linux (Unix sockets, fd passing, sealed memfds)."""
    return (
        sys.platform.startswith("linux")
        and hasattr(socket, "AF_UNIX")
        and hasattr(socket, "send_fds")
        and hasattr(os, "memfd_create")
    )


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def encode(message: dict[str, Any]) -> bytes:
    """One message as it goes on the socket: length, then MessagePack."""
    payload: bytes = msgpack.packb(message)
    return _LEN.pack(len(payload)) + payload


def send_fds_with(sock: socket.socket, data: bytes | memoryview, fds: tuple[int, ...]) -> int:
    """Send the start of ``data`` with ``fds`` attached; the number of bytes sent."""
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
    return sock.sendmsg([data], ancillary)


def send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """Send one message (and ``fds`` with it), blocking until it is all sent."""
    frame = encode(message)
    if fds:
        sent = send_fds_with(sock, frame, fds)
        if sent < len(frame):
            sock.sendall(frame[sent:])
    else:
        sock.sendall(frame)


def receive(sock: socket.socket, *, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """One message and the file descriptors that came with it (the caller closes them).

    Raises ConnectionError when the peer closed the socket, DatasetServerError when the
    message is not one of this protocol's.
    """
    fds: list[int] = []
    head = bytearray()
    try:
        while len(head) < _LEN.size:
            data, ancdata, _flags, _addr = sock.recvmsg(
                _LEN.size - len(head), socket.CMSG_SPACE(max(1, max_fds) * 4)
            )
            fds.extend(_descriptors(ancdata))
            if not data:
                raise DatasetServerError("the other side closed the connection")
            head += data
        (length,) = _LEN.unpack(head)
        _check_length(length)
        body = bytearray(length)
        view = memoryview(body)
        got_bytes = 0
        while got_bytes < length:
            n = sock.recv_into(view[got_bytes:])
            if not n:
                raise DatasetServerError("the other side closed the connection mid-message")
            got_bytes += n
        message = _parse(body)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, _at_most(fds, max_fds)


class Inbox:
    """Messages arriving on a non-blocking socket, however they are cut (the server's
    side: one thread serves every connection, so a client that sends half a message
    and stops holds up no one)."""

    def __init__(self, max_fds: int) -> None:
        self._data = bytearray()
        self._fds: list[int] = []
        self.max_fds = max_fds
        """Descriptors one message may carry; more, and those past it are closed at once
        (so a peer sending descriptors with every byte of a message that never ends
        holds at most this many here)."""

    def fill(self, sock: socket.socket) -> bool:
        """Take in what the socket has now; False when the peer has closed it.

        Raises BlockingIOError when there is nothing to read yet.
        """
        room = socket.CMSG_SPACE(max(1, self.max_fds) * 4)
        data, ancdata, _flags, _addr = sock.recvmsg(1 << 16, room)
        self._fds.extend(_descriptors(ancdata))
        self._fds = _at_most(self._fds, self.max_fds)
        self._data += data
        return bool(data)

    def next(self) -> tuple[dict[str, Any], list[int]] | None:
        """The next whole message and the descriptors that came before its end, or None.

        Raises DatasetServerError when the bytes are not this protocol's.
        """
        if len(self._data) < _LEN.size:
            return None
        (length,) = _LEN.unpack_from(self._data)
        _check_length(length)
        end = _LEN.size + length
        if len(self._data) < end:
            return None
        body = bytes(self._data[_LEN.size : end])
        del self._data[:end]
        fds, self._fds = self._fds, []
        try:
            message = _parse(body)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return message, _at_most(fds, self.max_fds)

    def close(self) -> None:
        """Close descriptors received but not handed out."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def _descriptors(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, raw in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(raw[: len(raw) - len(raw) % got.itemsize])
            fds.extend(got)
    return fds


def _check_length(length: int) -> None:
    if length > MAX_MESSAGE_BYTES:
        raise DatasetServerError(f"a {length}-byte message; at most {MAX_MESSAGE_BYTES}")


def _parse(body: bytes | bytearray) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(body, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise DatasetServerError(f"not a MessagePack message ({exc})") from exc
    if not isinstance(message, dict):
        raise DatasetServerError("a message must be a MessagePack map")
    return message


def _at_most(fds: list[int], max_fds: int) -> list[int]:
    """``fds`` cut to ``max_fds`` (more than the exchange allows: the extra ones closed)."""
    for fd in fds[max_fds:]:
        os.close(fd)
    return fds[:max_fds]
