"""Running the app with uvicorn: in the foreground (``mrecord serve``) or in a thread.

::

    with ServerThread({"demo": Path("demo.mrecord0")}) as server:   # 127.0.0.1, a free port
        RemoteDataset(server.url, "demo")

uvicorn bounds the open connections (``limit_concurrency``: beyond it a request gets
503 at once instead of queueing) and closes idle keep-alive connections after a few
seconds; :mod:`~mrecord.serve.server.http_protocol` closes those that send no whole request
within ``Limits.header_timeout_s``; the app bounds the work per request
(:class:`~mrecord.serve.server.app.Limits`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from mrecord.errors import ArgumentError, DatasetServerError, MissingDependencyError
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import available as local_available
from mrecord.serve.server.app import create_app
from mrecord.serve.server.local import LocalServer, default_socket_path
from mrecord.serve.server.metrics import Metrics
from mrecord.serve.server.registry import ServedDataset, open_datasets
from mrecord.serve.server.security import check_bind

__all__ = ["MAX_CONNECTIONS", "ServerThread", "local_socket_path", "serve"]

_log = logging.getLogger("mrecord.serve")

MAX_CONNECTIONS = 64
"""Default bound on open connections (and requests) at once; more get 503 straight away."""


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - the serve extra is in dev
        raise MissingDependencyError(
            "mrecord serve needs uvicorn: pip install 'mrecord[serve]'"
        ) from exc
    return uvicorn


def _config(
    app: Any,
    host: str,
    port: int,
    log_level: str,
    max_connections: int = MAX_CONNECTIONS,
    header_timeout: float = Limits.header_timeout_s,
    tls: tuple[Path, Path] | None = None,
) -> Any:
    uvicorn = _uvicorn()
    try:
        from mrecord.serve.server.http_protocol import protocol_with_header_timeout

        # httptools, the C HTTP parser (several times h11's speed), with a deadline on
        # each request's headers: connections that send none give their slot back.
        http: Any = protocol_with_header_timeout(header_timeout)
    except ImportError:  # pragma: no cover - httptools is in the serve extra
        _log.warning("httptools is missing: idle connections are not closed before a request")
        http = "h11"
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=http,
        log_level=log_level,
        access_log=False,
        limit_concurrency=max_connections,
        timeout_keep_alive=5,
        lifespan="off",
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )


def _tls(cert: Path | str | None, key: Path | str | None) -> tuple[Path, Path] | None:
    """(certificate, key) files for TLS, both or neither; ArgumentError names what is wrong."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ArgumentError("TLS needs both --tls-cert and --tls-key (PEM files)")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not Path(path).is_file():
            raise ArgumentError(f"{flag} {str(path)!r} is not a file")
    return Path(cert), Path(key)


def _count_connections(app: Any, server: Any) -> None:
    """Let ``GET /metrics`` report the uvicorn server's open connections."""
    metrics = getattr(app, "metrics", None)
    if metrics is not None:
        metrics.connections = lambda: len(server.server_state.connections)


def serve(
    datasets: dict[str, Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8750,
    token: str | None = None,
    workers: int = 4,
    max_connections: int = MAX_CONNECTIONS,
    log_level: str = "info",
    client_workers: int | None = None,
    client_max_requests: int = 64,
    local_socket: Path | str | None = "auto",
    tls_cert: Path | str | None = None,
    tls_key: Path | str | None = None,
) -> None:
    """Serve ``datasets`` ({name: path}) until interrupted (what ``mrecord serve`` runs).

    ``local_socket``: where same-host readers connect (``"auto"``: a fresh path in this
    user's private folder, on Linux; ``None``: no same-host socket). ``tls_cert`` and
    ``tls_key``: PEM files; the server then speaks HTTPS only. ``client_workers`` and
    ``client_max_requests``: each client's share (``Limits.client_read_threads``,
    ``Limits.client_max_requests``; ``mrecord/serve/server/fairness.py``).
    """
    check_bind(host, token)
    tls = _tls(tls_cert, tls_key)
    opened = open_datasets(datasets)
    limits = Limits(
        read_threads=workers,
        client_read_threads=client_workers,
        client_max_requests=client_max_requests,
    )
    metrics = Metrics()  # one for both transports: GET /metrics counts same-host blocks too
    local = None
    try:
        socket_path = local_socket_path(local_socket)
        if socket_path is not None:
            local = LocalServer(
                opened,
                socket_path,
                token=token,
                limits=limits,
                max_connections=max_connections,
                metrics=metrics,
            ).start()
            _log.info("same-host readers: %s", socket_path)
        app = create_app(
            opened,
            token=token,
            limits=limits,
            local_socket=str(socket_path) if socket_path else None,
            bound_host=host,
            metrics=metrics,
        )
        # What is loaded now lives as long as the server: keep it out of the collector's
        # full passes (measured: a few percent of the CPU per MB served).
        gc.freeze()
        with _sigterm_unwinds():
            config = _config(
                app, host, port, log_level, max_connections, limits.header_timeout_s, tls
            )
            server = _uvicorn().Server(config)
            _count_connections(app, server)
            server.run()
    finally:
        if local is not None:
            local.stop()
        for ds in opened.values():
            ds.close()


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM ends the server through ``finally`` blocks (the socket file is removed).

    uvicorn shuts down gracefully on SIGTERM, restores the handler it found, and raises
    the signal again; with the default handler the process would die right there. This
    handler turns it into ``SystemExit(143)`` (128 + SIGTERM, the usual exit status).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)



def local_socket_path(choice: Path | str | None) -> Path | None:
    """The same-host socket path for ``choice``: ``"auto"`` (a fresh private path where
    the platform supports the transport), ``None`` / ``"off"``, or a path."""
    if choice is None or choice == "off":
        return None
    if choice == "auto":
        return default_socket_path() if local_available() else None
    if not local_available():
        raise ArgumentError("--local-socket needs Linux (memfd and Unix-socket fd passing)")
    return Path(choice)


class ServerThread:
    """A server on ``host`` (default 127.0.0.1) on a free port, in a background thread
    (tests, benchmarks), with ``serve()``'s rules (a non-loopback ``host`` needs a token).

    With ``local_socket`` (default, on Linux) it also serves same-host readers
    (:mod:`~mrecord.serve.server.local`); ``local_socket_path`` is then its socket.

    ``with ServerThread(...) as server:`` starts it and waits until it answers;
    leaving the block stops it and closes the datasets it opened.
    """

    def __init__(
        self,
        datasets: dict[str, Path] | dict[str, ServedDataset],
        *,
        token: str | None = None,
        limits: Limits | None = None,
        local_socket: bool = True,
        host: str = "127.0.0.1",
        max_connections: int = MAX_CONNECTIONS,
        tls_cert: Path | str | None = None,
        tls_key: Path | str | None = None,
    ) -> None:
        check_bind(host, token)
        self._tls = _tls(tls_cert, tls_key)
        self.app: Any = None
        self._host = host
        self._max_connections = max_connections
        self._given = datasets
        self._token = token
        self._limits = limits or Limits()
        self._want_local = local_socket and local_available()
        self._local: LocalServer | None = None
        self._opened: dict[str, ServedDataset] = {}
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def local_socket_path(self) -> Path | None:
        """The same-host socket, while it serves one."""
        return self._local.path if self._local is not None else None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (``https://`` with TLS)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{'https' if self._tls else 'http'}://{host}:{self.port}"

    def start(self) -> ServerThread:
        """Open the datasets, bind a free port, serve in a thread; returns when it listens."""
        served: dict[str, ServedDataset] = {}
        for name, item in self._given.items():
            if isinstance(item, ServedDataset):
                served[name] = item
        paths = {n: p for n, p in self._given.items() if not isinstance(p, ServedDataset)}
        self._opened = open_datasets(paths)
        served.update(self._opened)
        metrics = Metrics()  # one for both transports: GET /metrics counts same-host blocks too
        if self._want_local:
            self._local = LocalServer(
                served,
                default_socket_path(),
                token=self._token,
                limits=self._limits,
                max_connections=self._max_connections,
                metrics=metrics,
            ).start()
        app = create_app(
            served,
            token=self._token,
            limits=self._limits,
            local_socket=str(self._local.path) if self._local else None,
            bound_host=self._host,
            metrics=metrics,
        )
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        self.port = sock.getsockname()[1]
        config = _config(
            app,
            self._host,
            self.port,
            "warning",
            self._max_connections,
            self._limits.header_timeout_s,
            self._tls,
        )
        self._server = _uvicorn().Server(config)
        _count_connections(app, self._server)
        self.app = app
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="mrecord-serve", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise DatasetServerError("the test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving, wait for the thread, close the datasets this object opened."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._local is not None:
            self._local.stop()
            self._local = None
        for ds in self._opened.values():
            ds.close()
        self._opened = {}

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
