"""What ``GET /metrics`` tells a Prometheus scraper about ``mrecord serve``.

One :class:`Metrics` per app: rows and bytes served in blocks per dataset (HTTP
``/blocks``), a histogram of request latency, the requests in flight, error answers by
their code (``ErrorCode``), the open HTTP connections (when the server that runs the app
says how to count them) and the clients seen. :meth:`Metrics.render` writes the text
exposition format (version 0.0.4), by hand: no client library is needed for a few
counters. The event loop is one thread, but blocks are counted from worker threads, so
every update takes a lock.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS_S", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds of the request latency histogram (seconds; then ``+Inf``)."""

CLIENT_IDLE_S = 60.0
"""A client address counts as connected until it has sent nothing for this long."""


def _label(value: str) -> str:
    """A label value escaped as the text format wants (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters of one server (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rows: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.hinted_rows: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.requests = 0
        self.in_flight = 0
        self._buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self._latency_sum = 0.0
        self._clients: dict[str, float] = {}
        self.connections: Callable[[], int] | None = None
        """Open HTTP connections, when the running server can say (``run.py`` sets it)."""

    def served(self, dataset: str, rows: int, nbytes: int) -> None:
        """A block of ``rows`` rows, ``nbytes`` bytes of answer, of ``dataset``."""
        with self._lock:
            self.rows[dataset] = self.rows.get(dataset, 0) + rows
            self.bytes[dataset] = self.bytes.get(dataset, 0) + nbytes

    def hinted(self, dataset: str, rows: int) -> None:
        """A client told the server the ``rows`` of ``dataset`` it will read next."""
        with self._lock:
            self.hinted_rows[dataset] = self.hinted_rows.get(dataset, 0) + rows

    def started(self, client: str | None) -> tuple[float, bool]:
        """A request began (from ``client``'s address): its start time, and whether the
        client is new (not seen within ``CLIENT_IDLE_S``: a new session)."""
        now = time.monotonic()
        with self._lock:
            self.in_flight += 1
            new = False
            if client is not None:
                seen = self._clients.get(client)
                new = seen is None or seen < now - CLIENT_IDLE_S
                self._clients[client] = now
        return now, new

    def finished(self, start: float, error_code: str | None) -> None:
        """The request begun at ``start`` ended (with an error answer of ``error_code``)."""
        elapsed = time.monotonic() - start
        with self._lock:
            self.in_flight -= 1
            self.requests += 1
            self._buckets[bisect.bisect_left(LATENCY_BUCKETS_S, elapsed)] += 1
            self._latency_sum += elapsed
            if error_code is not None:
                self.errors[error_code] = self.errors.get(error_code, 0) + 1

    def clients(self) -> int:
        """Client addresses that sent a request within the last ``CLIENT_IDLE_S``."""
        cutoff = time.monotonic() - CLIENT_IDLE_S
        with self._lock:
            for host in [h for h, seen in self._clients.items() if seen < cutoff]:
                del self._clients[host]
            return len(self._clients)

    def render(self) -> str:
        """The text exposition format."""
        clients = self.clients()
        connections = self.connections() if self.connections is not None else None
        with self._lock:
            out: list[str] = []

            def family(name: str, kind: str, text: str) -> None:
                out.append(f"# HELP {name} {text}")
                out.append(f"# TYPE {name} {kind}")

            family("mrecord_serve_rows_total", "counter", "Rows served in blocks, per dataset.")
            for name, n in sorted(self.rows.items()):
                out.append(f'mrecord_serve_rows_total{{dataset="{_label(name)}"}} {n}')
            family(
                "mrecord_serve_bytes_total", "counter", "Bytes of block answers, per dataset."
            )
            for name, n in sorted(self.bytes.items()):
                out.append(f'mrecord_serve_bytes_total{{dataset="{_label(name)}"}} {n}')
            family(
                "mrecord_serve_hinted_rows_total",
                "counter",
                "Rows clients said they will read next (read ahead by the server), per dataset.",
            )
            for name, n in sorted(self.hinted_rows.items()):
                out.append(f'mrecord_serve_hinted_rows_total{{dataset="{_label(name)}"}} {n}')
            family(
                "mrecord_serve_request_duration_seconds",
                "histogram",
                "Time from a request's arrival to the end of its answer.",
            )
            total = 0
            for bound, count in zip(LATENCY_BUCKETS_S, self._buckets, strict=False):
                total += count
                out.append(f'mrecord_serve_request_duration_seconds_bucket{{le="{bound}"}} {total}')
            total += self._buckets[-1]
            out.append(f'mrecord_serve_request_duration_seconds_bucket{{le="+Inf"}} {total}')
            out.append(f"mrecord_serve_request_duration_seconds_sum {self._latency_sum:.6f}")
            out.append(f"mrecord_serve_request_duration_seconds_count {total}")
            family("mrecord_serve_requests_in_flight", "gauge", "Requests being answered now.")
            out.append(f"mrecord_serve_requests_in_flight {self.in_flight}")
            family("mrecord_serve_errors_total", "counter", "Error answers, by error code.")
            for code, n in sorted(self.errors.items()):
                out.append(f'mrecord_serve_errors_total{{code="{_label(code)}"}} {n}')
            family(
                "mrecord_serve_clients",
                "gauge",
                f"Client addresses that sent a request in the last {CLIENT_IDLE_S:.0f} s.",
            )
            out.append(f"mrecord_serve_clients {clients}")
            if connections is not None:
                family("mrecord_serve_connections", "gauge", "Open HTTP connections.")
                out.append(f"mrecord_serve_connections {connections}")
        return "\n".join(out) + "\n"
