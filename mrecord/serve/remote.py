"""``RemoteDataset``: a dataset served by ``mrecord serve``, read like a local ``MindDataset``.

::

    ds = mrecord.RemoteDataset("http://data-host:8750", "train", columns_list=["image", "label"],
                               shuffle=Shuffle.GLOBAL, num_shards=8, shard_id=rank, token=TOKEN)

The order of every epoch (shuffle mode, seed, epoch, sharding, num_samples, sampler)
is computed here, by the same sampler functions ``MindDataset`` uses, from the
dataset's file row counts; only row ids travel to the server (``POST .../blocks``),
so rank 3 of 8 gets exactly the rows, in the same order, that it would get from
the files. Blocks are requested ``num_parallel_workers`` at a time and delivered in
order; connection errors (and 503, server busy) are retried with back-off, and a
server that stays gone raises :class:`~mrecord.errors.DatasetServerError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import queue
import socket
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import numpy as np

from mrecord.block import Block
from mrecord.errors import (
    ArgumentError,
    AuthenticationError,
    CorruptFileError,
    DatasetNotFoundError,
    DatasetServerError,
    SchemaError,
)
from mrecord.pipeline.source import SourceDataset
from mrecord.pool import ThreadPool, ordered_map
from mrecord.sampling import Order, PKSampler, Sampler, Shuffle, sampler_from_args
from mrecord.sampling.shuffle import DEFAULT_ADAPTIVE_THRESHOLD, DEFAULT_PARTIAL_WINDOW
from mrecord.serve.buffers import BufferPool
from mrecord.serve.local_client import LocalBusy, LocalLink, LocalUnavailable, shared_link
from mrecord.serve.local_protocol import available as local_available
from mrecord.serve.security import is_loopback
from mrecord.serve.wire import decode_block, encode_request

if TYPE_CHECKING:
    from mrecord.pipeline.context import ExecContext

__all__ = ["TRANSPORTS", "RemoteDataset"]

_log = logging.getLogger("mrecord.serve")

TRANSPORTS = ("auto", "http", "local")
"""``RemoteDataset(transport=)``: ``local`` reads through the server's same-host socket
(shared memory; docs/SERVE.md, "Same-host readers"), ``http`` never does, ``auto`` does
when the server is on this machine and offers it, and falls back to HTTP otherwise."""

_TARGET_BLOCK_BYTES = 16 << 20
"""Bytes per block request: big enough that a request costs little beside its copy."""
_LOCAL_INFLIGHT = 2
"""Block requests in flight at most through the same-host socket."""
_MIN_BLOCK_ROWS = 16
_MAX_BLOCK_ROWS = 8192
_BACKOFF_S = (0.1, 0.3, 0.9, 2.0, 4.0)
_RECEIVE_BUFFERS = BufferPool(keep=0)
"""Receive buffers, shared by the RemoteDatasets of this process so that a new one (a new
epoch's, the evaluation set's) reuses the memory of earlier ones; it keeps as many
buffers as the busiest client has requests in flight, plus two."""
if hasattr(os, "register_at_fork"):  # a forked child starts with an empty pool and a free lock
    os.register_at_fork(after_in_child=_RECEIVE_BUFFERS.forget)
_ERRORS: dict[str, type[Exception]] = {
    "unauthorized": AuthenticationError,
    "unknown_dataset": DatasetNotFoundError,
    "corrupt_file": CorruptFileError,
    "unknown_column": SchemaError,
    "bad_request": ArgumentError,
    "bad_ids": ArgumentError,
    "too_large": ArgumentError,
}


class RemoteDataset(SourceDataset):
    """Read a dataset from ``mrecord serve`` with ``MindDataset``'s arguments and orders.

    Args:
        url: the server, e.g. ``"http://127.0.0.1:8750"``.
        dataset: the dataset's name on that server (``GET /api/datasets`` lists them).
        columns_list, shuffle, num_shards, shard_id, sampler, num_samples: as for
            :class:`~mrecord.MindDataset` (same rules, same orders).
        token: the server's bearer token, if it has one.
        num_parallel_workers: block requests in flight (default 4; at most 2 through the
            same-host socket, whose answers are quick).
        timeout: seconds to wait for one answer; retries: tries after a connection error.
        partial_window, adaptive_threshold: as for MindDataset.
        transport: ``"auto"`` (default): blocks come through shared memory when the
            server runs on this machine (a loopback URL) and offers its same-host socket,
            else over HTTP; ``"http"``: always HTTP; ``"local"``: shared memory or an error.
            The rows and values are the same either way.
    """

    def __init__(
        self,
        url: str,
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
    ) -> None:
        super().__init__()
        if transport not in TRANSPORTS:
            raise ArgumentError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
        if isinstance(num_parallel_workers, bool) or not isinstance(num_parallel_workers, int):
            raise TypeError(f"num_parallel_workers must be an int, got {num_parallel_workers!r}")
        if not 1 <= num_parallel_workers <= 64:
            raise ArgumentError(
                f"num_parallel_workers must be in [1, 64], got {num_parallel_workers}"
            )
        self._sampler = sampler_from_args(
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            sampler=sampler,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )
        self._inflight = num_parallel_workers
        self._client = _Client(url, dataset, token, timeout, retries, num_parallel_workers)
        info = self._client.get_json("")
        self._file_row_counts = [int(f["rows"]) for f in info["files"]]
        self._total_rows = sum(self._file_row_counts)
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
        self._block_rows = _block_rows(info, self._columns)
        self._client.choose_transport(transport, info)
        self._labels: np.ndarray | None = None
        self._rows_per_epoch = self._sampler.num_rows_for(
            self._total_rows, labels=self._class_labels
        )

    # -- source contract ----------------------------------------------------------------------

    def _source_num_rows(self) -> int:
        return self._rows_per_epoch

    def _source_column_names(self) -> list[str]:
        return list(self._columns)

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        chunks = self._order(ctx.seed, epoch).iter_chunks(self._block_rows)
        yield from self._fetch_ahead(ctx, chunks)

    def _iter_blocks_range(
        self, ctx: ExecContext, epoch: int, start: int, stop: int
    ) -> Iterator[Block]:
        """Positions ``start:stop`` of this epoch's order (ConcatDataset.use_sampler)."""
        order = self._order(ctx.seed, epoch)
        chunks = (
            order.take(np.arange(lo, min(lo + self._block_rows, stop), dtype=np.int64))
            for lo in range(start, stop, self._block_rows)
        )
        yield from self._fetch_ahead(ctx, chunks)

    def _order(self, seed: int, epoch: int) -> Order:
        """This epoch's row order: the same pure function of sizes, seed and epoch as locally."""
        return self._sampler.build_order(
            self._file_row_counts, seed=seed, epoch=epoch, labels=self._class_labels
        )

    def _fetch_ahead(self, ctx: ExecContext, chunks: Iterator[np.ndarray]) -> Iterator[Block]:
        """Keep ``num_parallel_workers`` block requests in flight on the pipeline's pool for
        this node (shut down with the iterator); yield the blocks in order."""
        inflight = self._inflight
        if self._client.transport == "local":
            # A same-host answer takes a fraction of a millisecond: more requests in
            # flight only add threads that contend for the GIL (measured: 4 in flight
            # read 15% fewer rows/s than 2).
            inflight = min(inflight, _LOCAL_INFLIGHT)
        pool = ctx.pool(self, lambda: ThreadPool(self._read, inflight, "mrecord-remote"))
        for _ids, block in ordered_map(pool, chunks, inflight, ctx.stop):
            yield block

    def _read(self, ids: np.ndarray) -> Block:
        return self._client.read_block(ids, self._columns)

    def _describe(self) -> str:
        return f"RemoteDataset({self._client.base!r}, sampler={self._sampler!r})"

    # -- public extras --------------------------------------------------------------------------

    @property
    def transport(self) -> str:
        """How blocks arrive now: ``"local"`` (the server's same-host socket, shared
        memory) or ``"http"``."""
        return self._client.transport

    @property
    def sampler(self) -> Sampler:
        """The sampler that orders every epoch."""
        return self._sampler

    @property
    def file_row_counts(self) -> list[int]:
        """Rows per shard file on the server, in file order."""
        return list(self._file_row_counts)

    def read_rows(
        self, ids: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> Block:
        """Rows at global ``ids`` (any order), as a Block; one request."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        return self._client.read_block(ids, list(columns) if columns else self._columns)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    # -- internals --------------------------------------------------------------------------------

    def _class_labels(self) -> np.ndarray:
        """The PKSampler's class column for every row (fetched once, on demand)."""
        if self._labels is None:
            column = "label"
            sampler: Sampler | None = self._sampler
            while sampler is not None:
                if isinstance(sampler, PKSampler):
                    column = sampler.class_column
                    break
                sampler = sampler.get_child()
            ids = np.arange(self._total_rows, dtype=np.int64)
            step = 65_536
            parts = [
                np.asarray(self._client.read_block(ids[i : i + step], [column]).columns[column])
                for i in range(0, self._total_rows, step)
            ]
            self._labels = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return self._labels


def _block_rows(info: dict[str, Any], columns: list[str]) -> int:
    """Rows per request: about 16 MiB of raw data (8192 rows at most), within server limits."""
    per_row = max(1.0, sum(float(info["row_bytes"][c]) for c in columns))
    limits = info.get("limits", {})
    rows = int(np.clip(_TARGET_BLOCK_BYTES // per_row, _MIN_BLOCK_ROWS, _MAX_BLOCK_ROWS))
    rows = min(rows, int(limits.get("max_block_rows", rows)))
    by_bytes = int(limits.get("max_block_bytes", 1 << 62) // per_row)
    return max(1, min(rows, by_bytes))


class _Client:
    """HTTP calls to one dataset of one server, with retries; safe to share between threads.

    It speaks HTTP/1.1 with the standard library's ``http.client`` over a small pool of
    keep-alive connections, and receives a block's body with ``recv_into`` straight into
    the buffer the arrays will view (a reused one, see ``_RECEIVE_BUFFERS``): one copy
    from the socket, none in Python.
    """

    def __init__(
        self, url: str, dataset: str, token: str | None, timeout: float, retries: int, pool: int
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ArgumentError(f"url must look like http://HOST:PORT, got {url!r}")
        self.base = url.rstrip("/")
        self.dataset = dataset
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._path = f"{self._prefix}/api/datasets/{quote(dataset, safe='')}"
        self._retries = retries
        self._timeout = timeout
        self._token = token
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._idle: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue(maxsize=pool + 2)
        _RECEIVE_BUFFERS.keep_at_least(pool + 2)
        self._buffers = _RECEIVE_BUFFERS
        self._pool_size = pool
        self._local: LocalLink | None = None
        self._local_required = False
        self._row_bytes: dict[str, float] = {}

    @property
    def transport(self) -> str:
        """``"local"`` while blocks come through the same-host socket, else ``"http"``."""
        return "local" if self._local is not None else "http"

    def choose_transport(self, transport: str, info: dict[str, Any]) -> None:
        """Use the same-host socket ``info`` advertises, as ``transport`` asks."""
        self._row_bytes = {str(k): float(v) for k, v in info.get("row_bytes", {}).items()}
        if transport == "http":
            return
        path = info.get("local_socket")
        why = None
        if not local_available():
            why = "this platform has no memfd / Unix-socket fd passing (Linux only)"
        elif not is_loopback(self._host):
            why = f"{self._host!r} is not a loopback address (the socket is for this machine)"
        elif not isinstance(path, str) or not path:
            why = "the server offers no same-host socket (started with --local-socket off?)"
        if why is not None:
            if transport == "local":
                raise DatasetServerError(f"{self.base}: cannot read through shared memory: {why}")
            return
        assert isinstance(path, str)
        self._local_required = transport == "local"
        rows = int(sum(int(f["rows"]) for f in info["files"]))
        self._local = shared_link(
            path, self.dataset, self._token, rows, self._pool_size + 2, self._timeout
        )

    def close(self) -> None:
        """Close the pooled HTTP connections (same-host ones are the process's, shared)."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def __del__(self) -> None:
        # A dataset dropped without close() must not leak its sockets.
        idle = getattr(self, "_idle", None)
        if idle is not None:
            self.close()

    def get_json(self, suffix: str) -> Any:
        """GET ``/api/datasets/NAME{suffix}`` as JSON."""
        status, body = self._retrying("GET", self._path + suffix, None)
        if status != 200:
            raise _error_from(self.base, self.dataset, status, body)
        return json.loads(body.tobytes())

    def read_block(self, ids: np.ndarray, columns: list[str]) -> Block:
        """The rows ``ids`` of ``columns``: one same-host read or one ``POST .../blocks``."""
        local = self._local
        if local is not None:
            block = self._read_local(local, ids, columns)
            if block is not None:
                return block
        body = encode_request(ids, columns)
        status, buf = self._retrying("POST", self._path + "/blocks", body)
        if status != 200:
            raise _error_from(self.base, self.dataset, status, buf)
        rows, cols = decode_block(buf.data)
        return self._checked(ids, columns, rows, cols)

    def _read_local(self, local: LocalLink, ids: np.ndarray, columns: list[str]) -> Block | None:
        """The block through the same-host socket; None: read it over HTTP instead."""
        nbytes = self._block_bytes(len(ids), columns)
        for attempt in range(self._retries + 1):
            try:
                rows, cols = local.read(ids, columns, nbytes, self._raise)
            except LocalBusy as exc:
                if attempt < self._retries:  # as HTTP's 503: wait, then try again
                    time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
                    continue
                if self._local_required:
                    raise DatasetServerError(
                        f"{self.base} ({self.dataset!r}): the same-host socket stayed busy "
                        f"after {self._retries + 1} tries ({exc}); start `mrecord serve` "
                        "with a larger --max-connections"
                    ) from exc
                return None  # this block over HTTP; the socket stays for the next ones
            except LocalUnavailable as exc:
                if self._local_required:
                    raise DatasetServerError(
                        f"{self.base} ({self.dataset!r}): the same-host socket stopped "
                        f"answering ({exc}); is `mrecord serve` still running?"
                    ) from exc
                _log.warning(
                    "%s: same-host socket unusable (%s); reading over HTTP", self.base, exc
                )
                self._local = None
                return None
            return self._checked(ids, columns, rows, cols)
        return None  # pragma: no cover - the loop returns or raises

    def _checked(
        self, ids: np.ndarray, columns: list[str], rows: int, cols: dict[str, Any]
    ) -> Block:
        if rows != len(ids) or list(cols) != columns:
            raise DatasetServerError(
                f"{self.base}: asked for {len(ids)} rows of {columns!r}, "
                f"got {rows} rows of {list(cols)!r}"
            )
        return Block(cols, ids)

    def _block_bytes(self, rows: int, columns: list[str]) -> int:
        """A segment size that fits most blocks of ``rows`` rows: the mean row, with room
        for bigger ones (the server asks for more when a block does not fit)."""
        per_row = sum(self._row_bytes.get(c, 0.0) for c in columns)
        return int(rows * per_row * 1.25) + (64 << 10)

    def _raise(self, error: dict[str, Any]) -> Exception:
        """The mrecord error for an error answer of the same-host socket."""
        return _error_for(
            self.base, self.dataset, str(error.get("code")), str(error.get("message"))
        )

    # -- connections -------------------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._timeout)

    def _exchange(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None
    ) -> tuple[int, np.ndarray]:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/x-msgpack"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        length = response.getheader("content-length")
        if length is None:
            buf = np.frombuffer(response.read(), dtype=np.uint8)
        else:
            # A buffer used before, once no value of its last block is alive: a fresh
            # one (bytearray(n) included) costs the kernel more to fault in and zero
            # than the receive copy itself.
            buf = self._buffers.take(int(length))
            if self._scheme == "http" and conn.sock is not None:
                _receive_body(response, conn.sock, buf.data)
            else:
                _read_body(response, buf.data)
        if response.will_close:
            conn.close()
        return response.status, buf

    def _retrying(self, method: str, path: str, body: bytes | None) -> tuple[int, np.ndarray]:
        last = ""
        attempt = 0
        while attempt <= self._retries:
            try:
                conn, reused = self._idle.get_nowait(), True
            except queue.Empty:
                conn, reused = self._connect(), False
            try:
                status, buf = self._exchange(conn, method, path, body)
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if reused:
                    continue  # the server closed an idle connection: try a fresh one at once
                last = f"{type(exc).__name__}: {exc}"
            else:
                self._give_back(conn)
                if status != 503:
                    return status, buf
                last = "503 server busy"
            if attempt < self._retries:
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1
        raise DatasetServerError(
            f"dataset server {self.base} did not answer for dataset {self.dataset!r} after "
            f"{self._retries + 1} tries (last error: {last}); is `mrecord serve` running there?"
        )

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        if conn.sock is None:
            return
        try:
            self._idle.put_nowait(conn)
        except queue.Full:
            conn.close()


def _read_body(response: http.client.HTTPResponse, view: memoryview) -> None:
    """The body of ``response`` into ``view`` (exactly its size), through http.client."""
    got = 0
    while got < len(view):
        n = response.readinto(view[got:])
        if not n:
            raise http.client.IncompleteRead(bytes(0), len(view) - got)
        got += n


_WAKE_BYTES = 1 << 20
"""Receive a block in reads of at least this much (``SO_RCVLOWAT``), not as it trickles in."""


def _receive_body(
    response: http.client.HTTPResponse, sock: socket.socket, view: memoryview
) -> None:
    """The body of ``response`` into ``view`` (exactly its size), from the socket itself.

    The bytes the header parser already buffered come first; the rest is received with
    ``recv_into`` straight into ``view``, with ``SO_RCVLOWAT`` so that the thread wakes
    once per megabyte instead of once per few segments (half the client's CPU per MB on
    loopback). The socket keeps its timeout; the response is then closed as http.client
    does after a complete body, which leaves the connection open for the next request.
    """
    if not len(view):
        response.close()
        return
    fp = response.fp
    got = fp.readinto(view[: min(len(fp.peek()), len(view))]) or 0
    try:
        while got < len(view):
            want = len(view) - got
            _set_rcvlowat(sock, min(want, _WAKE_BYTES))
            n = sock.recv_into(view[got:], want)
            if not n:
                raise http.client.IncompleteRead(bytes(0), want)
            got += n
    finally:
        _set_rcvlowat(sock, 1)
    response.close()


def _set_rcvlowat(sock: socket.socket, nbytes: int) -> None:
    """``SO_RCVLOWAT`` where the platform has it (not Windows); only an optimisation."""
    option = getattr(socket, "SO_RCVLOWAT", None)
    if option is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, nbytes)


def _error_from(base: str, dataset: str, status: int, body: np.ndarray) -> Exception:
    """The mrecord error for an error answer (its code chooses the type)."""
    try:
        err = json.loads(body.tobytes())["error"]
        code, message = str(err["code"]), str(err["message"])
    except Exception:
        code, message = "unexpected", f"HTTP {status}: {body[:200].tobytes()!r}"
    return _error_for(base, dataset, code, message)


def _error_for(base: str, dataset: str, code: str, message: str) -> Exception:
    """The mrecord error for an error ``code`` of the API (the code chooses the type)."""
    cls = _ERRORS.get(code, DatasetServerError)
    return cls(f"{base} ({dataset!r}): {message} [{code}]")
