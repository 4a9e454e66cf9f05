"""The same-host transport's messages: length-prefixed MessagePack over a Unix socket.

A message is ``[length: uint32 LE][MessagePack map]``; a shared-memory file descriptor
travels with a message as ``SCM_RIGHTS`` ancillary data. The exchanges (docs/SERVE.md,
"Same-host readers"):

- ``{"op": "hello", "version": 1, "dataset": name, "token": str | None}``
  -> ``{"ok": True, "rows": n}``
- ``{"op": "map", "segment": k}`` + one memfd (sealed against shrinking)
  -> ``{"ok": True}``: the server maps the client's segment ``k``
- ``{"op": "read", "ids": int64 LE bytes, "columns": [...], "segment": k, "unmap": [k, ...]}``
  -> ``{"ok": True, "block": header}`` (the block's buffers are in segment ``k``, where
  ``header`` says) or ``{"need": nbytes}`` (segment too small)

Any answer may instead be ``{"error": {"code": ..., "message": ...}}`` with the HTTP API's
codes. The server writes only into segments the client gave it, never past their size.
"""

from __future__ import annotations

import array
import os
import socket
import struct
import sys
from typing import Any

import msgpack

from mrecord.errors import DatasetServerError

__all__ = ["MAX_MESSAGE_BYTES", "VERSION", "available", "receive", "send"]

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


def send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """Send one message (and ``fds`` with it)."""
    payload = msgpack.packb(message)
    frame = _LEN.pack(len(payload)) + payload
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        sent = sock.sendmsg([frame], ancillary)
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
            for level, kind, raw in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(raw[: len(raw) - len(raw) % got.itemsize])
                    fds.extend(got)
            if not data:
                raise ConnectionError("the other side closed the connection")
            head += data
        (length,) = _LEN.unpack(head)
        if length > MAX_MESSAGE_BYTES:
            raise DatasetServerError(f"a {length}-byte message; at most {MAX_MESSAGE_BYTES}")
        body = bytearray(length)
        view = memoryview(body)
        got_bytes = 0
        while got_bytes < length:
            n = sock.recv_into(view[got_bytes:])
            if not n:
                raise ConnectionError("the other side closed the connection mid-message")
            got_bytes += n
        try:
            message = msgpack.unpackb(body, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types
            raise DatasetServerError(f"not a MessagePack message ({exc})") from exc
        if not isinstance(message, dict):
            raise DatasetServerError("a message must be a MessagePack map")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if len(fds) > max_fds:  # more than the exchange allows: keep none of the extra ones
        for fd in fds[max_fds:]:
            os.close(fd)
        fds = fds[:max_fds]
    return message, fds
