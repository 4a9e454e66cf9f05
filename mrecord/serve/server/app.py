"""The ASGI application of ``mrecord serve``: the JSON API, the block endpoint and the page.

Every route is listed in docs/SERVE.md with an example. Reading happens in a
bounded pool of threads (``Limits.read_threads``), never on the event loop; every
answer is bounded (rows per page, bytes per block, thumbnail size), and a client
that stops reading a block is dropped after ``Limits.send_timeout_s``.
Errors are JSON ``{"error": {"code": ..., "message": ...}}`` with the codes of
:data:`ERROR_CODES`; a traceback never leaves the server.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from mrecord.block import Block
from mrecord.errors import SlowClientError
from mrecord.serve.buffers import BufferPool
from mrecord.serve.protocol.errors import ERROR_CODES
from mrecord.serve.protocol.layout import LAYOUT, STORAGE, SWEEP
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import is_loopback
from mrecord.serve.protocol.wire import decode_request, encode_block
from mrecord.serve.server._deps import (
    ASGIApp,
    JSONResponse,
    Message,
    QueryParams,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    anyio,
    starlette,
)
from mrecord.serve.server.answers import (
    ApiError,
    check_answer_bytes,
    classify,
    plan_block,
    row_bytes,
)
from mrecord.serve.server.fairness import ClientShares
from mrecord.serve.server.gather import GATHER_EXTENSION, GatheredBody
from mrecord.serve.server.memory import BlockMemory, takes_hints
from mrecord.serve.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from mrecord.serve.server.metrics import Metrics
from mrecord.serve.server.registry import ServedDataset, parse_field_value
from mrecord.serve.server.security import host_ok, loopback_hosts, token_ok
from mrecord.serve.server.thumbs import ThumbnailCache, thumbnail_png
from mrecord.serve.server.values import iter_json_rows
from mrecord.storage.allocator import return_freed_blocks

__all__ = ["BLOCK_MEDIA_TYPE", "ERROR_CODES", "ApiError", "Limits", "create_app"]

_log = logging.getLogger("mrecord.serve")
T = TypeVar("T")

BLOCK_MEDIA_TYPE = "application/x-mrecord-block"

_HINT_THREADS = 2
"""Threads taking read-ahead hints (``will_need`` starts the reads; it does not wait)."""

_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("mrecord_client", default=None)
"""The address of the client whose request this task answers (set by ``_Guard``): whose
share (``fairness.py``) a read is taken from."""


def _error_response(
    code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    # The header names the code for the metrics (errors by code) without parsing a body.
    return starlette.responses.JSONResponse(
        {"error": {"code": code, "message": message}},
        status_code=ERROR_CODES[code],
        headers={**(headers or {}), _ERROR_HEADER: code},
    )


_ERROR_HEADER = "x-mrecord-error"


# -- the application --------------------------------------------------------------------------


def create_app(
    datasets: dict[str, ServedDataset],
    *,
    token: str | None = None,
    limits: Limits | None = None,
    allowed_hosts: Iterable[str] | None = None,
    local_socket: str | None = None,
    bound_host: str | None = None,
    metrics: Metrics | None = None,
) -> ASGIApp:
    """The Starlette app serving ``datasets`` (already opened; the app does not close them).

    ``token``: require ``Authorization: Bearer TOKEN`` on every ``/api/`` request.
    ``allowed_hosts``: accepted ``Host`` names; by default loopback names (and
    ``bound_host``, the address the server listens on, when it is a loopback one) only
    when there is no token (DNS-rebinding guard), any host when there is one.
    ``local_socket``: the same-host socket's path (:mod:`~mrecord.serve.server.local`),
    given in ``GET /api/datasets/{name}`` to clients on a loopback address.
    ``metrics``: where requests are counted (``GET /metrics``); the app's own by default,
    as its ``metrics`` attribute either way.

    ``GET /healthz`` answers ``ok`` to anyone (a load balancer's probe); ``GET /metrics``
    (Prometheus text format) needs the token, as ``/api/`` does.
    """
    metrics = metrics or Metrics()
    api = _Api(datasets, limits or Limits(), local_socket, metrics)
    Route = starlette.routing.Route
    routes = [
        Route("/", api.page, methods=["GET"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/metrics", api.metrics_text, methods=["GET"]),
        Route("/static/{file}", api.static, methods=["GET"]),
        Route("/api/datasets", api.list_datasets, methods=["GET"]),
        Route("/api/datasets/{name}", api.info, methods=["GET"]),
        Route("/api/datasets/{name}/rows", api.rows, methods=["GET"]),
        Route("/api/datasets/{name}/rows/{row_id}/{column}.png", api.thumbnail, methods=["GET"]),
        Route("/api/datasets/{name}/search", api.search, methods=["GET"]),
        Route("/api/datasets/{name}/stats", api.stats, methods=["GET"]),
        Route(f"/api/datasets/{{name}}/{LAYOUT}", api.layout, methods=["GET"]),
        Route(f"/api/datasets/{{name}}/{STORAGE}", api.storage, methods=["GET"]),
        Route(f"/api/datasets/{{name}}/{SWEEP}", api.sweep, methods=["GET"]),
        Route("/api/datasets/{name}/blocks", api.blocks, methods=["POST"]),
        Route("/api/datasets/{name}/hint", api.hint, methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 400)  # a starlette HTTPException (registered so)
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "bad_request")
        detail = getattr(exc, "detail", exc)
        return _error_response(code, f"{request.method} {request.url.path}: {detail}")

    app = starlette.applications.Starlette(
        routes=routes, exception_handlers={starlette.exceptions.HTTPException: http_error}
    )
    if allowed_hosts is None:
        hosts = None if token else loopback_hosts(bound_host)
    else:
        hosts = frozenset(h.lower() for h in allowed_hosts)
    return _Guard(app, token=token, hosts=hosts, metrics=metrics)


class _Guard:
    """ASGI middleware: Host check, bearer token on ``/api/``, security headers."""

    _HEADERS: ClassVar[list[tuple[bytes, bytes]]] = [
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (
            b"content-security-policy",
            b"default-src 'self'; img-src 'self' blob: data:; style-src 'self'; "
            b"script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
        ),
    ]

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        hosts: frozenset[str] | None,
        metrics: Metrics,
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = None
        if self.hosts is not None and not host_ok(headers.get("host"), self.hosts):
            refusal = _error_response(
                "forbidden_host",
                f"Host {headers.get('host')!r} is not served; use http://127.0.0.1:PORT/ "
                "(or start the server with --token to accept other host names)",
            )
        elif (
            self.token
            and (scope["path"].startswith("/api/") or scope["path"] == "/metrics")
            and not token_ok(headers.get("authorization"), self.token)
        ):
            refusal = _error_response(
                "unauthorized",
                "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'",
                headers={"www-authenticate": "Bearer"},
            )

        error_code: str | None = None

        async def send_with_headers(message: Message) -> None:
            nonlocal error_code
            if message["type"] == "http.response.start":
                message = dict(message)
                for name, value in message.get("headers", []):
                    if name == _ERROR_HEADER.encode():
                        error_code = value.decode("latin-1")
                message["headers"] = [*message.get("headers", []), *self._HEADERS]
            await send(message)

        client = scope.get("client")
        _CLIENT.set(client[0] if client else None)
        start, new = self.metrics.started(client[0] if client else None)
        if new and client:  # one structured line per client session (after idling)
            _log.info(
                "%s",
                json.dumps(
                    {"event": "client_session", "client": client[0], "path": scope["path"]}
                ),
            )
        try:
            if refusal is not None:
                await refusal(scope, receive, send_with_headers)
                return
            await self.app(scope, receive, send_with_headers)
        finally:
            self.metrics.finished(start, error_code)




def _answers(
    method: Callable[[_Api, Request], Awaitable[Response | _BuffersResponse]],
) -> Callable[[_Api, Request], Awaitable[Response | _BuffersResponse]]:
    """Turn any exception of an endpoint into its JSON error answer."""

    @functools.wraps(method)
    async def wrapper(self: _Api, request: Request) -> Response | _BuffersResponse:
        try:
            return await method(self, request)
        except Exception as exc:
            code, message = classify(exc, self.datasets.values())
            return _error_response(code, message)

    return wrapper


class _Api:
    """The endpoints; state shared by all requests (datasets, limits, thread limiter, cache)."""

    def __init__(
        self,
        datasets: dict[str, ServedDataset],
        limits: Limits,
        local_socket: str | None,
        metrics: Metrics,
    ) -> None:
        self.datasets = datasets
        self.metrics = metrics
        self.local_socket = local_socket
        self.limits = limits
        self.thumbs = ThumbnailCache(limits.thumb_cache_bytes)
        budgets = [ds.reader.memory_budget for ds in datasets.values()]
        known = [b for b in budgets if b is not None]
        budget = min(known) if known else None
        # Blocks in flight, and the idle buffers kept for the next ones, within the memory
        # the server started with (a server in a 300 MB group was OOM-killed without); the
        # freed blocks go back to the kernel under a small budget (storage/allocator.py).
        return_freed_blocks()
        self.memory = BlockMemory.for_budget(budget)
        self.takes_hints = takes_hints(budget)
        keep_bytes = None if self.memory.capacity is None else self.memory.capacity // 2
        self.buffers = BufferPool(keep=limits.read_threads + 2, keep_bytes=keep_bytes)
        self._limiter: anyio.CapacityLimiter | None = None
        self._hint_limiter: anyio.CapacityLimiter | None = None
        self.shares = ClientShares(limits.client_share(), limits.client_max_requests)
        self._static = _load_static()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work on one of ``read_threads`` worker threads, once the client
        holds one of its own slots (``fairness.py``: one client cannot take them all)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.limits.read_threads)
        async with self.shares.slot(_CLIENT.get()):
            result: T = await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        return result

    def _dataset(self, request: Request) -> ServedDataset:
        name = request.path_params["name"]
        ds = self.datasets.get(name)
        if ds is None:
            raise ApiError(
                "unknown_dataset",
                f"no dataset named {name!r}; GET /api/datasets lists {sorted(self.datasets)!r}",
            )
        return ds

    # -- the page ------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        return self._static_response("index.html")

    # -- operations ----------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return starlette.responses.PlainTextResponse("ok")

    async def metrics_text(self, request: Request) -> Response:
        return starlette.responses.Response(
            self.metrics.render(), media_type=METRICS_CONTENT_TYPE
        )

    @_answers
    async def static(self, request: Request) -> Response:
        return self._static_response(request.path_params["file"])

    def _static_response(self, name: str) -> Response:
        if name not in self._static:
            raise ApiError("not_found", f"no static file {name!r}")
        body, media = self._static[name]
        return starlette.responses.Response(
            body, media_type=media, headers={"cache-control": "no-cache"}
        )

    # -- JSON API ------------------------------------------------------------------------------

    @_answers
    async def list_datasets(self, request: Request) -> Response:
        return starlette.responses.JSONResponse(
            {"datasets": [ds.summary() for ds in self.datasets.values()]}
        )

    @_answers
    async def info(self, request: Request) -> Response:
        ds = self._dataset(request)
        # ?verify=1 (the web page): also check every page, in the background
        start_verify = request.query_params.get("verify") == "1"
        info = dict(await self._run(ds.info, start_verify))
        info["limits"] = asdict(self.limits)
        client = request.client
        if self.local_socket and client is not None and is_loopback(client.host):
            info["local_socket"] = self.local_socket  # same-host readers only
        return starlette.responses.JSONResponse(_finite(info))

    @_answers
    async def stats(self, request: Request) -> Response:
        ds = self._dataset(request)
        return starlette.responses.JSONResponse(_finite(await self._run(ds.stats)))

    @_answers
    async def layout(self, request: Request) -> Response:
        ds = self._dataset(request)
        return starlette.responses.JSONResponse(await self._run(ds.layout))

    @_answers
    async def storage(self, request: Request) -> Response:
        ds = self._dataset(request)
        return starlette.responses.JSONResponse(_finite(await self._run(ds.storage)))

    @_answers
    async def sweep(self, request: Request) -> Response:
        """Rows per window in which a reader holding ``budget`` bytes reads a random order
        of ``rows`` rows of ``columns`` fastest, asking for each window's rows in
        ascending order (``serve/protocol/layout.py``); 0: as they come."""
        ds = self._dataset(request)
        q = request.query_params
        columns = _columns_param(q, ds)
        rows = _int_param(q, "rows", ds.reader.num_rows, low=0)
        budget = _int_param(q, "budget", 0, low=0)
        return starlette.responses.JSONResponse(
            {"window": await self._run(ds.sweep_window, columns, rows, budget)}
        )

    @_answers
    async def rows(self, request: Request) -> Response:
        ds = self._dataset(request)
        q = request.query_params
        n = ds.reader.num_rows
        start = _int_param(q, "start", 0, low=0)
        stop = _int_param(q, "stop", start + 50, low=0)
        columns = _columns_param(q, ds)
        summary = _view_param(q)
        per_row = sum(row_bytes(ds, c) for c in columns) * (1 if summary else 2) + 1
        cap = max(1, min(self.limits.max_page_rows, int(self.limits.max_page_bytes // per_row)))
        stop = min(stop, start + cap, n)
        ids = np.arange(start, max(start, stop), dtype=np.int64)

        def read() -> list[dict[str, Any]]:
            block = ds.reader.read_rows(ids, columns=columns)
            return _json_rows(block, summary, self.limits.max_page_bytes)

        rows = await self._run(read)
        return starlette.responses.JSONResponse(
            {
                "dataset": ds.name,
                "start": start,
                "stop": start + len(rows),
                "total": n,
                "columns": columns,
                "rows": rows,
            }
        )

    @_answers
    async def search(self, request: Request) -> Response:
        ds = self._dataset(request)
        q = request.query_params
        field = q.get("field")
        if field not in ds.index_fields:
            raise ApiError(
                "bad_request",
                f"field must be one of the indexed fields {ds.index_fields!r}, got {field!r}",
            )
        categories = await self._run(ds.categories, field)
        value = q.get("value")
        if value is None:
            return starlette.responses.JSONResponse(_finite(categories))
        page = _int_param(q, "page", 0, low=0)
        num_row = _int_param(q, "num_row", 20, low=1)
        num_row = min(num_row, self.limits.max_search_rows)
        columns = _columns_param(q, ds)
        summary = _view_param(q)

        def find() -> dict[str, Any]:
            ids = ds.search_ids(field, value, page, num_row)
            block = ds.reader.read_rows(ids, columns=columns)
            wanted = parse_field_value(ds.reader.schema[field], value)
            if isinstance(wanted, bytes):
                wanted = wanted.hex()  # categories list bytes values as hex
            total = next((c["count"] for c in categories["categories"] if c["name"] == wanted), 0)
            return {
                "dataset": ds.name,
                "field": field,
                "value": value,
                "page": page,
                "num_row": num_row,
                "total": total,
                "columns": columns,
                "rows": _json_rows(block, summary, self.limits.max_page_bytes),
            }

        return starlette.responses.JSONResponse(await self._run(find))

    @_answers
    async def thumbnail(self, request: Request) -> Response:
        ds = self._dataset(request)
        row_id = _parse_row_id(request.path_params["row_id"], ds.reader.num_rows)
        column = request.path_params["column"]
        if column not in ds.reader.schema:
            raise ApiError("unknown_column", f"{ds.name!r} has no column {column!r}")
        size = _int_param(request.query_params, "size", 128, low=8)
        size = min(size, self.limits.thumb_max_side)
        key = (ds.name, row_id, column, size)
        png = self.thumbs.get(key)
        if png is None:

            def make() -> bytes:
                values = ds.reader.read_rows([row_id], columns=[column]).columns[column]
                return thumbnail_png(values[0], size)

            png = await self._run(make)
            self.thumbs.put(key, png)
        return starlette.responses.Response(
            png, media_type="image/png", headers={"cache-control": "private, max-age=600"}
        )

    # -- the read path for programs ------------------------------------------------------------

    @_answers
    async def blocks(self, request: Request) -> _BuffersResponse:
        ds = self._dataset(request)
        body = await _read_body(request, self.limits.max_body_bytes, self.limits.body_timeout_s)
        ids, columns = decode_request(body, self.limits.max_block_rows)
        plan = plan_block(ds, ids, columns, self.limits)

        # A connection that writes many buffers at once gets big values as they lie in
        # the map (gather.py); others get them copied into one buffer.
        gather = GATHER_EXTENSION in request.scope.get("extensions", {})

        def read() -> list[bytes | memoryview]:
            block = ds.reader.read_rows(ids, columns=plan.columns, bytes_as_arrays=True)
            check_answer_bytes(block.columns, len(ids), self.limits)  # before any copy
            return encode_block(
                block.columns, plan.kinds, len(ids), self.buffers.take, gather=gather
            )

        # The values read and their encoded copy, held until the answer is sent.
        expected = plan.fixed_bytes + len(ids) * sum(
            ds.value_bytes_per_row(c) for c in plan.columns if plan.kinds[c][0] != "fixed"
        )
        held = await self.memory.acquire(2 * int(expected))
        try:
            buffers = await self._run(read)
        except BaseException:
            await self.memory.release(held)
            raise
        self.metrics.served(ds.name, len(ids), sum(memoryview(b).nbytes for b in buffers))
        return _BuffersResponse(
            buffers, self.limits.send_timeout_s, functools.partial(self.memory.release, held)
        )

    @_answers
    async def hint(self, request: Request) -> Response:
        """Rows a client will ask for soon (its order is a pure function, so it knows):
        the storage read-ahead starts reading exactly their bytes now
        (``DatasetReader.will_need``), so reads beyond RAM overlap the network. Answered
        at once (202); the hint is taken afterwards on a thread of its own, never one of
        the ``read_threads``, and never changes what a read returns. A server with less
        than 1 GiB of memory to fill answers and does not take hints (``memory.py``)."""
        ds = self._dataset(request)
        body = await _read_body(request, self.limits.max_body_bytes, self.limits.body_timeout_s)
        ids, columns = decode_request(body, self.limits.max_block_rows)
        plan = plan_block(ds, ids, columns, self.limits)  # the same checks as a read's
        self.metrics.hinted(ds.name, len(ids))
        if not self.takes_hints:  # a small memory budget: hints cost more than they gain
            return Response(status_code=202)

        async def take() -> None:
            if self._hint_limiter is None:
                self._hint_limiter = anyio.CapacityLimiter(_HINT_THREADS)
            try:
                await anyio.to_thread.run_sync(
                    ds.reader.will_need, ids, plan.columns, limiter=self._hint_limiter
                )
            except Exception as exc:  # a hint is advice: a failed one costs only speed
                _log.debug("a read-ahead hint failed: %s", exc)

        return Response(status_code=202, background=starlette.background.BackgroundTask(take))


class _BuffersResponse:
    """Send a list of buffers as one body, in slices, dropping a client that stops reading."""

    _SLICE = 1 << 20
    """Bytes per body message: each costs tens of microseconds of Python on the event loop."""

    def __init__(
        self,
        buffers: list[bytes | memoryview],
        timeout: float,
        done: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.buffers = [memoryview(b).cast("B") for b in buffers]
        self.timeout = timeout
        self.done = done  # called once the body is sent, or the sending failed

    def _gathered(self) -> Iterator[GatheredBody]:
        """The body in messages of about ``_SLICE`` bytes, each a list of buffers (cut
        where one is bigger) that the connection writes as they are: nothing joined."""
        group: list[memoryview] = []
        size = 0
        for buf in self.buffers:
            for lo in range(0, len(buf), self._SLICE):
                piece = buf[lo : lo + self._SLICE]
                group.append(piece)
                size += len(piece)
                if size >= self._SLICE:
                    yield GatheredBody(group)
                    group, size = [], 0
        if group:
            yield GatheredBody(group)

    def _slices(self) -> Iterator[bytes | memoryview]:
        """The body in messages of about ``_SLICE`` bytes: big buffers cut, small ones (the
        header, offsets, small columns) joined."""
        small: list[memoryview] = []
        for buf in self.buffers:
            if len(buf) < self._SLICE // 16:
                small.append(buf)
                continue
            if small:
                yield b"".join(small)
                small = []
            for lo in range(0, len(buf), self._SLICE):
                yield buf[lo : lo + self._SLICE]
        if small:
            yield b"".join(small)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._send(send, GATHER_EXTENSION in scope.get("extensions", {}))
        finally:
            self.buffers = []
            if self.done is not None:
                await self.done()

    async def _send(self, send: Send, gather: bool) -> None:
        total = sum(len(b) for b in self.buffers)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", BLOCK_MEDIA_TYPE.encode()),
                    (b"content-length", str(total).encode()),
                ],
            }
        )
        # One cancel scope whose deadline moves on with every message sent (cheaper than
        # a scope per message): only a client that reads nothing for `timeout` is dropped.
        with anyio.CancelScope() as cancel:
            for piece in self._gathered() if gather else self._slices():
                cancel.deadline = anyio.current_time() + self.timeout
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        if cancel.cancelled_caught:
            _log.warning("dropped a client that read nothing for %.0f s", self.timeout)
            raise SlowClientError(f"the client read nothing for {self.timeout:.0f} s")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


# -- request parsing ------------------------------------------------------------------------------


_INTEGER = re.compile(r"-?[0-9]{1,18}")
"""An integer parameter: ASCII digits only (``str.isdigit`` also admits ``"²"``, which
``int`` refuses), one optional sign, and short enough to fit an int64."""


def _parse_int(raw: str) -> int | None:
    """``raw`` as an int, or None when it is not a plain ASCII decimal integer."""
    return int(raw) if _INTEGER.fullmatch(raw) else None


def _int_param(q: QueryParams, name: str, default: int, *, low: int) -> int:
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    value = _parse_int(raw)
    if value is None:
        raise ApiError("bad_request", f"{name} must be an integer, got {raw[:40]!r}")
    if value < low:
        raise ApiError("bad_request", f"{name} must be >= {low}, got {value}")
    return value


def _parse_row_id(raw: str, n: int) -> int:
    row_id = _parse_int(raw)
    if row_id is None or row_id < 0:
        raise ApiError("bad_ids", f"row id must be a non-negative integer, got {raw[:40]!r}")
    if row_id >= n:
        raise ApiError("bad_ids", f"row id {row_id} is out of range: the dataset has {n} rows")
    return row_id


def _columns_param(q: QueryParams, ds: ServedDataset) -> list[str]:
    raw = q.get("columns")
    if not raw:
        return ds.reader.column_names
    names = [c.strip() for c in raw.split(",") if c.strip()]
    unknown = [c for c in names if c not in ds.reader.schema]
    if unknown:
        raise ApiError(
            "unknown_column",
            f"{ds.name!r} has no column(s) {unknown!r}; it has {ds.reader.schema.names!r}",
        )
    return list(dict.fromkeys(names))


def _view_param(q: QueryParams) -> bool:
    view = q.get("view", "full")
    if view not in ("full", "summary"):
        raise ApiError("bad_request", f"view must be 'full' or 'summary', got {view[:40]!r}")
    return bool(view == "summary")


async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    declared = request.headers.get("content-length")
    size = None if declared is None else _parse_int(declared)
    if declared is not None and (size is None or size < 0 or size > limit):
        raise ApiError("too_large", f"request body of {declared} bytes; at most {limit}")
    body = bytearray()
    try:
        with anyio.fail_after(timeout):  # a client trickling its body cannot hold a slot
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise ApiError("too_large", f"request body over {limit} bytes")
    except TimeoutError:
        raise ApiError(
            "request_timeout", f"the request body did not arrive within {timeout:.0f} s"
        ) from None
    return bytes(body)


_ENVELOPE_BYTES = 4096
"""Room kept in a JSON page for what surrounds its rows (names, counts, columns)."""


def _json_rows(block: Block, summary: bool, limit: int) -> list[dict[str, Any]]:
    """The rows of ``block`` as JSON values, as many from the first as fit ``limit`` bytes
    of JSON (counted as Starlette writes it); ApiError when not even the first fits."""
    budget = limit - _ENVELOPE_BYTES
    rows: list[dict[str, Any]] = []
    for row in iter_json_rows(block, summary=summary):
        size = len(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()) + 1
        if size > budget:
            if rows:
                break
            raise ApiError(
                "too_large",
                f"row {row['id']} is {size:,} bytes of JSON, more than {limit:,} per page; "
                "ask for fewer columns, or view=summary",
            )
        budget -= size
        rows.append(row)
    return rows


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


_MEDIA = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def _load_static() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once: only these names can ever be served."""
    folder = resources.files("mrecord.serve") / "static"
    out = {}
    for entry in folder.iterdir():
        suffix = Path(entry.name).suffix
        if suffix in _MEDIA:
            out[entry.name] = (entry.read_bytes(), _MEDIA[suffix])
    return out
