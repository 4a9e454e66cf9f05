"""The same-host transport of ``mrecord serve``: blocks written into the reader's shared memory.

``RemoteDataset(transport="local")`` must read exactly what ``transport="http"`` and
``MindDataset`` read (every value, every order); values a caller keeps must never change
when later blocks reuse the shared segments; a server that goes away must fall back to
HTTP (``auto``) or say so (``local``); and the Unix socket must refuse what a hostile
or broken peer sends (raw protocol tests, below) while it keeps serving everyone else.
What each answer must hold is read from the files, never from the server's code.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import gc
import hashlib
import logging
import mmap
import os
import shutil
import signal
import socket
import stat
import struct
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrecord
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle, config
from mrecord.errors import (
    ArgumentError,
    AuthenticationError,
    CorruptFileError,
    DatasetServerError,
    SchemaError,
)
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import MAX_MESSAGE_BYTES, VERSION, receive, send
from mrecord.serve.protocol.wire import decode_block_at
from mrecord.serve.server.local import MAX_SEGMENTS, LocalServer, default_socket_path
from mrecord.serve.server.registry import ServedDataset, open_datasets
from mrecord.serve.server.run import ServerThread, local_socket_path
from mrecord.testing.mixed import write_mixed

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)

ROWS = 240
COLUMNS = ["blob", "id", "label", "points", "text", "vec"]  # RemoteDataset's default: sorted
TRANSPORTS = ["local", "http"]
MB = 1 << 20


# -- datasets and servers --------------------------------------------------------------------------


def _write_mixed(path: Path, compress: bool = False) -> Path:
    """``mixed``: every kind of column, 3 shards, small pages, no index;
    ``compress``: the same rows, with the bytes and string columns stored compressed."""
    return write_mixed(path, ROWS, seed=13, max_blob=60, text_repeats=4, compress=compress)


SIZES_ROWS = 48
BIG_ROWS = (5, 20, 33)
"""Rows of ``sizes`` whose values are 2 MB; every other value is a few bytes."""


def _write_sizes(path: Path) -> Path:
    """A bytes and a variable-shape column whose values differ in size by five orders of
    magnitude."""
    rng = np.random.default_rng(17)
    big = [i in BIG_ROWS for i in range(SIZES_ROWS)]
    blobs = [rng.bytes(2 * MB if b else int(rng.integers(0, 30))) for b in big]
    arrays = [rng.standard_normal(MB // 4 if b else int(rng.integers(0, 4))) for b in big]
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "arr": {"type": "float64", "shape": [-1]},
            }
        )
        writer.write_raw_data(
            {"id": np.arange(SIZES_ROWS, dtype=np.int64), "blob": blobs, "arr": arrays}
        )
    return Path(str(path) + "0")


def _write_images(path: Path, rows: int = 90) -> Path:
    """Image-sized bytes values (20-40 KB), stored compressed (so a same-host reader gets
    them copied into its segments, not as places in the files), and a label."""
    rng = np.random.default_rng(11)
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.set_compression("zstd", ["image"])
        writer.write_raw_data(
            {
                "image": [rng.bytes(int(n)) for n in rng.integers(20 << 10, 40 << 10, rows)],
                "label": np.arange(rows, dtype=np.int32),
            }
        )
    return Path(str(path) + "0")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_mixed(tmp_path_factory.mktemp("mixed") / "mixed.mrecord")


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mixed``'s rows with compressed bytes values: they cannot be shared in place, so
    the same-host server copies them into the reader's segment."""
    return _write_mixed(tmp_path_factory.mktemp("packed") / "packed.mrecord", compress=True)


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_sizes(tmp_path_factory.mktemp("sizes") / "sizes.mrecord")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_images(tmp_path_factory.mktemp("images") / "images.mrecord")


@pytest.fixture(scope="module")
def server(mixed: Path, packed: Path, sizes: Path) -> Iterator[ServerThread]:
    with ServerThread({"mixed": mixed, "packed": packed, "sizes": sizes}) as srv:
        assert srv.local_socket_path is not None
        yield srv


@pytest.fixture(scope="module")
def truth(mixed: Path) -> dict[str, list[Any]]:
    """Every value of ``mixed``, read from the files."""
    with DatasetReader.open(mixed) as reader:
        block = reader.read_rows(np.arange(reader.num_rows))
        return {name: list(block.columns[name]) for name in COLUMNS}


@pytest.fixture(autouse=True, scope="module")
def _seed() -> Iterator[None]:
    old = config.get_seed()
    config.set_seed(4321)
    yield
    config.set_seed(old)


# -- comparing values ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A value as something ``==`` compares exactly: bytes, str, or (dtype, shape, bytes)."""
    if isinstance(value, (bytes, str)):
        return value
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return value.tobytes()  # a bytes value as an array (MindSpore's iterators do this)
    a = np.asarray(value)
    if a.dtype.kind in "US":
        return str(a)
    return (a.dtype.str, a.shape, a.tobytes())


def _rows(ds: Any, epochs: int = 2) -> list[tuple[Any, ...]]:
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [tuple(_plain(v) for v in row) for _ in range(epochs) for row in it]


def _block(block: Any, columns: list[str]) -> dict[str, list[Any]]:
    return {c: [_plain(v) for v in block.columns[c]] for c in columns}


def _remote(server: ServerThread, transport: str, **kwargs: Any) -> mrecord.RemoteDataset:
    name = kwargs.pop("name", "mixed")
    ds = mrecord.RemoteDataset(server.url, name, transport=transport, **kwargs)
    assert ds.transport == transport
    return ds


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


@pytest.fixture(scope="module")
def pairs(server: ServerThread) -> dict[str, tuple[mrecord.RemoteDataset, ...]]:
    """name -> (local, http) RemoteDatasets of ``mixed`` and of ``packed``."""
    return {
        name: (_remote(server, "local", name=name), _remote(server, "http", name=name))
        for name in ("mixed", "packed")
    }


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


# -- block sizes and reused segments ---------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_blocks_bigger_than_the_first_guess_come_back_whole(
    server: ServerThread, sizes: Path, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three 2 MB values among tiny ones: the segment sized from the mean row is far too
    small for the array values (copied into it), the server answers {"need": n}, and the
    client asks again with a bigger one; big bytes values may lie in the shared files."""
    from mrecord.serve.client.transports import local as local_client

    needs: list[int] = []

    def spy(sock: socket.socket, **kwargs: Any) -> tuple[dict[str, Any], list[int]]:
        message, fds = receive(sock, **kwargs)
        if "need" in message:
            needs.append(int(message["need"]))
        return message, fds

    monkeypatch.setattr(local_client, "receive", spy)
    ds = _remote(server, transport, name="sizes")
    ids = [*BIG_ROWS, 0, 1, BIG_ROWS[0], 47]
    cols = ["arr", "blob", "id"]
    with DatasetReader.open(sizes) as reader:
        want = _block(reader.read_rows(ids, cols), cols)
        small = _block(reader.read_rows([2, 3, 4], cols), cols)
        again = _block(reader.read_rows([7, BIG_ROWS[2]], cols), cols)
    assert _block(ds.read_rows(ids, cols), cols) == want
    assert _block(ds.read_rows([2, 3, 4], cols), cols) == small
    assert _block(ds.read_rows([7, BIG_ROWS[2]], cols), cols) == again  # after a small block
    if transport == "local":
        assert needs and max(needs) > 4 * 2 * MB  # the retry path was taken
    assert _rows(ds) == _rows(MindDataset(sizes, shuffle=Shuffle.GLOBAL))
    assert ds.transport == transport


def test_kept_values_never_change_while_segments_are_reused(images: Path) -> None:
    """Keep every 5th value over 3 epochs of small blocks: each kept value pins its
    segment, so the client makes many more segments than the server maps at once, and
    the free ones are written again."""
    with ServerThread({"imgs": images}, limits=Limits(max_block_rows=8)) as srv:
        remote = _remote(srv, "local", name="imgs", shuffle=Shuffle.GLOBAL)
        local = MindDataset(images, shuffle=Shuffle.GLOBAL)
        kept: list[tuple[np.ndarray, bytes]] = []
        remote_it = remote.create_tuple_iterator(num_epochs=3, output_numpy=True)
        local_it = local.create_tuple_iterator(num_epochs=3, output_numpy=True)
        for _epoch in range(3):
            for i, (got, want) in enumerate(zip(remote_it, local_it, strict=True)):
                assert bytes(got[0]) == bytes(want[0]) and int(got[1]) == int(want[1])
                if i % 5 == 0:
                    kept.append((got[0], bytes(want[0])))
        assert len(kept) == 54
        assert [bytes(value) for value, _ in kept] == [expected for _, expected in kept]
        assert remote.transport == "local"


def _memfd_maps() -> int:
    """Mappings of the transport's segments in this process (client's and server's)."""
    with open("/proc/self/maps") as maps:
        return sum("memfd:mrecord-block" in line for line in maps)


def test_many_epochs_keep_the_server_maps_bounded(images: Path) -> None:
    """Forty epochs of small blocks, keeping the last value of each of the last two epochs
    (so segments are pinned, then dropped): the server is never asked to map more than
    MAX_SEGMENTS per connection, and the mappings and fds do not grow with the epochs."""
    from mrecord.serve.client.session import default_session

    with ServerThread({"imgs": images}, limits=Limits(max_block_rows=8)) as srv:
        remote = _remote(srv, "local", name="imgs", shuffle=Shuffle.GLOBAL)
        local = MindDataset(images, shuffle=Shuffle.GLOBAL)
        remote_it = remote.create_tuple_iterator(num_epochs=40, output_numpy=True)
        local_it = local.create_tuple_iterator(num_epochs=40, output_numpy=True)
        kept: list[tuple[np.ndarray, bytes]] = []
        counts, fds = [], []
        for _epoch in range(40):
            last: tuple[np.ndarray, bytes] | None = None
            for got, want in zip(remote_it, local_it, strict=True):
                assert bytes(got[0]) == bytes(want[0])
                last = (got[0], bytes(want[0]))
            assert last is not None
            kept = [*kept[-1:], last]
            # Server-side maps: every mapping of a segment less the client's own one.
            counts.append(_memfd_maps() - len(default_session().segments))
            fds.append(len(os.listdir("/proc/self/fd")))
        assert all(bytes(v) == e for v, e in kept)
        assert remote.transport == "local"
        connections = 4 + 2  # num_parallel_workers + 2 idle ones at most
        assert max(counts) <= MAX_SEGMENTS * connections
        # Not growing with the epochs (a segment pinned then dropped each epoch would
        # add one map per epoch if the server were never told to unmap it).
        assert max(counts[-10:]) <= 2 * max(counts[:10])
        # Nor do the open file descriptors (a dropped segment's memfd is closed).
        assert max(fds[-10:]) <= max(fds[:10]) + 20


# -- a server that goes away -----------------------------------------------------------------------


def test_auto_falls_back_to_http_when_the_socket_stops(
    mixed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        ds = mrecord.RemoteDataset(srv.url, "mixed", shuffle=Shuffle.GLOBAL)
        assert ds.transport == "local"
        want = _rows(MindDataset(mixed, shuffle=Shuffle.GLOBAL), 2)
        got: list[tuple[Any, ...]] = []
        it = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
        with caplog.at_level(logging.WARNING, logger="mrecord.serve"):
            for _ in range(2):
                for row in it:
                    got.append(tuple(_plain(v) for v in row))
                    if len(got) == 50:
                        assert srv._local is not None
                        srv._local.stop()
        assert got == want
        assert ds.transport == "http"
        assert "reading over HTTP" in caplog.text


def test_local_says_the_socket_stopped_answering(mixed: Path) -> None:
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        ds = mrecord.RemoteDataset(srv.url, "mixed", shuffle=False, transport="local")
        assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=False), 1)
        assert srv._local is not None
        srv._local.stop()
        with pytest.raises(DatasetServerError, match="stopped answering"):
            _rows(ds, 1)
        with pytest.raises(DatasetServerError, match="stopped answering"):
            ds.read_rows([1, 2])


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("first_read", ["before", "after"])
def test_a_dataset_replaced_on_disk_is_served_as_it_was_opened(
    mixed: Path, tmp_path: Path, transport: str, first_read: str
) -> None:
    """Writing a new dataset over the served one (new files at the same paths) changes
    nothing for readers: the server serves, and shares, the files it opened."""
    path = tmp_path / "mixed.mrecord"
    first = _write_mixed(path)
    with ServerThread({"m": first}) as srv:
        ds = _remote(srv, transport, name="m")
        ids = np.arange(0, ROWS, 7)
        if first_read == "before":
            ds.read_rows(ids, ["blob"])
        with DatasetReader.open(first) as reader:
            want = _block(reader.read_rows(ids, ["blob", "text"]), ["blob", "text"])
        with FileWriter(path, shard_num=3, overwrite=True) as writer:
            writer.add_schema({"blob": {"type": "bytes"}, "text": {"type": "string"}})
            writer.write_raw_data(
                {"blob": [bytes([i % 251]) * 300 for i in range(ROWS)], "text": ["new"] * ROWS}
            )
        assert _block(ds.read_rows(ids, ["blob", "text"]), ["blob", "text"]) == want
        assert ds.transport == transport


def test_a_server_restarted_on_the_same_socket_with_new_files_is_read_right(
    mixed: Path, tmp_path: Path
) -> None:
    v2 = tmp_path / "v2" / "mixed.mrecord"
    v2.parent.mkdir()
    with FileWriter(v2, shard_num=3, overwrite=True) as writer:
        writer.add_schema({"blob": {"type": "bytes"}, "id": {"type": "int64"}})
        writer.write_raw_data(
            {
                "blob": [bytes([i % 251]) * (i % 7 + 1) for i in range(ROWS)],
                "id": np.arange(ROWS, dtype=np.int64),
            }
        )
    ids = np.arange(0, ROWS, 5)
    with DatasetReader.open(Path(str(v2) + "0")) as reader:
        want = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
    with ServerThread({"m": mixed}) as srv:
        ds = _remote(srv, "local", name="m")
        ds.read_rows(ids, ["blob"])  # the old files are mapped here now
        assert srv._local is not None
        path = srv._local.path
        srv._local.stop()  # `mrecord serve` restarted on the same socket, new files
        opened = open_datasets({"m": Path(str(v2) + "0")})
        try:
            with LocalServer(opened, path, token=None, limits=Limits()):
                got = [bytes(v) for v in ds.read_rows(ids, ["blob"]).columns["blob"]]
        finally:
            for served in opened.values():
                served.close()
    assert got == want


def test_connections_the_server_closed_when_idle_are_replaced(
    mixed: Path, truth: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training job that pauses (evaluation, a checkpoint) longer than the server keeps
    idle connections goes on reading through the socket, not over HTTP."""
    from mrecord.serve.server import local as local_server

    monkeypatch.setattr(local_server, "IDLE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(local_server, "_IDLE_CHECK_S", 0.1)
    with ServerThread({"mixed": mixed}) as srv:
        ds = _remote(srv, "local", name="mixed", shuffle=False)
        want = [tuple(_plain(truth[c][i]) for c in COLUMNS) for i in range(ROWS)]
        local = srv._local
        assert local is not None
        for _pause in range(3):
            assert _rows(ds, 1) == want
            assert local._connections  # this process's connections, idle now
            for _ in range(600):  # until the server has closed them (a bounded wait)
                if not local._connections:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the server never closed the idle connections")
        assert ds.transport == "local"


# -- a damaged file --------------------------------------------------------------------------------


def _damaged_copy(mixed: Path, tmp_path: Path, column: str, page: int) -> tuple[Path, list[int]]:
    """A copy of ``mixed`` with one byte flipped in ``page`` of ``column`` of its first
    shard; the global ids of that page's rows."""
    from mrecord.storage.shard import ShardFile

    for f in mixed.parent.glob("mixed.mrecord*"):
        if not f.name.endswith("-lock"):
            shutil.copy(f, tmp_path / f.name)
    first = tmp_path / mixed.name
    with ShardFile(first) as shard:
        chunk = shard.meta.chunks[page, shard.field_index(column)]
        offset = int(chunk["offset"]) + int(chunk["length"]) // 2
        ids = list(range(int(shard.page_starts[page]), int(shard.page_starts[page + 1])))
    data = bytearray(first.read_bytes())
    data[offset] ^= 0xFF
    first.write_bytes(bytes(data))
    return first, ids


def test_a_corrupt_page_is_a_corrupt_file_error_through_the_socket(
    mixed: Path, tmp_path: Path
) -> None:
    first, ids = _damaged_copy(mixed, tmp_path, "blob", 1)
    with ServerThread({"bad": first}) as srv:
        ds = mrecord.RemoteDataset(srv.url, "bad", transport="local", shuffle=False)
        with pytest.raises(CorruptFileError, match="corrupt_file"):
            ds.read_rows([0, ids[1]], ["blob"])
        with pytest.raises(CorruptFileError, match="checksum"):
            _rows(ds, 1)
        # the same connection still serves what is intact
        ok = ds.read_rows([ids[1], 0], ["id", "text"])
        assert [int(v) for v in ok.columns["id"]] == [ids[1], 0]
        assert ds.transport == "local"


def test_a_corrupt_first_page_still_lets_the_dataset_open(mixed: Path, tmp_path: Path) -> None:
    first, ids = _damaged_copy(mixed, tmp_path, "blob", 0)
    MindDataset(first)  # opens: only reading the damaged rows fails
    with ServerThread({"bad": first}) as srv:
        ds = mrecord.RemoteDataset(srv.url, "bad", transport="local", shuffle=False)
        with pytest.raises(CorruptFileError):
            ds.read_rows(ids[:2], ["blob"])
        assert [int(v) for v in ds.read_rows(ids[:2], ["id"]).columns["id"]] == ids[:2]


# -- fork ------------------------------------------------------------------------------------------


def _digest(ds: mrecord.RemoteDataset, epochs: int) -> list[tuple[int, str]]:
    out = []
    for _ in range(epochs):
        for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            blob = bytes(row[COLUMNS.index("blob")]) + str(row[COLUMNS.index("text")]).encode()
            out.append((int(row[COLUMNS.index("id")]), hashlib.sha256(blob).hexdigest()))
    return out


def _values(block: Any) -> list[tuple[bytes, str]]:
    pairs = zip(block.columns["blob"], block.columns["text"], strict=True)
    return [(bytes(b), str(t)) for b, t in pairs]


def _read_in_child(
    ds: mrecord.RemoteDataset, truth: dict[str, list[Any]], go: Any, out: Any
) -> None:
    try:
        if not go.wait(60):
            raise TimeoutError("the parent never said go")
        # Blocks kept alive: they take every free segment of this process's pool, so
        # one shared with the parent would be written here while the parent uses it.
        rng = np.random.default_rng(3)
        kept = [(ids, ds.read_rows(ids, ["blob", "text"])) for ids in rng.permuted(
            np.tile(np.arange(ROWS), (12, 1)), axis=1
        )]  # fmt: skip
        rows = _digest(ds, 3)
        intact = all(
            _values(block) == [(truth["blob"][i], truth["text"][i]) for i in ids]
            for ids, block in kept
        )
        local = ds._transport._local
        link = local._link if local is not None else None
        own = link is not None and all(c.pid == os.getpid() for c in link._idle)
        out.put((rows, intact, ds.transport, own))
    except BaseException as exc:
        out.put(repr(exc))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_reads_through_its_own_connections_and_memory(
    server: ServerThread, truth: dict[str, list[Any]]
) -> None:
    """A DataLoader worker forks after the parent has read: the child's reads and the
    parent's, at the same time, must each get their own rows and keep them (a shared
    connection would mix the answers up; a shared segment would overwrite values)."""
    import multiprocessing

    ds = _remote(server, "local", shuffle=False)
    want = _digest(mrecord.RemoteDataset(server.url, "mixed", shuffle=False, transport="http"), 1)
    everything = [(truth["blob"][i], truth["text"][i]) for i in range(ROWS)]
    before = ds.read_rows(np.arange(ROWS), ["blob", "text"])  # kept across the fork
    assert _digest(ds, 1) == want  # the link has idle connections, the pool free segments
    ctx = multiprocessing.get_context("fork")
    out, go = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_read_in_child, args=(ds, truth, go, out))
    child.start()
    try:
        after = ds.read_rows(np.arange(ROWS), ["blob", "text"])  # in a segment from before
        go.set()
        parent_rows = _digest(ds, 3)
        answer = out.get(timeout=120)
    finally:
        go.set()
        child.join(60)
    assert child.exitcode == 0
    assert not isinstance(answer, str), answer
    rows, intact, transport, own = answer
    assert rows == want * 3 and intact
    assert transport == "local" and own
    assert parent_rows == want * 3
    assert _values(before) == everything
    assert _values(after) == everything
    assert ds.transport == "local"


# -- the raw protocol: what a hostile or broken peer gets ------------------------------------------

TOKEN = "tok-123"


@pytest.fixture(scope="module")
def served(mixed: Path) -> Iterator[dict[str, ServedDataset]]:
    datasets = open_datasets({"mixed": mixed})
    yield datasets
    for ds in datasets.values():
        ds.close()


@pytest.fixture(scope="module")
def raw_server(served: dict[str, ServedDataset]) -> Iterator[LocalServer]:
    limits = Limits(max_block_rows=50)
    with LocalServer(served, default_socket_path(), token=TOKEN, limits=limits) as srv:
        yield srv


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sock.connect(str(path))
    return sock


def _hello(sock: socket.socket, dataset: str = "mixed", token: Any = TOKEN) -> dict[str, Any]:
    send(sock, {"op": "hello", "version": VERSION, "dataset": dataset, "token": token})
    return receive(sock)[0]


def _session(path: Path) -> socket.socket:
    sock = _connect(path)
    assert _hello(sock).items() >= {"ok": True, "rows": ROWS}.items()
    return sock


def _memfd(nbytes: int, seals: int = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) -> int:
    fd = os.memfd_create("test-segment", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _ask(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> Any:
    send(sock, message, fds)
    return receive(sock)[0]


def _map(sock: socket.socket, number: Any, fd: int) -> Any:
    return _ask(sock, {"op": "map", "segment": number}, (fd,))


def _read(sock: socket.socket, ids: Any, columns: Any, number: int = 0) -> Any:
    data = np.asarray(ids, dtype="<i8").tobytes()
    return _ask(sock, {"op": "read", "ids": data, "columns": columns, "segment": number})


def _code(answer: Any) -> str:
    assert set(answer) == {"error"}, answer
    return str(answer["error"]["code"])


def _closed(sock: socket.socket) -> bool:
    """True when the server closed ``sock`` (end of stream, or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _shard_files(sock: socket.socket, header: dict[str, Any]) -> dict[int, np.ndarray]:
    """The shard files a block's header refers to, asked for and mapped as a client does."""
    wanted = list(header.get("files") or [])
    if not wanted:
        return {}
    answer, fds = _ask_fds(sock, {"op": "files", "files": wanted}, len(wanted))
    assert answer == {"ok": True, "files": wanted} and len(fds) == len(wanted)
    maps = {}
    for number, fd in zip(wanted, fds, strict=True):
        try:
            maps[number] = np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), np.uint8)
        finally:
            os.close(fd)
    return maps


def _ask_fds(sock: socket.socket, message: dict[str, Any], max_fds: int) -> Any:
    send(sock, message)
    return receive(sock, max_fds=max_fds)


def _decoded(sock: socket.socket, answer: Any, fd: int, nbytes: int) -> Any:
    """(rows, columns) of a read ``answer`` written into segment ``fd`` of ``nbytes``."""
    region = np.frombuffer(mmap.mmap(fd, nbytes), dtype=np.uint8)
    return decode_block_at(answer["block"], region, _shard_files(sock, answer["block"]))


def _serves(path: Path, truth: dict[str, list[Any]]) -> None:
    """A fresh client maps a segment and reads rows right: the server is alive and well."""
    with _session(path) as sock:
        fd = _memfd(1 * MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            answer = _read(sock, [3, 200, 3], ["blob", "points"])
            rows, cols = _decoded(sock, answer, fd, MB)
        finally:
            os.close(fd)
    assert rows == 3
    for c in ("blob", "points"):
        assert [_plain(v) for v in cols[c]] == [_plain(truth[c][i]) for i in (3, 200, 3)]


def _still_reads(sock: socket.socket) -> None:
    """``sock``'s session maps a fresh segment and gets a block into it."""
    fd = _memfd(MB)
    try:
        assert _map(sock, 0, fd) == {"ok": True}
        assert "block" in _read(sock, [5, 1], ["text", "id"])
    finally:
        os.close(fd)


def test_a_mapped_segment_gets_the_rows_written_into_it(
    raw_server: LocalServer, truth: dict[str, list[Any]]
) -> None:
    _serves(raw_server.path, truth)


@pytest.mark.parametrize("token", [None, "", "tok-12", "tok-1234", 123, ["tok-123"]], ids=repr)
def test_a_missing_or_wrong_token_is_unauthorized(raw_server: LocalServer, token: Any) -> None:
    with _connect(raw_server.path) as sock:
        assert _code(_hello(sock, token=token)) == "unauthorized"
        assert _closed(sock)


def test_hello_needs_a_known_dataset_and_this_version(raw_server: LocalServer) -> None:
    with _connect(raw_server.path) as sock:
        answer = _hello(sock, dataset="../mixed")
        assert _code(answer) == "unknown_dataset" and "'mixed'" in answer["error"]["message"]
        assert _closed(sock)
    with _connect(raw_server.path) as sock:
        send(sock, {"op": "hello", "version": VERSION + 1, "dataset": "mixed", "token": TOKEN})
        assert _code(receive(sock)[0]) == "bad_request"
    with _connect(raw_server.path) as sock:  # a read before hello
        assert _code(_read(sock, [0], None)) == "bad_request"


def _regular_file(tmp_path: Path) -> int:
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * 4096)
    return os.open(path, os.O_RDWR)


def _pipe(tmp_path: Path) -> int:
    read, write = os.pipe()
    os.close(write)
    return read


@pytest.mark.parametrize(
    "make",
    [
        lambda _tmp: _memfd(MB, seals=0),
        lambda _tmp: _memfd(MB, seals=fcntl.F_SEAL_GROW),
        lambda _tmp: os.memfd_create("unsealable"),
        lambda _tmp: _memfd(0),
        _regular_file,
        _pipe,
    ],
    ids=["unsealed", "grow_seal_only", "no_sealing", "empty", "regular_file", "pipe"],
)
def test_a_segment_that_is_not_a_sealed_memfd_is_refused(
    raw_server: LocalServer, truth: dict[str, list[Any]], tmp_path: Path, make: Any
) -> None:
    """A file the client could shrink while the server writes would kill the server
    (SIGBUS); every such fd is refused, and the connection and server go on."""
    fd = make(tmp_path)
    with _session(raw_server.path) as sock:
        try:
            assert _code(_map(sock, 0, fd)) == "bad_request"
        finally:
            os.close(fd)
        assert _code(_read(sock, [1], ["id"])) == "bad_request"  # segment 0 is not mapped
        _still_reads(sock)  # the same connection still works
    _serves(raw_server.path, truth)


def test_map_needs_exactly_one_fd_and_a_segment_number(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        assert _code(_ask(sock, {"op": "map", "segment": 0})) == "bad_request"
        fd = _memfd(MB)
        try:
            for number in (-1, True, "0", None, 1.5):
                assert _code(_map(sock, number, fd)) == "bad_request"
            assert _code(_ask(sock, {"op": "unmap-all", "segment": 0})) == "bad_request"
            assert _map(sock, 0, fd) == {"ok": True}
        finally:
            os.close(fd)


def test_at_most_max_segments_per_connection(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fds = [_memfd(4096) for _ in range(MAX_SEGMENTS + 1)]
        try:
            for number, fd in enumerate(fds[:MAX_SEGMENTS]):
                assert _map(sock, number, fd) == {"ok": True}
            answer = _map(sock, MAX_SEGMENTS, fds[-1])
            assert _code(answer) == "bad_request"
            assert f"at most {MAX_SEGMENTS}" in answer["error"]["message"]
            assert _map(sock, 3, fds[-1]) == {"ok": True}  # replacing one is fine
            # unmapping one makes room
            send(sock, {"op": "map", "segment": 99, "unmap": [0]}, (fds[-1],))
            assert receive(sock)[0] == {"ok": True}
        finally:
            for fd in fds:
                os.close(fd)


def test_a_segment_too_small_gets_need(
    raw_server: LocalServer, truth: dict[str, list[Any]]
) -> None:
    ids = list(range(40))
    with _session(raw_server.path) as sock:
        small, big = _memfd(64), _memfd(MB)
        try:
            assert _map(sock, 0, small) == {"ok": True}
            answer = _read(sock, ids, ["blob", "text", "points"], 0)
            assert set(answer) == {"need"}
            need = int(answer["need"])
            # text and points are copied into the segment (blob may lie in the files)
            copied = [len(truth["text"][i].encode()) + truth["points"][i].nbytes for i in ids]
            assert sum(copied) < need <= MB
            assert _map(sock, 1, big) == {"ok": True}
            answer = _read(sock, ids, ["blob", "text", "points"], 1)
            rows, cols = _decoded(sock, answer, big, MB)
        finally:
            os.close(small)
            os.close(big)
    assert rows == 40
    assert [bytes(v) for v in cols["blob"]] == [truth["blob"][i] for i in ids]
    assert list(cols["text"]) == [truth["text"][i] for i in ids]
    assert [_plain(v) for v in cols["points"]] == [_plain(truth["points"][i]) for i in ids]


def test_shard_files_are_given_read_only_and_only_the_datasets(
    raw_server: LocalServer, mixed: Path
) -> None:
    """A reader gets the shard files its blocks refer to as read-only descriptors of the
    very files served; nothing else, whatever number it asks for."""
    shards = sorted(mixed.parent.glob("mixed.mrecord[0-9]"))
    with _session(raw_server.path) as sock:
        answer, fds = _ask_fds(sock, {"op": "files", "files": [0, 2]}, 2)
        try:
            assert answer == {"ok": True, "files": [0, 2]} and len(fds) == 2
            for fd, shard in zip(fds, (shards[0], shards[2]), strict=True):
                assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
                assert os.fstat(fd).st_ino == os.stat(shard).st_ino
                with pytest.raises(OSError):
                    os.write(fd, b"x")
                with pytest.raises((OSError, PermissionError)):
                    mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            for fd in fds:
                os.close(fd)
        for wanted in ([3], [-1], ["0"], [None], [], "0", None, list(range(65))):
            answer, fds = _ask_fds(sock, {"op": "files", "files": wanted}, 4)
            assert fds == [] and _code(answer) == "bad_request", wanted
        _still_reads(sock)


def test_bad_requests_get_the_http_api_codes(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fd = _memfd(MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            for ids in ([ROWS], [-1], [0, ROWS + 5]):
                answer = _read(sock, ids, ["id"])
                assert _code(answer) == "bad_ids" and str(ids[-1]) in answer["error"]["message"]
            assert _code(_read(sock, [0], ["id", "nope"])) == "unknown_column"
            answer = _read(sock, list(range(51)), ["id"])
            assert _code(answer) == "bad_request" and "at most 50" in answer["error"]["message"]
            assert _code(_read(sock, [0], "id")) == "bad_request"
            send(sock, {"op": "read", "ids": b"\0" * 7, "columns": None, "segment": 0})
            assert _code(receive(sock)[0]) == "bad_request"
            assert "block" in _read(sock, list(range(50)), ["id"])  # still serving
        finally:
            os.close(fd)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack("<I", 3) + b"\xc1\xc1\xc1",  # not MessagePack
        struct.pack("<I", 2) + b"\x92\x01",  # MessagePack, but not a map
        struct.pack("<I", MAX_MESSAGE_BYTES + 1),  # longer than any message may be
        struct.pack("<I", 0xFFFFFFFF),
    ],
    ids=["garbage", "not_a_map", "too_long", "huge_length"],
)
@pytest.mark.parametrize("after_hello", [False, True])
def test_a_broken_frame_closes_only_that_connection(
    raw_server: LocalServer, truth: dict[str, list[Any]], frame: bytes, after_hello: bool
) -> None:
    other = _session(raw_server.path)  # a reader in the middle of its work
    with _connect(raw_server.path) as sock:
        if after_hello:
            assert _hello(sock).items() >= {"ok": True, "rows": ROWS}.items()
        sock.sendall(frame)
        assert _closed(sock)
    with other:
        _still_reads(other)
    _serves(raw_server.path, truth)


def test_a_client_stalled_mid_message_does_not_stall_the_others(
    served: dict[str, ServedDataset],
) -> None:
    with LocalServer(served, default_socket_path(), token=None, limits=Limits()) as srv:
        staller = _connect(srv.path)
        assert _hello(staller, token=None)["ok"]
        payload = msgpack.packb({"op": "read", "ids": b"\0" * 8, "columns": None, "segment": 0})
        staller.sendall(struct.pack("<I", len(payload)) + payload[:3])  # the rest never comes
        time.sleep(0.2)  # the server has seen the first bytes
        with _connect(srv.path) as other:
            assert _hello(other, token=None)["ok"]  # answered while the staller stalls
            staller.setblocking(False)
            try:
                still_open = staller.recv(1) != b""
            except BlockingIOError:
                still_open = True  # nothing to read, no end of stream: the server waits on
            except ConnectionResetError:
                still_open = False
        staller.close()
        assert still_open  # the other reader was answered while the staller still stalled


def test_more_fds_than_a_message_allows_are_closed(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fds = [_memfd(4096) for _ in range(3)]
        try:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            payload = msgpack.packb({"op": "map", "segment": 0})
            sock.sendmsg([struct.pack("<I", len(payload)) + payload], ancillary)
            assert receive(sock)[0] == {"ok": True}  # the first fd; the others are dropped
        finally:
            for fd in fds:
                os.close(fd)


def test_more_connections_than_allowed_are_told_busy(
    served: dict[str, ServedDataset], truth: dict[str, list[Any]]
) -> None:
    with LocalServer(
        served, default_socket_path(), token=None, limits=Limits(), max_connections=2
    ) as srv:
        first = _connect(srv.path)
        assert _hello(first, token=None)["ok"]
        with _connect(srv.path) as second:
            assert _hello(second, token=None)["ok"]
            with _connect(srv.path) as third:
                answer = receive(third)[0]
                assert _code(answer) == "busy" and "2 connections" in answer["error"]["message"]
                assert _closed(third)
        first.close()
        # Once the others are gone, a client is served again (the server notices
        # the closed connections on its own threads: wait for it, a bounded time).
        for _ in range(200):
            if _try_hello(srv.path).get("ok"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the server stayed busy after every client left")
        assert _try_hello(srv.path).get("ok")


def test_a_busy_socket_is_waited_for_like_a_busy_http_server(mixed: Path) -> None:
    import threading

    with ServerThread({"mixed": mixed}) as srv:
        assert srv._local is not None
        srv._local._max_connections = 1  # what `mrecord serve --max-connections 1` means
        other = _connect(srv._local.path)  # another reader holds the only connection
        assert _hello(other, token=None)["ok"]
        threading.Timer(0.5, other.close).start()  # and finishes soon after
        ds = mrecord.RemoteDataset(srv.url, "mixed", transport="local", retries=4)
        assert [int(v) for v in ds.read_rows([4, 2], ["id"]).columns["id"]] == [4, 2]


def test_a_refused_client_trickling_its_hello_stalls_no_one(
    served: dict[str, ServedDataset],
) -> None:
    import threading

    with LocalServer(
        served, default_socket_path(), token=None, limits=Limits(), max_connections=1
    ) as srv:
        first = _connect(srv.path)
        assert _hello(first, token=None)["ok"]
        stop = threading.Event()
        trickled_all = threading.Event()
        frame = struct.pack("<I", 60) + b"\x80" * 60  # a hello-sized message, slowly

        def trickle() -> None:
            with _connect(srv.path) as refused:
                for byte in frame:
                    if stop.wait(0.3):
                        return
                    try:
                        refused.send(bytes([byte]))
                    except OSError:
                        return  # the server closed it: fine, it is refused
                trickled_all.set()

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            time.sleep(0.5)  # the server has accepted the trickler and refused it
            with first:
                _still_reads(first)  # answered at once...
                answered_while_trickling = not trickled_all.is_set()  # ...not after 19 s
        finally:
            stop.set()
            trickler.join(timeout=30)
        assert answered_while_trickling


def test_descriptors_sent_without_a_whole_message_are_bounded(
    served: dict[str, ServedDataset],
) -> None:
    with LocalServer(served, default_socket_path(), token=TOKEN, limits=Limits()) as srv:
        before = len(os.listdir("/proc/self/fd"))
        fd = _memfd(4096)
        sock = _connect(srv.path)
        try:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
            sock.sendmsg([struct.pack("<I", 1000)], ancillary)
            for _ in range(300):
                sock.sendmsg([b"\x80"], ancillary)  # the message never ends
            _wait_read_by_server(sock)
            held = len(os.listdir("/proc/self/fd")) - before
        finally:
            sock.close()
            os.close(fd)
        assert held < 10, f"the server holds {held} descriptors a client sent"
        _serves(srv.path, _truth_of(served))


def _wait_read_by_server(sock: socket.socket) -> None:
    """Wait (a bounded time) until the server has received everything sent on ``sock``."""
    import termios

    for _ in range(400):
        unread = struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0" * 4))[0]
        if unread == 0:
            return
        time.sleep(0.01)
    raise AssertionError("the server did not read what was sent")


def _truth_of(served: dict[str, ServedDataset]) -> dict[str, list[Any]]:
    reader = served["mixed"].reader
    block = reader.read_rows(np.arange(reader.num_rows))
    return {c: list(v) for c, v in block.columns.items()}


def _shmem_kb() -> int:
    """Shared memory this process has touched (``RssShmem``), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssShmem:"):
            return int(line.split()[1])
    raise AssertionError("no RssShmem in /proc/self/status")


def test_mapping_a_segment_allocates_none_of_its_pages(raw_server: LocalServer) -> None:
    size = 128 * MB
    with _session(raw_server.path) as sock:
        fd = _memfd(size)
        try:
            before = _shmem_kb()
            assert _map(sock, 0, fd) == {"ok": True}
            grown = (_shmem_kb() - before) * 1024
            small = _memfd(MB)
            assert _map(sock, 0, small) == {"ok": True}  # unmaps the big one
            os.close(small)
        finally:
            os.close(fd)
    assert grown < size // 4, f"mapping an untouched {size}-byte segment took {grown} bytes"


@pytest.mark.parametrize("unmap", [5, "ab", {"a": 1}, 1.5, True])
def test_a_non_list_unmap_is_a_bad_request(raw_server: LocalServer, unmap: Any) -> None:
    with _session(raw_server.path) as sock:
        fd = _memfd(MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            data = np.array([1, 2], dtype="<i8").tobytes()
            answer = _ask(
                sock, {"op": "read", "ids": data, "columns": ["id"], "segment": 0, "unmap": unmap}
            )
            assert _code(answer) == "bad_request" and "unmap" in answer["error"]["message"]
            assert "block" in _read(sock, [5, 1], ["text", "id"])  # still serving
        finally:
            os.close(fd)


def _try_hello(path: Path) -> dict[str, Any]:
    """The answer to a hello, or {} when the server closed the connection first."""
    with _connect(path) as sock:
        try:
            return _hello(sock, token=None)
        except OSError:
            return {}


# -- the socket file and its folder ----------------------------------------------------------------


def test_the_socket_is_private_to_this_user(server: ServerThread) -> None:
    path = server.local_socket_path
    assert path is not None
    info = os.lstat(path)
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid()
    folder = os.lstat(path.parent)
    assert folder.st_uid == os.getuid() and not folder.st_mode & 0o022


def test_a_server_that_cannot_bind_leaks_nothing(
    served: dict[str, ServedDataset], tmp_path: Path
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        srv = LocalServer(served, tmp_path / "missing" / "s.sock", token=None, limits=Limits())
        try:
            srv.start()
        except ArgumentError as exc:  # names the path and the option
            assert str(tmp_path / "missing") in str(exc) and "--local-socket" in str(exc)
        else:
            srv.stop()
            raise AssertionError("bound a socket in a missing folder")
        del srv
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_stopped_server_removes_its_socket(served: dict[str, ServedDataset]) -> None:
    srv = LocalServer(served, default_socket_path(), token=None, limits=Limits()).start()
    assert srv.path.exists()
    srv.stop()
    assert not srv.path.exists()


def test_default_socket_path_refuses_a_folder_others_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    runtime.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(ArgumentError, match="--local-socket"):
        default_socket_path()
    runtime.chmod(0o700)
    assert default_socket_path().parent == runtime


def test_default_socket_path_in_tmp_refuses_a_shared_or_linked_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"mrecord-{os.getuid()}"
    path = default_socket_path()  # made 0700 on first use
    assert path.parent == folder and stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    folder.chmod(0o757)
    with pytest.raises(ArgumentError, match="private"):
        default_socket_path()
    folder.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # someone else's link to a folder that looks private
    with pytest.raises(ArgumentError, match="private"):
        default_socket_path()


# -- the command line ------------------------------------------------------------------------------


def test_serve_help_names_the_local_socket_option() -> None:
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0 and "--local-socket" in result.output


def test_local_socket_path_choices(tmp_path: Path) -> None:
    assert local_socket_path("off") is None
    assert local_socket_path(None) is None
    assert local_socket_path(str(tmp_path / "s.sock")) == tmp_path / "s.sock"
    auto = local_socket_path("auto")
    assert auto is not None and not auto.exists()
    assert not os.lstat(auto.parent).st_mode & 0o022


def _bad_socket_path(tmp_path: Path, kind: str) -> Path:
    if kind == "a_regular_file":
        path = tmp_path / "notes.txt"
        path.write_text("keep me")
        return path
    if kind == "a_missing_folder":
        return tmp_path / "missing" / "s.sock"
    return tmp_path / ("x" * 120 + ".sock")  # longer than AF_UNIX's 108 bytes


BAD_SOCKET_PATHS = ["a_regular_file", "a_missing_folder", "too_long"]


def _serve_at(mixed: Path, path: Path) -> tuple[int, str]:
    """``mrecord serve m=MIXED --local-socket PATH`` in-process (it must fail to start):
    (exit code, output)."""
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    result = CliRunner().invoke(cli, ["serve", f"m={mixed}", "--local-socket", str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize("kind", BAD_SOCKET_PATHS)
def test_serve_refuses_a_socket_path_it_cannot_use(mixed: Path, tmp_path: Path, kind: str) -> None:
    path = _bad_socket_path(tmp_path, kind)
    code, output = _serve_at(mixed, path)
    assert code != 0 and "Traceback" not in output
    if kind == "a_regular_file":
        assert path.read_text() == "keep me"  # never removed: only a stale socket is


@pytest.mark.parametrize("kind", BAD_SOCKET_PATHS)
def test_serve_names_the_socket_path_it_cannot_use(mixed: Path, tmp_path: Path, kind: str) -> None:
    path = _bad_socket_path(tmp_path, kind)
    _code, output = _serve_at(mixed, path)
    error = output.split("same-host readers:")[-1].split("\n", 1)[-1]
    assert str(path) in error or "--local-socket" in error


def _start_serve(mixed: Path, sock_path: Path) -> tuple[Any, str, dict[str, Any]]:
    """``mrecord serve m=MIXED --local-socket SOCK_PATH`` on a free port, once it answers:
    (process, url, GET /api/datasets/m)."""
    import json
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable, "-m", "mrecord.cli.main", "serve", f"m={mixed}",
        "--port", str(port), "--local-socket", str(sock_path),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/api/datasets/m") as a:
            return proc, url, json.load(a)
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else "mrecord serve died")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("mrecord serve did not answer")


def test_the_serve_command_serves_the_socket_it_was_given(mixed: Path, tmp_path: Path) -> None:
    sock_path = tmp_path / "serve.sock"
    proc, url, info = _start_serve(mixed, sock_path)
    try:
        assert info["local_socket"] == str(sock_path)
        assert stat.S_IMODE(os.lstat(sock_path).st_mode) == 0o600
        ds = mrecord.RemoteDataset(url, "m", transport="local", shuffle=Shuffle.INFILE)
        assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=Shuffle.INFILE), 1)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = proc.communicate(timeout=30)
    assert f"same-host readers: {sock_path}" in err
    assert not sock_path.exists()  # removed on the way out


def test_sigterm_removes_the_socket_too(mixed: Path, tmp_path: Path) -> None:
    sock_path = tmp_path / "serve.sock"
    proc, _url, _info = _start_serve(mixed, sock_path)
    proc.terminate()  # what systemd, docker and kubernetes send
    proc.communicate(timeout=30)
    assert not sock_path.exists()
