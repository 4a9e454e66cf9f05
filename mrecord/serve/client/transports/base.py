"""The interface every transport of a ``RemoteDataset`` implements, and what it raises.

A transport reads blocks of one dataset of one server: ``read(ids, columns)`` returns the
rows' columns (``MindDataset``'s values for the same rows). It raises

- :class:`TransportBusy` when the server takes no more readers right now (HTTP 503, the
  same-host ``busy``): worth asking again shortly;
- :class:`TransportUnavailable` when it cannot reach the server at all (connection refused
  or reset, a socket gone, an answer cut short);
- :class:`NotOffered` for a path the server does not know (a server older than the
  answer asked for);
- the mrecord error of an error answer (:func:`~mrecord.serve.protocol.errors.error_for`):
  the request itself is wrong, and asking again would not help.

What to do about busy and unavailable (wait, retry, fall back to another transport) is
the policy of :class:`~mrecord.serve.client.transports.auto.AutoTransport`, the one a
``RemoteDataset`` holds; it never asks which kind of transport it has (httpx's
``_transports/`` has the same shape).
"""

from __future__ import annotations

import abc

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import DatasetServerError

__all__ = [
    "NotOffered",
    "ServerUnreachable",
    "Transport",
    "TransportBusy",
    "TransportUnavailable",
]


class TransportUnavailable(Exception):
    """The transport cannot reach the server now (the message says why)."""


class TransportBusy(TransportUnavailable):
    """The server has as many readers as it takes: ask again after a back-off."""


class ServerUnreachable(DatasetServerError):
    """A server stayed unreachable (or busy) through every retry: the failover policy
    (:mod:`~.failover`) moves to another server of the same dataset."""


class NotOffered(DatasetServerError):
    """The server has no such answer (``not_found``): it is older than the part of the
    protocol asked for (e.g. the block layout, :mod:`~mrecord.serve.protocol.layout`)."""


class Transport(abc.ABC):
    """Blocks of one dataset of one server (see the module docstring)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """``"http"`` or ``"local"``: how blocks arrive (what ``RemoteDataset.transport``
        says)."""

    @property
    def in_flight(self) -> int:
        """Requests worth having in flight at once through this transport (a reader keeps
        at most this many, and at most its ``num_parallel_workers``)."""
        return 1 << 30

    @abc.abstractmethod
    def read(self, ids: np.ndarray, columns: list[str]) -> tuple[int, dict[str, ColumnValues]]:
        """(rows, columns) of the rows ``ids`` (global ids, any order, repeats allowed)."""

    def hint(self, ids: np.ndarray, columns: list[str]) -> None:  # noqa: B027 - advice only
        """Tell the server these rows will be read soon, so that it reads them ahead; a
        transport that cannot (or a server that does not take hints) does nothing. Never
        raises for the server's sake: a lost hint costs only speed."""

    def close(self) -> None:  # noqa: B027 - a transport with nothing to release needs nothing
        """Release what the transport holds (connections); it is not used afterwards."""
