"""``RemoteDataset``: a dataset served by ``mrecord serve``, read like a local ``MindDataset``.

::

    ds = mrecord.RemoteDataset("http://data-host:8750", "train", columns_list=["image", "label"],
                               shuffle=Shuffle.GLOBAL, num_shards=8, shard_id=rank, token=TOKEN)

It is a :class:`~mrecord.pipeline.sources.random_access.RandomAccessSource`, as
``MindDataset`` is: the order of every epoch (shuffle mode, seed, epoch, sharding,
num_samples, sampler, a mid-epoch resume position) is computed here by the same code,
from the dataset's file row counts; only row ids travel to the server, so rank 3 of 8
gets exactly the rows, in the same order, that it would get from the files. Blocks are
read ahead on the pipeline's pool and delivered in order. How they travel (HTTP, or the
server's same-host socket) and what is retried is the transport's business
(:mod:`~mrecord.serve.client.transports.auto`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, DatasetServerError, SchemaError
from mrecord.format.schema import StoredSchema, parse_schema
from mrecord.pipeline.sources.block_layout import (
    DatasetLayout,
    check_block_sizes,
    memory_budget,
    mode_and_shards,
    plan_layout_from,
)
from mrecord.pipeline.sources.lookahead import HintThread, hinting
from mrecord.pipeline.sources.mind_dataset import _check_padding_args
from mrecord.pipeline.sources.random_access import (
    BUDGET_PER_COPIED_BLOCK,
    RandomAccessSource,
    padded_block,
)
from mrecord.sampling import Sampler, Shuffle
from mrecord.sampling.shuffle import DEFAULT_ADAPTIVE_THRESHOLD, DEFAULT_PARTIAL_WINDOW, BlockLayout
from mrecord.serve.client.served import ServedSpec
from mrecord.serve.client.session import Session, default_session
from mrecord.serve.client.sweep import read_ascending
from mrecord.serve.client.transports.auto import CHOICES, AutoTransport
from mrecord.serve.client.transports.base import NotOffered
from mrecord.serve.client.transports.failover import FailoverTransport
from mrecord.serve.client.transports.http import HttpTransport
from mrecord.serve.protocol.layout import (
    LAYOUT,
    STORAGE,
    LayoutAnswer,
    storage_from_json,
    sweep_query,
    sweep_window,
)

__all__ = ["TRANSPORTS", "RemoteDataset"]

TRANSPORTS = CHOICES
"""``RemoteDataset(transport=)``'s choices (see :data:`~.transports.auto.CHOICES`)."""

_TARGET_BLOCK_BYTES = 16 << 20
"""Bytes per block request: big enough that a request costs little beside its copy."""
_MIN_BLOCK_ROWS = 16
_MAX_BLOCK_ROWS = 65_536
"""Rows per request at most: the server's default ``max_block_rows`` and a
``MindDataset`` block's bound. Tabular rows (76 bytes) went 8,192 to a request before:
0.87-0.95M rows/s in GLOBAL order over HTTP against 1.86-1.89M now, 4.15-4.19M in file
order over the same-host transport against 5.68-5.86M (docs/SERVE.md)."""
_MIN_SWEEP_WINDOWS = 2
"""Windows an epoch's random order is swept in at least (see ``_sweep_rows``)."""
_LABEL_STEP = 65_536
"""Ids per request when the PKSampler's class column is fetched."""


class RemoteDataset(RandomAccessSource):
    """Read a dataset from ``mrecord serve`` with ``MindDataset``'s arguments and orders.

    Args:
        url: the server, e.g. ``"http://127.0.0.1:8750"``, or a list of servers of the same
            dataset (same files): blocks come from the first that answers, and from the next
            one when it dies (:mod:`~.transports.failover`); when none answers, the error
            names them all. ``https://`` needs the server started with ``--tls-cert``.
        dataset: the dataset's name on that server (``GET /api/datasets`` lists them).
        columns_list, shuffle, num_shards, shard_id, sampler, num_samples: as for
            :class:`~mrecord.MindDataset` (same rules, same orders).
        token: the server's bearer token, if it has one.
        num_parallel_workers: block requests in flight (default 4; at most 2 through the
            same-host socket, whose answers are quick); MindDataset's rule for the range.
        timeout: seconds to wait for one answer; retries: tries after a connection error
            or a busy server.
        partial_window, adaptive_threshold: as for MindDataset.
        transport: ``"auto"`` (default): blocks come through shared memory when the
            server runs on this machine (a loopback URL) and offers its same-host socket,
            else over HTTP; ``"http"``: always HTTP; ``"local"``: shared memory or an error.
            The rows and values are the same either way.
        cafile: for ``https://``: the certificate(s) to trust instead of the system's (a
            self-signed server's certificate file).
        read_ahead_hints: over HTTP, tell the server the row ids of the blocks coming
            after those in flight (``POST .../hint``; the order is known in advance), so
            that its storage reads them ahead, beyond RAM too, while blocks travel. Sent
            from a thread of their own; they never change what is read.
        session: what this reader shares with others of the process (receive buffers,
            shared memory, same-host connections); default: the process's own.
        padded_sample, num_padded: as for MindDataset (``num_padded`` copies of
            ``padded_sample``, which needs ``columns_list``, so that the rows divide by
            ``num_shards``); the padded rows never travel.
        block_rows, window_blocks: ``Shuffle.BLOCK``'s sizes, as for MindDataset. Page
            boundaries, and the sizes left None, come from the server
            (:mod:`~mrecord.serve.protocol.layout`: its pages, its memory budget and, on
            one rank, its storage), so the order is the one ``MindDataset`` reads on the
            server's host; a server too old to send them refuses BLOCK with an error.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        dataset: str,
        columns_list: Sequence[str] | None = None,
        shuffle: bool | Shuffle | None = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
        sampler: Sampler | None = None,
        num_samples: int | None = None,
        token: str | None = None,
        *,
        num_parallel_workers: int = 4,
        timeout: float = 60.0,
        retries: int = 4,
        partial_window: int = DEFAULT_PARTIAL_WINDOW,
        adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
        transport: str = "auto",
        session: Session | None = None,
        padded_sample: Mapping[str, Any] | None = None,
        num_padded: int | None = None,
        cafile: str | None = None,
        read_ahead_hints: bool = True,
        block_rows: int | None = None,
        window_blocks: int | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ArgumentError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
        _check_padding_args(padded_sample, num_padded, columns_list)  # MindDataset's rules
        check_block_sizes(block_rows, window_blocks)
        self._block_sizes = (block_rows, window_blocks)
        self._layout: tuple[Sampler, BlockLayout | None] | None = None
        super().__init__(
            num_parallel_workers=num_parallel_workers,
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            sampler=sampler,
            num_samples=num_samples,
            num_padded=num_padded or 0,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        session = session or default_session()
        connections = self._workers + 2
        urls = [url] if isinstance(url, str) else list(url)
        if not urls or not all(isinstance(u, str) for u in urls):
            raise ArgumentError(f"url must be a URL or a non-empty list of URLs, got {url!r}")
        servers = [
            AutoTransport(
                HttpTransport(
                    u,
                    dataset,
                    token=token,
                    timeout=timeout,
                    connections=connections,
                    buffers=session.receive_buffers,
                    cafile=cafile,
                ),
                retries=retries,
                session=session,
            )
            for u in urls
        ]
        self._transport: AutoTransport | FailoverTransport = (
            servers[0] if len(servers) == 1 else FailoverTransport(servers)
        )
        self.served = ServedSpec(tuple(urls), dataset, token, cafile, timeout, retries, transport)
        """How to open this dataset again in another process (a DataLoader worker, a Ray
        task): what ``mrecord.torch`` and ``mrecord.ray`` take it by."""
        info = self._transport.info()
        self._info = info
        self._files = [int(f["rows"]) for f in info["files"]]
        names = [f["name"] for f in info["schema"]]
        if columns_list is None:
            self._columns = sorted(names)  # MindDataset's (and MindSpore's) default order
        else:
            if isinstance(columns_list, str) or not isinstance(columns_list, Sequence):
                raise ArgumentError(f"columns_list must be a list of names, got {columns_list!r}")
            unknown = [c for c in columns_list if c not in names]
            if unknown:
                raise SchemaError(f"column(s) {unknown!r} are not in the schema {names!r}")
            self._columns = list(columns_list)
        self._block_rows = _block_rows(info, self._columns, memory_budget())
        if padded_sample is not None:
            self._padded = padded_block(_schema(info), self._columns, padded_sample)
        self._transport.choose(transport, info, connections=connections, timeout=timeout)
        self._hints = read_ahead_hints
        self._hinter = HintThread("mrecord-hint")
        self._sweeps_offered = True  # False once the server says it has no sweep answer
        self._count_rows()

    # -- what a random-access source provides --------------------------------------------------

    def _file_row_counts(self) -> list[int]:
        return self._files

    def _read_rows(self, ids: np.ndarray) -> Block:
        return self._read_columns(ids, self._columns)

    def _column_values(self, column: str) -> np.ndarray:
        ids = np.arange(self._total_rows(), dtype=np.int64)
        parts = [
            np.asarray(self._read_columns(ids[i : i + _LABEL_STEP], [column]).columns[column])
            for i in range(0, len(ids), _LABEL_STEP)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _source_column_names(self) -> list[str]:
        return list(self._columns)

    def _block_layout(self) -> BlockLayout | None:
        # Planned once per sampler, as MindDataset's: every epoch (and a resume) reads
        # with the same blocks.
        if self._layout is None or self._layout[0] is not self._sampler:
            self._layout = (self._sampler, self._plan_layout())
        return self._layout[1]

    def _reads_in_flight(self) -> int:
        return min(self._workers, self._transport.in_flight)

    def _sweep_rows(self, rows: int) -> int:
        # Not a block shuffle's order: its requests take a window of pages already.
        if self._block_layout() is not None:
            return 0
        # Two windows at least: the second is read while the first is handed out, and
        # the first rows wait for half the epoch's reads, not all of them. 8M tabular
        # rows beyond the server's memory, three alternating pairs from a cold cache
        # (bench_serve_beyond_ram --min-windows 1 / 2): the first batch after 6.0-7.0 s
        # instead of 9.9-11.2 s, the epoch's rate 0.84-0.99x (median 0.97x).
        return self.sweep_rows(self._columns, -(-rows // _MIN_SWEEP_WINDOWS))

    def _read_swept(self, ids: np.ndarray, stop: threading.Event) -> Block:
        return self._read_ascending(ids, self._columns, stop)

    def _lookahead(self, chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        if not self._hints or self._transport.name != "http":
            return chunks
        return hinting(chunks, self._reads_in_flight() + 2, self._send_hint)

    def _send_hint(self, ids: np.ndarray) -> None:
        ids = ids[ids < self._total_rows()]  # padded samples never travel
        if not len(ids):
            return
        self._hinter.submit(self._transport.hint, ids, list(self._columns))

    def _describe(self) -> str:
        return f"RemoteDataset({self._transport.where}, sampler={self._sampler!r})"

    # -- public extras --------------------------------------------------------------------------

    @property
    def transport(self) -> str:
        """How blocks arrive now: ``"local"`` (the server's same-host socket, shared
        memory) or ``"http"``."""
        return self._transport.name

    @property
    def block_layout(self) -> BlockLayout | None:
        """The block layout ``Shuffle.BLOCK`` (or ADAPTIVE, when it picks BLOCK) reads
        with, planned from the server's facts (None: the mode needs none)."""
        return self._block_layout()

    @property
    def file_row_counts(self) -> list[int]:
        """Rows per shard file on the server, in file order."""
        return list(self._files)

    @property
    def file_names(self) -> list[str]:
        """The shard files' names on the server (no folders), in file order."""
        return [str(f["file"]) for f in self._info["files"]]

    @property
    def schema(self) -> StoredSchema:
        """The dataset's schema (every column, in the files' order)."""
        return _schema(self._info)

    @property
    def row_bytes(self) -> dict[str, float]:
        """Mean raw bytes per row of each column (from the server's description)."""
        return {str(k): float(v) for k, v in self._info["row_bytes"].items()}

    @property
    def block_rows(self) -> int:
        """Rows per request this reader sends (within the server's limits)."""
        return self._block_rows

    def read_rows(
        self,
        ids: np.ndarray | Sequence[int],
        columns: Sequence[str] | None = None,
        *,
        sweep: bool = False,
    ) -> Block:
        """Rows at global ``ids`` (any order), as a Block; one request. ``sweep``: ``ids``
        are a window of a random order (:meth:`sweep_rows` rows): asked for in ascending
        order, :attr:`block_rows` a request, several at once, and put back in the order
        here (``serve/client/sweep.py``); the same rows either way."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        names = list(columns) if columns else self._columns
        if sweep:
            return self._read_ascending(ids, names, None)
        return self._read_columns(ids, names)

    def sweep_rows(self, columns: Sequence[str] | None = None, rows: int | None = None) -> int:
        """Rows per window in which a random order (of at most ``rows`` rows) is read
        fastest, each window's rows asked for in ascending order (``read_rows(ids,
        sweep=True)``), or 0: as they come. The server weighs it (``GET .../sweep``,
        ``DatasetReader.sweep_rows``'s rule: small rows, files beyond its memory, a
        device whose requests cost more than a pass) for this process's memory, which
        holds the windows; the pipeline's iterator sweeps by itself."""
        names = list(columns) if columns else self._columns
        budget = memory_budget()
        if not self._sweeps_offered or budget is None:
            return 0
        rows = self._total_rows() if rows is None else int(rows)
        try:
            answer = self._transport.describe(sweep_query(names, rows, budget))
        except NotOffered:  # a server older than the sweep answer: as the rows come
            self._sweeps_offered = False
            return 0
        window = sweep_window(answer, self._transport.where)
        return window if window > self._block_rows else 0

    def hint(self, ids: np.ndarray | Sequence[int]) -> None:
        """Tell the server rows ``ids`` will be read soon, so that it reads them ahead
        (over HTTP, from a thread of its own; through the same-host socket nothing is
        needed). For readers that call :meth:`read_rows` themselves (``mrecord.torch``);
        the pipeline's iterator hints by itself (``read_ahead_hints``)."""
        if self._hints and self._transport.name == "http":
            self._send_hint(np.asarray(ids, dtype=np.int64).reshape(-1))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._hinter.close()
        self._transport.close()

    # -- internals --------------------------------------------------------------------------------

    def _plan_layout(self) -> BlockLayout | None:
        """MindDataset's plan (``plan_layout_from``) over the server's layout answer."""
        answer: list[LayoutAnswer] = []

        def fetch() -> LayoutAnswer:
            if not answer:
                obj = self._transport.describe(LAYOUT)
                answer.append(LayoutAnswer.from_json(obj, self._transport.where))
            return answer[0]

        def facts() -> DatasetLayout:
            got = fetch()
            if got.num_rows != self._total_rows():
                raise DatasetServerError(
                    f"{self._transport.where}: the layout answer counts {got.num_rows} rows, "
                    f"the dataset {self._total_rows()}: was it rewritten under the server?"
                )
            starts = got.page_starts
            return DatasetLayout(starts, got.num_rows, got.data_bytes, int(starts.size))

        def measure() -> tuple[float, float] | None:
            return storage_from_json(self._transport.describe(STORAGE), self._transport.where)

        try:
            return plan_layout_from(
                self._sampler, facts, lambda: fetch().memory_budget, measure, *self._block_sizes
            )
        except NotOffered as exc:
            if mode_and_shards(self._sampler)[0] is Shuffle.ADAPTIVE:
                return None  # ADAPTIVE without BLOCK, as before the server sent layouts
            raise DatasetServerError(
                f"{self._transport.where} sends no block layout (a server older than "
                "mrecord's layout answer): Shuffle.BLOCK through it would read another "
                "order than MindDataset. Upgrade `mrecord serve` there, or choose another "
                "shuffle mode"
            ) from exc

    def _read_ascending(
        self, ids: np.ndarray, columns: list[str], stop: threading.Event | None
    ) -> Block:
        """A sweep's window (``serve/client/sweep.py``): requests of ascending ids, as
        many in flight as blocks are, the coming ones hinted to the server."""

        def read(part: np.ndarray) -> Block:
            return self._read_columns(part, columns)

        return read_ascending(
            read,
            ids,
            step=self._block_rows,
            in_flight=self._reads_in_flight(),
            stop=stop,
            # The hints name this reader's columns: a read of others goes unannounced.
            lookahead=self._lookahead if columns == self._columns else None,
        )

    def _read_columns(self, ids: np.ndarray, columns: list[str]) -> Block:
        rows, cols = self._transport.read(ids, columns)
        if rows != len(ids) or list(cols) != columns:
            raise DatasetServerError(
                f"{self._transport.where}: asked for {len(ids)} rows of {columns!r}, "
                f"got {rows} rows of {list(cols)!r}"
            )
        return Block(cols, ids)


def _schema(info: dict[str, Any]) -> StoredSchema:
    """The dataset's schema from its ``GET /api/datasets/NAME`` answer."""
    specs = {
        f["name"]: {k: f[k] for k in ("type", "shape", "compression") if f.get(k) is not None}
        for f in info["schema"]
    }
    return parse_schema(specs)


def _block_rows(info: dict[str, Any], columns: list[str], budget: int | None) -> int:
    """Rows per request: about 16 MiB of raw data (``_MAX_BLOCK_ROWS`` at most), within the
    server's limits, and at most a ``BUDGET_PER_COPIED_BLOCK``-th of ``budget`` (this
    process's memory budget, None: not known), as ``MindDataset``'s blocks.

    A block's values arrive in a buffer of this process (a same-host reader's shared
    segment, populated here, is charged to its memory group), and up to the pipeline's
    prefetch size of them (16) wait for a slow consumer: blocks of 16 MiB got a reader in a
    200 MB memory group OOM-killed holding 127 MB of segments (2026-11-29,
    tests/serve/local/test_serve_local_memory.py)."""
    per_row = max(1.0, sum(float(info["row_bytes"][c]) for c in columns))
    limits = info.get("limits", {})
    target = _TARGET_BLOCK_BYTES
    if budget is not None:
        target = min(target, budget // BUDGET_PER_COPIED_BLOCK)
    rows = int(np.clip(target // per_row, _MIN_BLOCK_ROWS, _MAX_BLOCK_ROWS))
    rows = min(rows, int(limits.get("max_block_rows", rows)))
    by_bytes = int(limits.get("max_block_bytes", 1 << 62) // per_row)
    return max(1, min(rows, by_bytes))
