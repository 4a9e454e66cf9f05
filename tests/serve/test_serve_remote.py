"""RemoteDataset against a real uvicorn server on 127.0.0.1: the same rows, in the same order,
as MindDataset on the files; plus what only a real server shows (raw paths, dropped clients,
a server that goes away, a small load)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from harness.loadtest import run_load
from mrecord import (
    DistributedSampler,
    FileWriter,
    MindDataset,
    PKSampler,
    RandomSampler,
    Shuffle,
    SubsetRandomSampler,
    config,
)
from mrecord.errors import (
    AuthenticationError,
    DatasetNotFoundError,
    DatasetServerError,
    SchemaError,
)
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 301


@pytest.fixture(scope="module")
def mixed(make_dataset: MakeDataset) -> Path:
    """Every kind of column (fixed, bytes, string, variable-shape), 3 shards, small pages."""
    return make_dataset(ROWS, index_label=True)


@pytest.fixture(scope="module")
def server(mixed: Path) -> Iterator[ServerThread]:
    with ServerThread({"mixed": mixed}) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _seed() -> Iterator[None]:
    old = config.get_seed()
    config.set_seed(1234)
    yield
    config.set_seed(old)


def _rows(ds: Any, epochs: int = 2) -> list[tuple[Any, ...]]:
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [tuple(row) for _ in range(epochs) for row in it]  # one pass is one epoch


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        for va, vb in zip(ra, rb, strict=True):
            # Same kind of value: both arrays of one dtype and shape, or both the same type
            # (an int where MindDataset gives an np.int64 is a difference a user sees).
            if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
                assert isinstance(va, np.ndarray) and isinstance(vb, np.ndarray), (va, vb)
                assert (va.dtype, va.shape) == (vb.dtype, vb.shape)
            else:
                assert type(va) is type(vb), (va, vb)
            np.testing.assert_array_equal(np.asarray(va), np.asarray(vb))


MODES = [None, False, True, Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.FILES, Shuffle.INFILE]
TRANSPORTS = ["http", "local"] if local_protocol.available() else ["http"]
"""Both block transports where the same-host one exists (ServerThread offers it there,
and ``auto`` would never exercise HTTP on one machine)."""


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shuffle", MODES, ids=repr)
@pytest.mark.parametrize("shard", [None, (3, 0), (3, 2), (4, 1)], ids=repr)
def test_remote_reads_what_mind_dataset_reads(
    server: ServerThread, mixed: Path, shuffle: Any, shard: tuple[int, int] | None, transport: str
) -> None:
    kwargs: dict[str, Any] = {"shuffle": shuffle}
    if shard is not None:
        kwargs.update(num_shards=shard[0], shard_id=shard[1])
    if shuffle is Shuffle.PARTIAL:
        kwargs["partial_window"] = 50
    local = MindDataset(mixed, **kwargs)
    remote = mrecord.RemoteDataset(server.url, "mixed", transport=transport, **kwargs)
    assert remote.get_dataset_size() == local.get_dataset_size()
    want, got = _rows(local), _rows(remote)
    _same(want, got)
    assert remote.transport == transport
    at = remote.get_col_names().index("id")  # columns sorted by name, as MindDataset's
    ids = [int(r[at]) for r in got]
    if shard is None and shuffle is not False:
        assert sorted(ids[:ROWS]) == list(range(ROWS))  # each epoch a permutation


@pytest.mark.parametrize(
    "make",
    [
        lambda: DistributedSampler(3, 1, shuffle=True),
        lambda: RandomSampler(num_samples=40),
        lambda: SubsetRandomSampler([5, 9, 300, 0, 17]),
        lambda: PKSampler(3, shuffle=True),
    ],
    ids=["distributed", "random", "subset_random", "pk"],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_samplers_match_mind_dataset(
    server: ServerThread, mixed: Path, make: Any, transport: str
) -> None:
    remote = mrecord.RemoteDataset(server.url, "mixed", sampler=make(), transport=transport)
    _same(_rows(MindDataset(mixed, sampler=make())), _rows(remote))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_num_samples_columns_list_and_batches(
    server: ServerThread, mixed: Path, transport: str
) -> None:
    cols = ["text", "vec", "id"]
    local = MindDataset(mixed, columns_list=cols, shuffle=True, num_samples=77).batch(10)
    remote = mrecord.RemoteDataset(
        server.url, "mixed", columns_list=cols, shuffle=True, num_samples=77, transport=transport
    ).batch(10)
    a = [b[2] for b in local.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    b = [b[2] for b in remote.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert len(a) == len(b) == 8
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_argument_errors_are_mind_datasets(server: ServerThread) -> None:
    with pytest.raises(SchemaError, match="nope"):
        mrecord.RemoteDataset(server.url, "mixed", columns_list=["nope"])
    with pytest.raises(ValueError, match="shard_id"):
        mrecord.RemoteDataset(server.url, "mixed", num_shards=2, shard_id=2)
    with pytest.raises(RuntimeError, match="sampler and shuffle"):
        mrecord.RemoteDataset(server.url, "mixed", shuffle=True, sampler=RandomSampler())
    with pytest.raises(DatasetNotFoundError, match="unknown_dataset"):
        mrecord.RemoteDataset(server.url, "missing")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_token_is_sent_and_checked(mixed: Path, transport: str) -> None:
    with ServerThread({"mixed": mixed}, token="s3cret") as srv:
        with pytest.raises(AuthenticationError, match="token"):
            mrecord.RemoteDataset(srv.url, "mixed", transport=transport)
        with pytest.raises(AuthenticationError):
            mrecord.RemoteDataset(srv.url, "mixed", token="wrong", transport=transport)
        ds = mrecord.RemoteDataset(
            srv.url, "mixed", token="s3cret", columns_list=["id"], transport=transport
        )
        assert ds.transport == transport
        assert [int(r[0]) for r in _rows(ds, 1)] == [
            int(r[0]) for r in _rows(MindDataset(mixed, columns_list=["id"]), 1)
        ]


@pytest.mark.parametrize("transport", ["http", "auto"])
def test_a_server_that_goes_away_gives_a_clear_error(mixed: Path, transport: str) -> None:
    """With ``auto`` the same-host socket goes too: the client falls back to HTTP, which
    is gone as well."""
    srv = ServerThread({"mixed": mixed}).start()
    ds = mrecord.RemoteDataset(srv.url, "mixed", shuffle=False, retries=1, transport=transport)
    assert len(_rows(ds, 1)) == ROWS
    srv.stop()
    with pytest.raises(DatasetServerError, match="did not answer"):
        _rows(ds, 1)
    with pytest.raises(DatasetServerError, match="mrecord serve"):
        mrecord.RemoteDataset(srv.url, "mixed", retries=0)


def _raw_get(port: int, target: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "target",
    [
        "/api/datasets/../../../../etc/passwd",
        "/api/datasets/mixed/../../../etc/passwd",
        "/static/../app.py",
        "/static/../../../../etc/passwd",
        "/static/%2e%2e/app.py",
        "/api/datasets/%2Fetc%2Fpasswd/stats",
        "//etc/passwd",
    ],
)
def test_raw_traversal_paths_never_reach_a_file(server: ServerThread, target: str) -> None:
    answer = _raw_get(server.port, target)
    status = int(answer.split(b" ", 2)[1])
    assert status in (400, 404), answer[:200]
    assert b"root:" not in answer and b"import " not in answer


def test_a_client_that_stops_reading_is_dropped(tmp_path: Path) -> None:
    rows = 400
    path = tmp_path / "big.mrecord"
    with FileWriter(path, overwrite=True) as writer:
        writer.add_schema({"x": {"type": "uint8", "shape": [100, 100]}})
        writer.write_raw_data({"x": np.zeros((rows, 100, 100), dtype=np.uint8)})
    limits = Limits(send_timeout_s=0.5)
    with ServerThread({"big": path}, limits=limits) as srv:
        from mrecord.serve.protocol.wire import encode_request

        body = encode_request(np.arange(rows), None)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        sock.sendall(
            b"POST /api/datasets/big/blocks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(3)  # read nothing: the server gives up on us after send_timeout_s
        sock.settimeout(20)
        received = 0
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
        sock.close()
        assert received < rows * 100 * 100  # cut short, and the connection closed
        # the server still answers others
        ds = mrecord.RemoteDataset(srv.url, "big", num_samples=3, shuffle=False, transport="http")
        assert len(_rows(ds, 1)) == 3


def test_small_load_has_no_errors(server: ServerThread) -> None:
    result = run_load(server.url, "mixed", clients=4, requests=15, num_rows=ROWS)
    assert result.errors == []
    assert len(result.latencies) == 60 and result.rows == 60 * 64


def test_import_mrecord_loads_no_server_or_http_package() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mrecord; mrecord.RemoteDataset; "
        "bad = [m for m in ('starlette', 'uvicorn', 'httpx', 'anyio', 'mrecord.serve.server.app') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_core_package_imports_serve() -> None:
    import mrecord as pkg

    root = Path(pkg.__file__).parent
    for layer in ("format", "storage", "reader", "writer", "sampling", "pipeline"):
        for source in (root / layer).rglob("*.py"):
            text = source.read_text()
            assert "mrecord.serve" not in text and "from mrecord import serve" not in text, source


def test_a_client_that_trickles_its_body_gets_408(mixed: Path) -> None:
    with ServerThread({"mixed": mixed}, limits=Limits(body_timeout_s=0.5)) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=20) as sock:
            sock.sendall(
                b"POST /api/datasets/mixed/blocks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Length: 100\r\n\r\n0123456789"
            )
            answer = b""
            while b"}}" not in answer and (chunk := sock.recv(65536)):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408")
        assert b'"request_timeout"' in answer


def test_the_serve_command_serves_until_stopped(mixed: Path) -> None:
    import json
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "mrecord.cli.main", "serve", f"m={mixed}", "--port", str(port)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/datasets") as answer:
                    body = json.load(answer)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
        else:
            raise AssertionError("mrecord serve did not answer")
        assert [d["name"] for d in body["datasets"]] == ["m"]
        assert body["datasets"][0]["rows"] == ROWS
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"serving m on http://127.0.0.1:{port}/" in err


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_concat_use_sampler_reads_the_same_ranges(
    server: ServerThread, mixed: Path, transport: str
) -> None:
    from mrecord import ConcatDataset

    def build(make: Any) -> Any:
        ds = ConcatDataset([make(shuffle=True), make(shuffle=False, columns_list=None)])
        ds.use_sampler(DistributedSampler(3, 1, shuffle=False))
        return ds

    local = build(lambda **kw: MindDataset(mixed, **kw))
    remote = build(
        lambda **kw: mrecord.RemoteDataset(server.url, "mixed", transport=transport, **kw)
    )
    _same(_rows(local, 1), _rows(remote, 1))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_big_values_stay_right_while_buffers_are_reused(tmp_path: Path, transport: str) -> None:
    """Images (big bytes values) go through reused buffers on both sides; values kept by the
    caller must never change when later blocks reuse memory, and dropped ones free it.
    Through the same-host socket each kept value pins its shared segment, so the client
    makes more segments than the server maps for one connection at once."""
    rng = np.random.default_rng(11)
    path = tmp_path / "imgs.mrecord"
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.write_raw_data(
            {
                "image": [rng.bytes(int(n)) for n in rng.integers(20 << 10, 40 << 10, 90)],
                "label": np.arange(90, dtype=np.int32),
            }
        )
    files = Path(str(path) + "0")
    with ServerThread({"imgs": files}, limits=Limits(max_block_rows=8)) as srv:
        remote = mrecord.RemoteDataset(
            srv.url, "imgs", shuffle=Shuffle.GLOBAL, num_parallel_workers=2, transport=transport
        )
        local = MindDataset(files, shuffle=Shuffle.GLOBAL)
        kept: list[tuple[np.ndarray, bytes]] = []
        remote_it = remote.create_tuple_iterator(num_epochs=3, output_numpy=True)
        local_it = local.create_tuple_iterator(num_epochs=3, output_numpy=True)
        for _epoch in range(3):  # one pass over an iterator is one epoch
            for i, (got, want) in enumerate(zip(remote_it, local_it, strict=True)):
                assert bytes(got[0]) == bytes(want[0]) and int(got[1]) == int(want[1])
                if i % 5 == 0:
                    kept.append((got[0], bytes(want[0])))
        assert len(kept) == 54
        assert all(bytes(value) == expected for value, expected in kept)
        assert remote.transport == transport
        remote.close()


def _one_answer_server(answer: list[bytes], pause: float) -> tuple[int, Any]:
    """A server on a free port that reads one request and writes ``answer``'s pieces with
    ``pause`` seconds between them, then closes (a slow or dying ``mrecord serve``)."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1 << 16)
            for piece in answer:
                conn.sendall(piece)
                time.sleep(pause)
            # End with a FIN, and read what is left of the request: closing with unread
            # bytes would send a reset, which the client may see before the short body.
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(2)
            with contextlib.suppress(OSError):
                while conn.recv(1 << 16):
                    pass
        listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def _block_answer(rows: int) -> tuple[bytes, bytes, list[bytes]]:
    from mrecord.serve.protocol.wire import encode_block

    values = [bytes([i]) * (40 << 10) for i in range(rows)]
    kinds: dict[str, tuple[str, str, list[int]]] = {"image": ("bytes", "|u1", [])}
    body = b"".join(bytes(memoryview(b)) for b in encode_block({"image": values}, kinds, rows))
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: application/x-mrecord-block\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body, values


def _http_only(url: str) -> Any:
    """The transport a RemoteDataset reads through, over HTTP only, without retries."""
    from mrecord.serve.client.session import Session
    from mrecord.serve.client.transports.auto import AutoTransport
    from mrecord.serve.client.transports.http import HttpTransport

    session = Session()
    http = HttpTransport(
        url, "x", token=None, timeout=10.0, connections=1, buffers=session.receive_buffers
    )
    return AutoTransport(http, retries=0, session=session)


def test_a_body_that_arrives_in_pieces_is_received_whole() -> None:
    head, body, values = _block_answer(40)
    # headers with the first bytes of the body, then the rest in uneven pieces
    pieces = [head + body[:1000], body[1000:70_000], body[70_000:1_000_001], body[1_000_001:]]
    port, thread = _one_answer_server(pieces, 0.05)
    client = _http_only(f"http://127.0.0.1:{port}")
    _rows, columns = client.read(np.arange(40), ["image"])
    assert [bytes(v) for v in columns["image"]] == values
    client.close()
    thread.join(10)


def test_a_server_that_dies_mid_body_gives_a_clear_error() -> None:
    head, body, _values = _block_answer(40)
    port, thread = _one_answer_server([head + body[: len(body) // 2]], 0.0)
    client = _http_only(f"http://127.0.0.1:{port}")
    with pytest.raises(DatasetServerError, match="IncompleteRead"):
        client.read(np.arange(40), ["image"])
    thread.join(10)
