"""Local stand-ins for remote storage, for tests and benchmarks of ``mrecord.remote``.

- :func:`http_server`: ``http.server`` in a thread serving a folder on 127.0.0.1,
  with ``Range`` requests (as object stores and CDNs answer them);
- :func:`s3_server`: moto's S3 in server mode on 127.0.0.1 (``pip install
  'moto[server]'``), with a bucket, and the ``storage_options`` s3fs needs for it;
- :func:`counting_proxy`: a TCP relay in front of either that counts the bytes the
  store sends (what a reader costs the network, headers included).

Both pick a free port and stop when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "CountingProxy",
    "HttpServer",
    "counting_proxy",
    "free_port",
    "http_server",
    "s3_server",
    "upload_folder",
]

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _RangeHandler(SimpleHTTPRequestHandler):
    """Serves files, answering ``Range: bytes=a-b`` with 206 and the slice."""

    def __init__(self, *args: Any, requests: list[str], **kwargs: Any) -> None:
        self.requests = requests
        super().__init__(*args, **kwargs)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks print nothing per request."""

    def send_head(self) -> Any:
        kind = "RANGE" if self.headers.get("Range") else self.command
        self.requests.append(f"{kind} {self.path}")
        match = _RANGE.match(self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if match is None or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start = int(match.group(1))
        stop = min(int(match.group(2)) + 1 if match.group(2) else size, size)
        if start >= size:
            self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            return None
        fh = open(path, "rb")  # noqa: SIM115 - the caller (do_GET) copies and closes it
        fh.seek(start)
        self.send_response(HTTPStatus.PARTIAL_CONTENT)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        self.send_header("Content-Length", str(stop - start))
        self.send_header("Last-Modified", self.date_time_string(int(path.stat().st_mtime)))
        self.end_headers()
        return _Limited(fh, stop - start)


class _Limited:
    """A file object that reads at most ``left`` bytes (the rest of a range)."""

    def __init__(self, fh: Any, left: int) -> None:
        self.fh, self.left = fh, left

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data: bytes = self.fh.read(n)
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.fh.close()


@dataclass
class HttpServer:
    """A running :func:`http_server`: its base URL and every request it answered
    (``"GET /x"``, ``"HEAD /x"``, ``"RANGE /x"``), in order."""

    url: str
    requests: list[str] = field(default_factory=list)

    def count(self, kind: str, path: str) -> int:
        """How many ``kind`` requests (GET, HEAD, RANGE) asked for ``path``."""
        return self.requests.count(f"{kind} {path}")


@contextlib.contextmanager
def http_server(folder: str | os.PathLike[str]) -> Iterator[HttpServer]:
    """Serve ``folder`` over HTTP on 127.0.0.1 and a free port, until the block ends."""
    requests: list[str] = []
    handler = functools.partial(_RangeHandler, directory=str(folder), requests=requests)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HttpServer(f"http://127.0.0.1:{server.server_address[1]}", requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def s3_server(bucket: str = "data") -> Iterator[dict[str, Any]]:
    """moto's S3 on 127.0.0.1 with ``bucket`` made; yields s3fs ``storage_options``."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        options: dict[str, Any] = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {
                "endpoint_url": f"http://127.0.0.1:{port}",
                "region_name": "us-east-1",
            },
        }
        import boto3

        boto3.client(
            "s3",
            endpoint_url=options["client_kwargs"]["endpoint_url"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=bucket)
        yield options
    finally:
        server.stop()


def upload_folder(
    folder: str | os.PathLike[str], url: str, storage_options: dict[str, Any]
) -> None:
    """Copy every file of ``folder`` to ``url`` (a remote folder), keeping names."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **storage_options)
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            fs.put_file(str(path), f"{root}/{path.name}")


@dataclass
class CountingProxy:
    """A running :func:`counting_proxy`: its port and the bytes relayed so far."""

    port: int
    sent: int = 0  # bytes from the store to its clients
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        """Count ``n`` more bytes sent by the store."""
        with self._lock:
            self.sent += n


@contextlib.contextmanager
def counting_proxy(target_port: int) -> Iterator[CountingProxy]:
    """Relay TCP connections from a free port on 127.0.0.1 to ``target_port``, counting
    every byte the target sends back (``proxy.sent``), until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = CountingProxy(int(listener.getsockname()[1]))
    open_sockets: list[socket.socket] = []

    def pump(src: socket.socket, dst: socket.socket, count: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                if count:
                    proxy.add(len(data))
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                try:
                    upstream = socket.create_connection(("127.0.0.1", target_port))
                except OSError:  # the store is down: so is the proxy's connection
                    client.close()
                    continue
                open_sockets.extend((client, upstream))
                for args in ((client, upstream, False), (upstream, client, True)):
                    threading.Thread(target=pump, args=args, daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()
        thread.join(timeout=5)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.close()
