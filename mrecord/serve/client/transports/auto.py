"""The policy a ``RemoteDataset`` reads through: which transport, retries, fallback.

:class:`AutoTransport` holds an :class:`~.http.HttpTransport` and, when the server runs on
this machine and offers its socket, a :class:`~.local.LocalTransport`, and decides:

- a block goes through the same-host socket while there is one; ``busy`` there is waited
  for like HTTP's 503 (back-off, then again); still busy after every try, the block goes
  over HTTP (``transport="auto"``) or the read fails (``"local"``);
- a socket that stops answering is dropped for good, with a warning, and blocks go over
  HTTP (``"auto"``), or the read fails (``"local"``);
- over HTTP, a connection error (refused: a server restarting; reset or cut short: one
  that died mid-answer) or 503 is retried with back-off ``retries`` times (``BACKOFF_S``:
  3.3 s over the default 4), then :class:`~.base.ServerUnreachable` (a
  :class:`~mrecord.errors.DatasetServerError`) says the server did not answer (and
  :mod:`~.failover` moves to another server, if the reader names several);
- an error answer (a bad request, a damaged file) is raised at once: asking again
  would not help.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError
from mrecord.serve.client.session import Session
from mrecord.serve.client.transports.base import (
    ServerUnreachable,
    Transport,
    TransportBusy,
    TransportUnavailable,
)
from mrecord.serve.client.transports.http import HttpTransport
from mrecord.serve.client.transports.local import LocalTransport
from mrecord.serve.protocol.local import available as local_available
from mrecord.serve.protocol.local import is_loopback

__all__ = ["BACKOFF_S", "CHOICES", "AutoTransport"]

_log = logging.getLogger("mrecord.serve")
T = TypeVar("T")

CHOICES = ("auto", "http", "local")
"""``RemoteDataset(transport=)``: ``local`` reads through the server's same-host socket
(shared memory; docs/SERVE.md, "Same-host readers"), ``http`` never does, ``auto`` does
when the server is on this machine and offers it, and falls back to HTTP otherwise."""

BACKOFF_S = (0.1, 0.3, 0.9, 2.0, 4.0)
"""Seconds to wait before each retry (the last one repeats)."""


class AutoTransport(Transport):
    """HTTP, and the same-host socket when :meth:`choose` finds one (module docstring)."""

    def __init__(self, http: HttpTransport, *, retries: int, session: Session) -> None:
        self._http = http
        self._retries = retries
        self._session = session
        self._local: LocalTransport | None = None
        self._local_required = False

    @property
    def name(self) -> str:
        return "local" if self._local is not None else "http"

    @property
    def where(self) -> str:
        """``URL ('dataset')``, how errors name what they are about."""
        return self._http.where

    @property
    def in_flight(self) -> int:
        local = self._local
        return local.in_flight if local is not None else self._http.in_flight

    def info(self) -> dict[str, Any]:
        """The dataset's ``GET /api/datasets/NAME`` answer (retried as blocks are)."""
        return self._retrying(self._http.info)

    def describe(self, part: str) -> dict[str, Any]:
        """``GET /api/datasets/NAME/PART`` over HTTP (retried as the info is)."""
        return self._retrying(lambda: self._http.describe(part))

    def choose(
        self, choice: str, info: dict[str, Any], *, connections: int, timeout: float
    ) -> None:
        """Use the same-host socket ``info`` advertises, as ``choice`` asks (``CHOICES``)."""
        if choice not in CHOICES:
            raise ArgumentError(f"transport must be one of {CHOICES}, got {choice!r}")
        if choice == "http":
            return
        path = info.get("local_socket")
        why = None
        if not local_available():
            why = "this platform has no memfd / Unix-socket fd passing (Linux only)"
        elif not is_loopback(self._http.host):
            why = f"{self._http.host!r} is not a loopback address (the socket is for this machine)"
        elif not isinstance(path, str) or not path:
            why = "the server offers no same-host socket (started with --local-socket off?)"
        if why is not None or not isinstance(path, str):
            if choice == "local":
                raise DatasetServerError(
                    f"{self._http.base}: cannot read through shared memory: {why}"
                )
            return
        self._local_required = choice == "local"
        rows = int(sum(int(f["rows"]) for f in info["files"]))
        link = self._session.links.get(
            path, self._http.dataset, self._http.token, rows, connections, timeout
        )
        row_bytes = {str(k): float(v) for k, v in info.get("row_bytes", {}).items()}
        self._local = LocalTransport(link, row_bytes, self.where)

    def read(self, ids: np.ndarray, columns: list[str]) -> tuple[int, dict[str, ColumnValues]]:
        local = self._local
        if local is not None:
            got = self._read_local(local, ids, columns)
            if got is not None:
                return got
        return self._retrying(lambda: self._http.read(ids, columns))

    def hint(self, ids: np.ndarray, columns: list[str]) -> None:
        """Over HTTP, tell the server the coming rows; through the same-host socket, nothing
        (the reader maps the server's page cache itself)."""
        if self._local is None:
            self._http.hint(ids, columns)

    def close(self) -> None:
        """Close the HTTP connections (same-host ones are the session's, shared)."""
        self._http.close()

    # -- the policy ------------------------------------------------------------------------------

    def _read_local(
        self, local: LocalTransport, ids: np.ndarray, columns: list[str]
    ) -> tuple[int, dict[str, ColumnValues]] | None:
        """The block through the same-host socket; None: read it over HTTP instead."""
        for attempt in range(self._retries + 1):
            try:
                return local.read(ids, columns)
            except TransportBusy as exc:
                if attempt < self._retries:  # as HTTP's 503: wait, then try again
                    time.sleep(_backoff(attempt))
                    continue
                if self._local_required:
                    raise DatasetServerError(
                        f"{self.where}: the same-host socket stayed busy after "
                        f"{self._retries + 1} tries ({exc}); start `mrecord serve` with a "
                        "larger --max-connections"
                    ) from exc
                return None  # this block over HTTP; the socket stays for the next ones
            except TransportUnavailable as exc:
                if self._local_required:
                    raise DatasetServerError(
                        f"{self.where}: the same-host socket stopped answering ({exc}); "
                        "is `mrecord serve` still running?"
                    ) from exc
                _log.warning(
                    "%s: same-host socket unusable (%s); reading over HTTP", self._http.base, exc
                )
                self._local = None
                return None
        return None  # pragma: no cover - the loop returns or raises

    def _retrying(self, call: Callable[[], T]) -> T:
        """``call()``, retried with back-off while the server is busy or unreachable."""
        last = ""
        for attempt in range(self._retries + 1):
            try:
                return call()
            except TransportUnavailable as exc:
                last = str(exc)
            if attempt < self._retries:
                time.sleep(_backoff(attempt))
        raise ServerUnreachable(
            f"dataset server {self._http.base} did not answer for dataset "
            f"{self._http.dataset!r} after {self._retries + 1} tries (last error: {last}); "
            "is `mrecord serve` running there?"
        )


def _backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
