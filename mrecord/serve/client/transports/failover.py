"""Several servers of the same dataset: read from one, move to the next when it dies.

``RemoteDataset(["https://a:8750", "https://b:8750"], "train")`` holds one
:class:`~.auto.AutoTransport` per server in a :class:`FailoverTransport`. Blocks come from
the current server; when it stays unreachable through its own retries
(:class:`~.base.ServerUnreachable`), the block is asked of the next server (round the
list, so a restarted first server is used again), which must serve the same dataset:
the same files with the same row counts and the same schema (checked on switching;
otherwise :class:`~mrecord.errors.DatasetServerError` says what differs). The order of
rows is the client's (a pure function of the arguments), so the rows delivered are
exactly those of one server. When every server has failed for the same block, the error
names each, with its last error.

Error answers (a bad request, a wrong token, a damaged file) are raised at once, as from
one server: another server would not answer them differently.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError
from mrecord.serve.client.transports.auto import AutoTransport
from mrecord.serve.client.transports.base import ServerUnreachable, Transport

__all__ = ["FailoverTransport"]

_log = logging.getLogger("mrecord.serve")


def _identity(info: dict[str, Any]) -> tuple[Any, ...]:
    """What two servers of the same dataset agree on: files (names, rows) and schema."""
    files = tuple((str(f.get("name", "")), int(f["rows"])) for f in info["files"])
    schema = tuple(
        (str(f["name"]), str(f.get("type")), str(f.get("shape"))) for f in info["schema"]
    )
    return files, schema


class FailoverTransport(Transport):
    """The transports of several servers of one dataset (see the module docstring)."""

    def __init__(self, servers: list[AutoTransport]) -> None:
        if not servers:
            raise ArgumentError("FailoverTransport needs at least one server")
        self._servers = servers
        self._current = 0
        self._lock = threading.Lock()
        self._identity: tuple[Any, ...] | None = None
        self._choice: tuple[str, int, float] | None = None
        self._ready: set[int] = set()
        """Servers whose dataset was checked against the first one's (and chosen for)."""

    @property
    def name(self) -> str:
        return self._servers[self._current].name

    @property
    def where(self) -> str:
        """The current server's ``URL ('dataset')``."""
        return self._servers[self._current].where

    @property
    def in_flight(self) -> int:
        return self._servers[self._current].in_flight

    @property
    def urls(self) -> list[str]:
        """Every server's URL, in the order given."""
        return [s.where for s in self._servers]

    def info(self) -> dict[str, Any]:
        """The dataset's description from the first server that answers."""
        info: dict[str, Any] = self._failing_over(lambda t: t.info(), check=False)
        self._identity = _identity(info)
        self._ready.add(self._current)
        return info

    def describe(self, part: str) -> dict[str, Any]:
        """``GET /api/datasets/NAME/PART`` from the first server that answers (the servers
        serve the same files, so their layouts agree)."""
        answer: dict[str, Any] = self._failing_over(lambda t: t.describe(part), check=True)
        return answer

    def choose(
        self, choice: str, info: dict[str, Any], *, connections: int, timeout: float
    ) -> None:
        """As :meth:`AutoTransport.choose`, for the current server now and for each
        other server when it is switched to."""
        self._choice = (choice, connections, timeout)
        self._servers[self._current].choose(
            choice, info, connections=connections, timeout=timeout
        )

    def read(self, ids: np.ndarray, columns: list[str]) -> tuple[int, dict[str, ColumnValues]]:
        result: tuple[int, dict[str, ColumnValues]] = self._failing_over(
            lambda t: t.read(ids, columns), check=True
        )
        return result

    def hint(self, ids: np.ndarray, columns: list[str]) -> None:
        """Tell the current server the coming rows."""
        self._servers[self._current].hint(ids, columns)

    def close(self) -> None:
        """Close every server's connections."""
        for server in self._servers:
            server.close()

    # -- the policy ------------------------------------------------------------------------------

    def _failing_over(self, call: Any, *, check: bool) -> Any:
        """``call(transport)`` on the current server, then on each next one while they are
        unreachable; DatasetServerError naming them all when none answers."""
        failures: dict[int, str] = {}
        index = self._current
        for _ in range(len(self._servers)):
            server = self._servers[index]
            try:
                if check and index not in self._ready:
                    self._prepare(index)
                result = call(server)
            except ServerUnreachable as exc:
                failures[index] = str(exc)
                index = self._advance(index)
                continue
            return result
        raise DatasetServerError(
            "every server of this dataset is unreachable: "
            + "; ".join(f"{self._servers[i].where}: {why}" for i, why in failures.items())
            + ". Are the `mrecord serve` processes running?"
        )

    def _advance(self, failed: int) -> int:
        """The server after ``failed``; the current one moves on unless another thread
        already moved it."""
        following = (failed + 1) % len(self._servers)
        with self._lock:
            if self._current == failed:
                self._current = following
                if len(self._servers) > 1:
                    _log.warning(
                        "%s is unreachable; reading from %s",
                        self._servers[failed].where,
                        self._servers[following].where,
                    )
        return following

    def _prepare(self, index: int) -> None:
        """Check that server ``index`` serves the same dataset, and choose its transport."""
        server = self._servers[index]
        info = server.info()
        if self._identity is not None and _identity(info) != self._identity:
            raise DatasetServerError(
                f"{server.where} serves a different dataset than {self._servers[0].where} "
                "(other files, row counts or schema): the servers of one RemoteDataset must "
                "serve the same files"
            )
        if self._choice is not None:
            choice, connections, timeout = self._choice
            server.choose(choice, info, connections=connections, timeout=timeout)
        with self._lock:
            self._ready.add(index)
