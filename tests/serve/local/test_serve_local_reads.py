"""The same-host transport reads what HTTP and ``MindDataset`` read, and how it is chosen.

``RemoteDataset(transport="local")`` must read exactly what ``transport="http"`` and
``MindDataset`` read (every value, every order); ``auto`` takes the socket on this machine
only; bad transports and bad requests are the same errors through both. What each answer
must hold is read from the files, never from the server's code.
"""


from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrecord
from mrecord import MindDataset, Shuffle
from mrecord.errors import (
    ArgumentError,
    AuthenticationError,
    DatasetServerError,
    SchemaError,
)
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.server.registry import open_datasets
from mrecord.serve.server.run import ServerThread
from tests.serve.local.helpers import (
    COLUMNS,
    ROWS,
    TRANSPORTS,
    _block,
    _plain,
    _remote,
    _rows,
)

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)


# -- the same rows as MindDataset, through either transport ----------------------------------------

MODES = [Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.FILES, Shuffle.INFILE, Shuffle.ADAPTIVE, False]
ORDER_ARGS = {"partial_window": 40, "adaptive_threshold": 100}
"""A window smaller than the dataset, and ADAPTIVE above its threshold (so PARTIAL)."""


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shuffle", MODES, ids=repr)
@pytest.mark.parametrize("shard", [None, 0, 1, 2], ids=lambda s: f"shard{s}")
def test_both_transports_read_what_mind_dataset_reads(
    server: ServerThread, mixed: Path, transport: str, shuffle: Any, shard: int | None
) -> None:
    kwargs: dict[str, Any] = {"shuffle": shuffle, **ORDER_ARGS}
    if shard is not None:
        kwargs.update(num_shards=3, shard_id=shard)
    want = _rows(MindDataset(mixed, **kwargs))
    remote = _remote(server, transport, **kwargs)
    got = _rows(remote)
    assert got == want
    assert remote.transport == transport  # never fell back on the way
    ids = [row[COLUMNS.index("id")][2] for row in got]
    assert len(ids) == 2 * (ROWS if shard is None else ROWS // 3)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("shuffle", "num_samples"), [(Shuffle.GLOBAL, 150), (Shuffle.INFILE, None), (False, 150)]
)
def test_a_column_subset_in_its_order(
    server: ServerThread, mixed: Path, transport: str, shuffle: Any, num_samples: int | None
) -> None:
    cols = ["text", "points", "id", "blob"]
    kwargs: dict[str, Any] = {"columns_list": cols, "shuffle": shuffle, "num_samples": num_samples}
    remote = _remote(server, transport, **kwargs)
    assert remote.get_col_names() == cols
    assert _rows(remote) == _rows(MindDataset(mixed, **kwargs))


@given(
    name=st.sampled_from(["mixed", "packed"]),
    ids=st.lists(st.integers(0, ROWS - 1), max_size=80),
    columns=st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6, unique=True),
)
def test_read_rows_is_the_files_through_both_transports(
    pairs: dict[str, tuple[mrecord.RemoteDataset, ...]],
    truth: dict[str, list[Any]],
    name: str,
    ids: list[int],
    columns: list[str],
) -> None:
    """Values shared in place (``mixed``'s bytes) and copied (``packed``'s compressed
    bytes, and every other kind) are the files' values, whichever transport."""
    want = {c: [_plain(truth[c][i]) for i in ids] for c in columns}
    local, http = pairs[name]
    assert _block(local.read_rows(ids, columns), columns) == want
    assert _block(http.read_rows(ids, columns), columns) == want
    assert local.transport == "local"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shard", [None, 1], ids=lambda s: f"shard{s}")
def test_compressed_values_read_what_mind_dataset_reads(
    server: ServerThread, packed: Path, transport: str, shard: int | None
) -> None:
    kwargs: dict[str, Any] = {"shuffle": Shuffle.GLOBAL}
    if shard is not None:
        kwargs.update(num_shards=3, shard_id=shard)
    remote = _remote(server, transport, name="packed", **kwargs)
    assert _rows(remote) == _rows(MindDataset(packed, **kwargs))


@pytest.mark.parametrize("name", ["mixed", "packed"])
def test_values_are_writable_where_mind_datasets_are(
    server: ServerThread, mixed: Path, packed: Path, name: str
) -> None:
    """In-place edits (normalizing an array) work, or are refused, alike everywhere."""
    files = {"mixed": mixed, "packed": packed}[name]

    def flags(ds: Any) -> list[bool]:
        row = next(iter(ds.create_tuple_iterator(num_epochs=1, output_numpy=True)))
        return [bool(np.asarray(v).flags.writeable) for v in row]

    want = flags(MindDataset(files, shuffle=False))
    for transport in TRANSPORTS:
        assert flags(_remote(server, transport, name=name, shuffle=False)) == want


def test_threads_sharing_one_dataset_each_get_their_rows(
    server: ServerThread, truth: dict[str, list[Any]]
) -> None:
    """Eight threads calling read_rows on one RemoteDataset at once (a thread-pool
    loader): every answer is the rows that thread asked for, kept intact to the end."""
    from concurrent.futures import ThreadPoolExecutor

    ds = _remote(server, "local")
    columns = ["blob", "points", "text", "id"]

    def work(seed: int) -> list[tuple[list[int], Any]]:
        rng = np.random.default_rng(seed)
        asks = [rng.integers(0, ROWS, int(rng.integers(1, 120))).tolist() for _ in range(20)]
        return [(ids, ds.read_rows(ids, columns)) for ids in asks]

    with ThreadPoolExecutor(8) as pool:
        results = [r for part in pool.map(work, range(8)) for r in part]
    assert len(results) == 160
    for ids, block in results:
        assert _block(block, columns) == {c: [_plain(truth[c][i]) for i in ids] for c in columns}


# -- choosing the transport ------------------------------------------------------------------------


def test_auto_reads_through_the_socket_on_this_machine(server: ServerThread, mixed: Path) -> None:
    ds = mrecord.RemoteDataset(server.url, "mixed", shuffle=False)
    assert ds.transport == "local"
    assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=False), 1)
    assert mrecord.RemoteDataset(server.url, "mixed", transport="http").transport == "http"
    by_name = server.url.replace("127.0.0.1", "localhost")
    assert mrecord.RemoteDataset(by_name, "mixed").transport == "local"


def test_local_without_a_socket_says_why(mixed: Path) -> None:
    with ServerThread({"mixed": mixed}, local_socket=False) as srv:
        assert srv.local_socket_path is None
        with pytest.raises(DatasetServerError, match="offers no same-host socket"):
            mrecord.RemoteDataset(srv.url, "mixed", transport="local")
        auto = mrecord.RemoteDataset(srv.url, "mixed", shuffle=False)
        assert auto.transport == "http"
        assert _rows(auto, 1) == _rows(MindDataset(mixed, shuffle=False), 1)


def test_local_to_a_non_loopback_host_is_refused() -> None:
    """The socket is for this machine: a URL naming another host never uses it, even if
    an answer carried a socket path."""
    from mrecord.serve.client.session import Session
    from mrecord.serve.client.transports.auto import AutoTransport
    from mrecord.serve.client.transports.http import HttpTransport

    info = {"local_socket": "/tmp/x.sock", "files": [{"rows": 1}], "row_bytes": {}}
    session = Session()
    http = HttpTransport(
        "http://10.1.2.3:8750",
        "mixed",
        token=None,
        timeout=1.0,
        connections=1,
        buffers=session.receive_buffers,
    )
    client = AutoTransport(http, retries=0, session=session)
    with pytest.raises(DatasetServerError, match="not a loopback address"):
        client.choose("local", info, connections=1, timeout=1.0)
    client.choose("auto", info, connections=1, timeout=1.0)
    assert client.name == "http"


@pytest.mark.parametrize("bad", ["shm", "", "LOCAL", None])
def test_a_bad_transport_is_an_argument_error(server: ServerThread, bad: Any) -> None:
    with pytest.raises(ArgumentError, match="transport"):
        mrecord.RemoteDataset(server.url, "mixed", transport=bad)


def test_the_socket_is_advertised_to_loopback_clients_only(mixed: Path) -> None:
    from starlette.testclient import TestClient

    from mrecord.serve.server.app import create_app

    datasets = open_datasets({"mixed": mixed})
    try:
        app = create_app(datasets, local_socket="/run/x.sock")
        with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as c:
            assert c.get("/api/datasets/mixed").json()["local_socket"] == "/run/x.sock"
        with TestClient(app, base_url="http://127.0.0.1", client=("10.1.2.3", 5000)) as c:
            assert "local_socket" not in c.get("/api/datasets/mixed").json()
    finally:
        for ds in datasets.values():
            ds.close()


def test_the_token_goes_through_the_socket_too(mixed: Path) -> None:
    with ServerThread({"mixed": mixed}, token="s3cret") as srv:
        with pytest.raises(AuthenticationError):
            mrecord.RemoteDataset(srv.url, "mixed", transport="local", token="wrong")
        ds = mrecord.RemoteDataset(
            srv.url, "mixed", transport="local", token="s3cret", shuffle=False
        )
        assert ds.transport == "local"
        assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=False), 1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_bad_request_is_the_same_error_through_both_transports(
    server: ServerThread, transport: str
) -> None:
    ds = _remote(server, transport)
    with pytest.raises(ArgumentError, match=f"row id {ROWS} is out of range"):
        ds.read_rows([0, ROWS], ["id"])
    with pytest.raises(ArgumentError, match="out of range"):
        ds.read_rows([-1], ["id"])
    with pytest.raises(SchemaError, match="nope"):
        ds.read_rows([0], ["id", "nope"])
    with pytest.raises(ArgumentError, match="at most 65536"):
        ds.read_rows(np.zeros(65_537, dtype=np.int64), ["id"])
    assert [int(v) for v in ds.read_rows([9], ["id"]).columns["id"]] == [9]
    assert ds.transport == transport  # a caller's mistake is no reason to change transport


@pytest.mark.parametrize("transport", ["local", "auto"])
def test_too_many_ids_for_one_message_is_an_argument_error(
    server: ServerThread, transport: str
) -> None:
    ds = mrecord.RemoteDataset(server.url, "mixed", transport=transport)
    with pytest.raises(ArgumentError):
        ds.read_rows(np.zeros(600_000, dtype=np.int64), ["id"])
    assert ds.transport == "local"
