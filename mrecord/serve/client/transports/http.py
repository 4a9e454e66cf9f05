"""Blocks over HTTP: ``POST /api/datasets/{name}/blocks`` (the format: ``protocol/wire.py``).

It speaks HTTP/1.1 with the standard library's ``http.client`` over a small pool of
keep-alive connections, and receives a block's body with ``recv_into`` straight into the
buffer the arrays will view (a reused one, from the session's receive pool): one copy
from the socket, none in Python. Safe to share between threads.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import ssl
import threading
import warnings
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError, InsecureTokenWarning
from mrecord.serve.buffers import BufferPool
from mrecord.serve.client.transports.base import (
    NotOffered,
    Transport,
    TransportBusy,
    TransportUnavailable,
)
from mrecord.serve.protocol.errors import ErrorCode, error_for
from mrecord.serve.protocol.local import is_loopback
from mrecord.serve.protocol.wire import decode_block, encode_request

__all__ = ["HttpTransport"]


class HttpTransport(Transport):
    """One dataset of the server at ``url``, over HTTP (see the module docstring).

    ``connections``: idle keep-alive connections kept (more are opened when more
    requests are in flight, and closed after them). ``cafile``: for ``https://``, the
    certificates to trust (a self-signed server's own certificate) instead of the
    system's. A token sent over ``http://`` to a host that is not this machine warns once
    per host (:class:`~mrecord.errors.InsecureTokenWarning`).
    """

    @property
    def name(self) -> str:
        return "http"

    def __init__(
        self,
        url: str,
        dataset: str,
        *,
        token: str | None,
        timeout: float,
        connections: int,
        buffers: BufferPool,
        cafile: str | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ArgumentError(f"url must look like http://HOST:PORT, got {url!r}")
        if cafile is not None and parts.scheme != "https":
            raise ArgumentError(f"cafile is for https:// servers, got {url!r}")
        self._ssl = ssl.create_default_context(cafile=cafile) if parts.scheme == "https" else None
        if token and parts.scheme == "http" and not is_loopback(parts.hostname):
            _warn_clear_token(parts.hostname)
        self.base = url.rstrip("/")
        self.dataset = dataset
        self.host = parts.hostname
        self._scheme = parts.scheme
        self._port = parts.port
        self._path = f"{parts.path.rstrip('/')}/api/datasets/{quote(dataset, safe='')}"
        self._timeout = timeout
        self.token = token
        self._hints = True
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._idle: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue(
            maxsize=connections
        )
        buffers.keep_at_least(connections)
        self._buffers = buffers

    @property
    def where(self) -> str:
        """``URL ('dataset')``, how errors name what they are about."""
        return f"{self.base} ({self.dataset!r})"

    def info(self) -> dict[str, Any]:
        """``GET /api/datasets/NAME``: files, schema, mean row bytes, limits, the socket."""
        return self.describe("")

    def describe(self, part: str) -> dict[str, Any]:
        """``GET /api/datasets/NAME/PART`` (``""``: the info), a JSON map; NotOffered when
        the server has no such answer (one older than the part)."""
        status, body = self._request("GET", f"{self._path}/{part}" if part else self._path, None)
        if status != 200:
            raise self._error(status, body)
        answer: dict[str, Any] = json.loads(body.tobytes())
        return answer

    def read(self, ids: np.ndarray, columns: list[str]) -> tuple[int, dict[str, ColumnValues]]:
        status, body = self._request("POST", self._path + "/blocks", encode_request(ids, columns))
        if status != 200:
            raise self._error(status, body)
        return decode_block(body.data)

    def hint(self, ids: np.ndarray, columns: list[str]) -> None:
        """``POST /api/datasets/NAME/hint``: the server starts reading these rows (202).
        A server that does not know the endpoint (an older one) is not asked again."""
        if not self._hints:
            return
        try:
            status, _ = self._request("POST", self._path + "/hint", encode_request(ids, columns))
        except TransportUnavailable:
            return  # the next block request says what is wrong, and retries
        if status in (404, 405):
            self._hints = False

    def close(self) -> None:
        """Close the pooled connections."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def __del__(self) -> None:
        # A dataset dropped without close() must not leak its sockets.
        if getattr(self, "_idle", None) is not None:
            self.close()

    # -- one exchange --------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: bytes | None) -> tuple[int, np.ndarray]:
        """(status, body) of one request; TransportBusy on 503, TransportUnavailable when
        the server cannot be reached (an idle connection it closed is replaced at once)."""
        while True:
            try:
                conn, reused = self._idle.get_nowait(), True
            except queue.Empty:
                conn, reused = self._connect(), False
            try:
                status, buf = self._exchange(conn, method, path, body)
            except ssl.SSLCertVerificationError as exc:
                conn.close()  # asking again would not help: say what to do
                raise DatasetServerError(
                    f"{self.base}: its TLS certificate is not trusted ({exc.verify_message}); "
                    "for a self-signed certificate pass cafile= (the server's certificate)"
                ) from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if reused:
                    continue  # the server closed an idle connection: try a fresh one
                raise TransportUnavailable(f"{type(exc).__name__}: {exc}") from exc
            self._give_back(conn)
            if status == ErrorCode.BUSY.status:
                raise TransportBusy("503 server busy")
            return status, buf

    def _connect(self) -> http.client.HTTPConnection:
        if self._ssl is not None:
            return http.client.HTTPSConnection(
                self.host, self._port, timeout=self._timeout, context=self._ssl
            )
        return http.client.HTTPConnection(self.host, self._port, timeout=self._timeout)

    def _exchange(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None
    ) -> tuple[int, np.ndarray]:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/x-msgpack"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        length = response.getheader("content-length")
        if length is None:
            buf = np.frombuffer(response.read(), dtype=np.uint8)
        else:
            # A buffer used before, once no value of its last block is alive: a fresh
            # one (bytearray(n) included) costs the kernel more to fault in and zero
            # than the receive copy itself.
            buf = self._buffers.take(int(length))
            if self._scheme == "http" and conn.sock is not None:
                _receive_body(response, conn.sock, buf.data)
            else:
                _read_body(response, buf.data)
        if response.will_close:
            conn.close()
        return response.status, buf

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        if conn.sock is None:
            return
        try:
            self._idle.put_nowait(conn)
        except queue.Full:
            conn.close()

    def _error(self, status: int, body: np.ndarray) -> Exception:
        """The mrecord error for an error answer (its code chooses the type)."""
        try:
            err = json.loads(body.tobytes())["error"]
            code, message = str(err["code"]), str(err["message"])
        except Exception:
            code, message = "unexpected", f"HTTP {status}: {body[:200].tobytes()!r}"
        if code == ErrorCode.NOT_FOUND.value:  # a path this server does not know
            return NotOffered(f"{self.where}: {message} [{code}]")
        return error_for(self.where, code, message)


_warned_hosts: set[str] = set()
_warned_lock = threading.Lock()


def _warn_clear_token(host: str) -> None:
    """Warn, once per host per process, that a token goes to ``host`` in clear text."""
    with _warned_lock:
        if host in _warned_hosts:
            return
        _warned_hosts.add(host)
    warnings.warn(
        InsecureTokenWarning(
            f"the bearer token goes to {host!r} over plain http://: anyone on the network "
            "path can read it; serve with `mrecord serve --tls-cert ... --tls-key ...` and "
            "use an https:// URL"
        ),
        stacklevel=4,
    )


def _read_body(response: http.client.HTTPResponse, view: memoryview) -> None:
    """The body of ``response`` into ``view`` (exactly its size), through http.client."""
    got = 0
    while got < len(view):
        n = response.readinto(view[got:])
        if not n:
            raise http.client.IncompleteRead(bytes(0), len(view) - got)
        got += n


_WAKE_BYTES = 1 << 20
"""Receive a block in reads of at least this much (``SO_RCVLOWAT``), not as it trickles in."""


def _receive_body(
    response: http.client.HTTPResponse, sock: socket.socket, view: memoryview
) -> None:
    """The body of ``response`` into ``view`` (exactly its size), from the socket itself.

    The bytes the header parser already buffered come first; the rest is received with
    ``recv_into`` straight into ``view``, with ``SO_RCVLOWAT`` so that the thread wakes
    once per megabyte instead of once per few segments (half the client's CPU per MB on
    loopback). The socket keeps its timeout; the response is then closed as http.client
    does after a complete body, which leaves the connection open for the next request.
    """
    if not len(view):
        response.close()
        return
    fp = response.fp
    got = fp.readinto(view[: min(len(fp.peek()), len(view))]) or 0
    try:
        while got < len(view):
            want = len(view) - got
            _set_rcvlowat(sock, min(want, _WAKE_BYTES))
            n = sock.recv_into(view[got:], want)
            if not n:
                raise http.client.IncompleteRead(bytes(0), want)
            got += n
    finally:
        _set_rcvlowat(sock, 1)
    response.close()


def _set_rcvlowat(sock: socket.socket, nbytes: int) -> None:
    """``SO_RCVLOWAT`` where the platform has it (not Windows); only an optimisation."""
    option = getattr(socket, "SO_RCVLOWAT", None)
    if option is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, nbytes)
