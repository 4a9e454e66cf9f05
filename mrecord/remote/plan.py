"""The future of a dataset's reads: for every row, when it will be read next.

Every row order mrecord uses is a pure function of (file sizes, seed, epoch)
(``mrecord.sampling.order``), so the reader can hand the remote layer the rest of
this epoch and the next epoch's order. :class:`ReadPlan` turns them into *next
use* positions per row: position ``p`` of epoch ``e``'s order is use ``p``, position
``p`` of epoch ``e + 1`` is use ``len(order_e) + p``. A row read consumes its
earliest pending use (whatever thread reads it, in whatever order the read-ahead
threads finish), so :meth:`ReadPlan.next_use` is exact without a shared clock.

Without a plan (a plain ``read_rows`` caller), next use is unknown and the key
falls back to recency: the least recently read row is the one to drop first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

__all__ = ["NEVER", "ReadPlan"]

NEVER = np.iinfo(np.int64).max
"""The next use of a row that the known future does not read again."""

# Keys of rows without a plan: far beyond any planned use, older reads further still.
_UNPLANNED = NEVER // 2


class ReadPlan:
    """Next use of each of ``num_rows`` rows (global ids), from the orders set last."""

    def __init__(self, num_rows: int) -> None:
        self.num_rows = num_rows
        self._lock = threading.Lock()
        self._uses: np.ndarray | None = None  # use positions, grouped by row, ascending
        self._starts = np.zeros(num_rows + 1, dtype=np.int64)  # row r: uses[starts[r]:...]
        self._taken = np.zeros(num_rows, dtype=np.int64)  # uses of row r consumed
        self._last_read = np.zeros(num_rows, dtype=np.int64)  # for the recency fallback
        self._clock = 0

    @property
    def planned(self) -> bool:
        """Whether an order was set (else keys are by recency)."""
        return self._uses is not None

    def set_orders(self, orders: Sequence[np.ndarray]) -> None:
        """The coming orders, in read order (this epoch's, then the next one's). Ids
        outside ``[0, num_rows)`` (padded samples) are ignored."""
        ids_parts, pos_parts, base = [], [], 0
        for order in orders:
            ids = np.asarray(order, dtype=np.int64).reshape(-1)
            positions = np.arange(base, base + len(ids), dtype=np.int64)
            keep = (ids >= 0) & (ids < self.num_rows)
            ids_parts.append(ids[keep])
            pos_parts.append(positions[keep])
            base += len(ids)
        ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int64)
        positions = np.concatenate(pos_parts) if pos_parts else np.zeros(0, dtype=np.int64)
        by_row = np.lexsort((positions, ids))
        counts = np.bincount(ids, minlength=self.num_rows)
        starts = np.zeros(self.num_rows + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        with self._lock:
            self._uses = positions[by_row]
            self._starts = starts
            self._taken = np.zeros(self.num_rows, dtype=np.int64)

    def consume(self, rows: np.ndarray) -> None:
        """``rows`` are being read now: each one's earliest pending use is spent."""
        rows = np.asarray(rows, dtype=np.int64)
        with self._lock:
            self._clock += 1
            self._last_read[rows] = self._clock
            if self._uses is not None:
                np.add.at(self._taken, rows, 1)

    def next_use(self, rows: np.ndarray) -> np.ndarray:
        """Sort keys, smaller = needed sooner: the next planned use of each row
        (:data:`NEVER` when the plan does not read it again), or without a plan the
        recency of its last read (older = larger)."""
        rows = np.asarray(rows, dtype=np.int64)
        with self._lock:
            if self._uses is None:
                recency: np.ndarray = _UNPLANNED - self._last_read[rows]
                return recency
            index = self._starts[rows] + self._taken[rows]
            pending = index < self._starts[rows + 1]
            out = np.full(len(rows), NEVER, dtype=np.int64)
            out[pending] = self._uses[index[pending]]
            return out
