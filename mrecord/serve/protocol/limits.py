"""The bounds ``mrecord serve`` enforces on a request and on its own concurrency.

``GET /api/datasets/{name}`` includes them (``"limits"``) so that a reader sizes its
block requests to fit; the same-host socket enforces the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds on what one request may ask for and on the server's concurrency."""

    max_page_rows: int = 200
    """Rows per ``/rows`` page (a larger ``stop - start`` is cut to this)."""
    max_page_bytes: int = 8 << 20
    """Bytes of one ``/rows`` or ``/search`` JSON answer (fewer rows for big rows; one row
    bigger than this is 413 in the full view: ask for ``view=summary``)."""
    max_search_rows: int = 100
    max_block_rows: int = 65_536
    max_block_bytes: int = 64 << 20
    """Bytes of the values of one ``/blocks`` answer, counted as they are (413 beyond: ask
    for fewer ids)."""
    max_body_bytes: int = 1 << 20
    read_threads: int = 4
    """Requests reading data at once; the others wait their turn (not a thread each)."""
    client_read_threads: int | None = None
    """Of those, how many one client (one address) may hold at once; None: half of
    ``read_threads`` (at least 1). A client's further requests wait in its own queue, so
    one client cannot starve the others (``mrecord/serve/server/fairness.py``)."""
    client_max_requests: int = 64
    """Requests one client may have waiting or being answered over HTTP; more are
    answered ``busy`` (503, retried by readers after a back-off)."""
    thumb_max_side: int = 256
    thumb_cache_bytes: int = 32 << 20
    send_timeout_s: float = 60.0
    """A client that reads nothing of a block for this long is disconnected."""
    body_timeout_s: float = 30.0
    """A request body must arrive within this time."""
    header_timeout_s: float = 10.0
    """A request's line and headers must arrive within this time of the connection (or of
    the request's first byte), or the connection is closed."""

    def client_share(self) -> int:
        """``client_read_threads``, or its default (half of ``read_threads``, at least 1)."""
        if self.client_read_threads is not None:
            return max(1, self.client_read_threads)
        return max(1, self.read_threads // 2)
