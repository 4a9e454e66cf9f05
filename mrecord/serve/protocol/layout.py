"""What a reader needs to cut ``Shuffle.BLOCK``'s blocks as ``MindDataset`` does.

``Shuffle.BLOCK`` cuts blocks on page boundaries and sizes them from the storage under
the files and a memory budget (:mod:`mrecord.sampling.shuffle.block`); ``Shuffle.ADAPTIVE``
picks BLOCK by the same numbers. A ``RemoteDataset`` has no files, so the server sends
these facts, computed where the files are, and the reader plans the same layout from
them (``mrecord.pipeline.sources.block_layout.plan_layout_from``)::

    GET /api/datasets/{name}/layout  ->  {"num_rows": N, "data_bytes": B,
                                          "page_starts": [0, 5, 10, ...],
                                          "memory_budget": M | null}
    GET /api/datasets/{name}/storage ->  {"iops": I | null, "bandwidth": W | null}

- ``page_starts``: the global row id of every page's first row, file 0's pages first
  (one integer per page; metadata, no data read);
- ``data_bytes``: bytes of the shard files together; ``memory_budget``: what the server
  process may still fill (its cgroup's limit less its resident memory), taken once, at
  the first ``layout`` request, so that every reader of the server plans the same sizes;
- ``storage``: random reads per second and bytes per second of the device under the
  files, measured once per device on the first ``storage`` request (about half a second
  of direct I/O; ``null`` where it cannot be measured: tmpfs, an object store). A reader
  asks only when it plans sizes on one rank without ``block_rows``/``window_blocks``.

Both answers travel over HTTP, also for a reader whose blocks come through the
same-host socket. A server older than this protocol answers ``not_found`` for both:
a reader then refuses ``Shuffle.BLOCK`` with an error that says so (it would read
another order than ``MindDataset``) and reads ``Shuffle.ADAPTIVE`` without BLOCK.

A random order over small rows beyond the server's memory is read fastest a window at a
time, the window's rows asked for in ascending order (the server's reads then pass over
its files once a window instead of jumping for every row) and put back in the order by
the reader (``RemoteDataset``'s sweep, ``DatasetReader.sweep_rows``'s rule, weighed
where the files are)::

    GET /api/datasets/{name}/sweep?columns=a,b&rows=R&budget=M  ->  {"window": W}

- ``budget``: the bytes the *reader* may fill, which hold its windows; ``rows``: how many
  rows its order holds (the window is never more);
- ``window``: rows per window, 0 where rows are best asked for as they come (the files
  fit the server's memory, or its device serves requests about as fast as a pass). A
  server older than this answer: ``not_found``, and the reader asks as rows come.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import DatasetServerError

__all__ = [
    "LAYOUT",
    "STORAGE",
    "SWEEP",
    "LayoutAnswer",
    "storage_from_json",
    "storage_to_json",
    "sweep_query",
    "sweep_window",
]

LAYOUT = "layout"
"""The path under ``/api/datasets/{name}/`` of the layout answer."""
STORAGE = "storage"
"""The path under ``/api/datasets/{name}/`` of the storage answer."""
SWEEP = "sweep"
"""The path under ``/api/datasets/{name}/`` of the sweep answer."""


@dataclass(frozen=True, eq=False)
class LayoutAnswer:
    """The ``layout`` answer (module docstring), checked."""

    num_rows: int
    data_bytes: int
    page_starts: npt.NDArray[np.int64]
    memory_budget: int | None

    def to_json(self) -> dict[str, Any]:
        """The JSON map the server sends."""
        return {
            "num_rows": int(self.num_rows),
            "data_bytes": int(self.data_bytes),
            "page_starts": [int(v) for v in self.page_starts.tolist()],
            "memory_budget": None if self.memory_budget is None else int(self.memory_budget),
        }

    @classmethod
    def from_json(cls, obj: Any, where: str) -> LayoutAnswer:
        """Parse a ``layout`` answer; DatasetServerError naming ``where`` when malformed."""
        if not isinstance(obj, dict):
            raise _bad(where, f"expected a map, got {type(obj).__name__}")
        rows = _count(obj.get("num_rows"), "num_rows", where)
        size = _count(obj.get("data_bytes"), "data_bytes", where)
        budget = obj.get("memory_budget")
        if budget is not None:
            budget = _count(budget, "memory_budget", where)
        raw = obj.get("page_starts")
        if not isinstance(raw, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw
        ):
            raise _bad(where, f'"page_starts" must be a list of ints, got {str(raw)[:80]}')
        starts = np.asarray(raw, dtype=np.int64).reshape(-1)
        if starts.size and (
            int(starts.min()) < 0 or int(starts.max()) > rows or bool(np.any(np.diff(starts) < 0))
        ):
            raise _bad(where, f'"page_starts" must be increasing row ids in [0, {rows}]')
        return cls(rows, size, starts, budget)


def storage_to_json(numbers: tuple[float, float] | None) -> dict[str, float | None]:
    """The ``storage`` answer for ``(iops, bytes per second)`` or None (not measurable)."""
    if numbers is None:
        return {"iops": None, "bandwidth": None}
    return {"iops": float(numbers[0]), "bandwidth": float(numbers[1])}


def storage_from_json(obj: Any, where: str) -> tuple[float, float] | None:
    """``(iops, bytes per second)`` of a ``storage`` answer, None when not measured."""
    if not isinstance(obj, dict):
        raise _bad(where, f"expected a map, got {type(obj).__name__}")
    iops, bandwidth = obj.get("iops"), obj.get("bandwidth")
    if iops is None or bandwidth is None:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (iops, bandwidth)):
        raise _bad(where, f'"iops" and "bandwidth" must be numbers, got {obj!r}')
    return float(iops), float(bandwidth)


def sweep_query(columns: Sequence[str], rows: int, budget: int) -> str:
    """The path and query of a ``sweep`` question (module docstring)."""
    query = urllib.parse.urlencode(
        {"columns": ",".join(columns), "rows": int(rows), "budget": int(budget)}
    )
    return f"{SWEEP}?{query}"


def sweep_window(obj: Any, where: str) -> int:
    """The rows per window of a ``sweep`` answer (0: no sweep); DatasetServerError
    naming ``where`` when malformed."""
    if not isinstance(obj, dict):
        raise _bad(where, f"expected a map, got {type(obj).__name__}", "sweep")
    return _count(obj.get("window"), "window", where, answer="sweep")


def _count(value: Any, name: str, where: str, answer: str = "block layout") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(where, f'"{name}" must be an int >= 0, got {value!r}', answer)
    return value


def _bad(where: str, why: str, answer: str = "block layout") -> DatasetServerError:
    return DatasetServerError(f"{where}: malformed {answer} answer: {why}")
