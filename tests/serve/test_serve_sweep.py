"""A random order over small rows beyond the server's memory is read a window at a time,
each window's rows asked for in ascending order and put back in order by the reader
(``GET .../sweep``, ``serve/client/sweep.py``): the same rows, in the same order, as
``MindDataset`` and as requests in the order's own sequence; the server's reads then go
through its files in file order instead of jumping for every row."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
import mrecord.serve.client.dataset as client_dataset
from mrecord import DatasetReader, MindDataset, Shuffle, config
from mrecord.block import Block
from mrecord.errors import CorruptFileError, DatasetServerError
from mrecord.pool import PoolStopped
from mrecord.serve.client.sweep import read_ascending
from mrecord.serve.client.transports.base import NotOffered
from mrecord.serve.client.transports.http import HttpTransport
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.layout import sweep_window
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.sweeping import (
    SMALL_ROWS,
    SMALL_WINDOW_BUDGET,
    read_ids,
    sweeping,
    write_small_rows,
)

ROWS = SMALL_ROWS
SEED = 7
STEP = 16  # rows per request (the server's max_block_rows)
TRANSPORTS = ["local", "http"] if local_protocol.available() else ["http"]
BUDGET = SMALL_WINDOW_BUDGET  # a reader's memory that holds windows of 100 rows


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(write_small_rows(tmp_path_factory.mktemp("sweep"))[0])


@pytest.fixture(scope="module")
def server(files: Path) -> Iterator[ServerThread]:
    with ServerThread({"t": files}, limits=Limits(max_block_rows=STEP)) as srv:
        yield srv


def _beyond_memory(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """The server's files beyond its memory on a device whose requests are dear, the
    client holding ``BUDGET`` bytes; returns the ids of every read the server makes."""
    sweeping(monkeypatch, BUDGET)
    monkeypatch.setattr(client_dataset, "memory_budget", lambda: BUDGET)
    return read_ids(monkeypatch)


def _rows(ds: Any, epochs: int = 2) -> list[tuple[int, list[float]]]:
    config.set_seed(SEED)
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True, columns=["id", "vec"])
    out = []
    for _ in range(epochs):
        for row_id, vec in it:
            assert np.all(vec == row_id)  # each row's own values
            out.append((int(row_id), vec.tolist()))
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shards", [None, 2])
def test_a_global_order_is_read_in_ascending_windows_with_the_same_rows(
    server: ServerThread, files: Path, transport: str, shards: int | None
) -> None:
    split: dict[str, Any] = {} if shards is None else {"num_shards": shards, "shard_id": 1}
    want = _rows(MindDataset(files, shuffle=Shuffle.GLOBAL, **split))
    plain = _remote(server, transport, **split)
    assert _rows(plain) == want
    with pytest.MonkeyPatch.context() as monkeypatch:
        reads = _beyond_memory(monkeypatch)
        remote = _remote(server, transport, **split)
        assert remote.sweep_rows(rows=ROWS) == 100  # the server's rule, for our memory
        got = _rows(remote)
    assert got == want
    assert reads and all(len(ids) <= STEP for ids in reads)
    assert all(bool(np.all(np.diff(ids) > 0)) for ids in reads)  # ascending, every one
    # windows of ~100 rows: consecutive requests climb, then start again lower
    restarts = sum(int(b[0] < a[-1]) for a, b in itertools.pairwise(reads))
    assert restarts >= len(want) // 100 - 1


_OPENED: list[Any] = []
"""The RemoteDatasets a test opened (closed after it: their connections)."""


@pytest.fixture(autouse=True)
def _close_remotes() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


def _remote(server: ServerThread, transport: str, **kwargs: Any) -> Any:
    ds = client_dataset.RemoteDataset(
        server.url, "t", shuffle=Shuffle.GLOBAL, transport=transport, **kwargs
    )
    _OPENED.append(ds)
    return ds


def test_file_order_and_a_server_within_its_memory_never_sweep(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _remote(server, "http")
    assert plain.sweep_rows(rows=ROWS) == 0  # the files fit the server's memory
    asked = _sweep_questions(monkeypatch)
    reads = _beyond_memory(monkeypatch)
    ordered = client_dataset.RemoteDataset(server.url, "t", shuffle=False)
    _OPENED.append(ordered)
    ids = [row for row, _ in _rows(ordered, epochs=1)]
    assert ids == list(range(ROWS))
    # blocks of the order as it goes (several in flight), no window of it read at once
    assert sorted(np.concatenate(reads).tolist()) == ids
    assert all(bool(np.all(np.diff(r) == 1)) for r in reads)
    assert asked == []  # file order: the server is not even asked


def _sweep_questions(monkeypatch: pytest.MonkeyPatch, offered: bool = True) -> list[str]:
    """Every sweep question the readers ask from now on; ``offered=False``: answered as
    a server older than the sweep answer does."""
    asked: list[str] = []
    real = HttpTransport.describe

    def spy(self: HttpTransport, part: str) -> dict[str, Any]:
        if part.startswith("sweep"):
            asked.append(part)
            if not offered:
                raise NotOffered("an older server")
        return real(self, part)

    monkeypatch.setattr(HttpTransport, "describe", spy)
    return asked


def test_a_server_without_the_sweep_answer_is_read_as_the_rows_come(
    server: ServerThread, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _sweep_questions(monkeypatch, offered=False)
    reads = _beyond_memory(monkeypatch)
    remote = _remote(server, "http")
    got = _rows(remote)
    monkeypatch.undo()
    assert got == _rows(MindDataset(files, shuffle=Shuffle.GLOBAL))
    assert len(asked) == 1  # asked once, then not again
    assert not all(bool(np.all(np.diff(ids) > 0)) for ids in reads)  # the order's own


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        finally:
            exc.close()  # its socket, else closed by the garbage collector, with a warning


def test_the_sweep_answer(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    base = f"{server.url}/api/datasets/t/sweep"
    assert _get(f"{base}?columns=id,vec&rows={ROWS}&budget={BUDGET}") == (200, {"window": 0})
    _beyond_memory(monkeypatch)
    assert _get(f"{base}?columns=id,vec&rows={ROWS}&budget={BUDGET}") == (200, {"window": 100})
    assert _get(f"{base}?columns=id,vec&rows=40&budget={BUDGET}") == (200, {"window": 40})
    assert _get(f"{base}?columns=id&rows={ROWS}&budget={BUDGET}")[1]["window"] == (
        BUDGET // (dataset_reader._SWEEP_WINDOWS * (dataset_reader._SWEEP_ROW_BYTES + 8))
    )
    status, body = _get(f"{base}?budget=-1")
    assert status == 400 and "budget must be >= 0" in body["error"]["message"]
    status, body = _get(f"{base}?columns=nope&budget=1")
    assert status == 400 and body["error"]["code"] == "unknown_column"


def test_a_malformed_sweep_answer_names_the_server() -> None:
    for answer in ({"window": -3}, {"window": "many"}, ["window"], {}):
        with pytest.raises(DatasetServerError, match=r"h:1: malformed sweep answer"):
            sweep_window(answer, "h:1")


def test_read_ascending_asks_in_ascending_order_and_puts_rows_back() -> None:
    asked: list[list[int]] = []
    lock = threading.Lock()

    def read(ids: np.ndarray) -> Block:
        with lock:
            asked.append(ids.tolist())
        return Block({"x": ids * 10}, ids.copy())

    rng = np.random.default_rng(3)
    dense = rng.integers(0, 1000, 700)  # repeats too; ordered by a table of the range
    thin = rng.integers(0, 10**9, 700)  # spread thin: ordered by sorting
    for ids in (dense, thin):
        for in_flight in (1, 3):
            asked.clear()
            block = read_ascending(read, ids, step=64, in_flight=in_flight)
            np.testing.assert_array_equal(block.row_ids, ids)
            np.testing.assert_array_equal(np.asarray(block.columns["x"]), ids * 10)
            # every distinct id asked for once, in requests of ascending ids
            # (requests in flight together may be recorded in any order)
            assert [v for part in sorted(asked) for v in part] == sorted(set(ids.tolist()))
            assert all(len(part) <= 64 and part == sorted(set(part)) for part in asked)
    stop = threading.Event()
    stop.set()
    with pytest.raises(PoolStopped):
        read_ascending(read, ids, step=64, in_flight=1, stop=stop)


@pytest.mark.torch
def test_torch_streaming_from_a_server_sweeps_with_the_same_batches(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mrecord.torch`` over a served dataset asks for its windows as RemoteDataset does
    (``ServedReader.sweep_rows``), and yields the batches it yields asking as they come."""
    torch = pytest.importorskip("torch")
    from mrecord.torch import StreamingDataLoader, StreamingDataset

    url = f"{server.url}/api/datasets/t"

    def batches() -> list[list[int]]:
        ds = StreamingDataset(url, shuffle=Shuffle.GLOBAL, batch_size=8, rank=1, world_size=2)
        out = []
        for batch in StreamingDataLoader(ds, num_workers=0):
            assert torch.equal(batch["vec"][:, 0].long(), batch["id"])
            out.append(batch["id"].tolist())
        return out

    plain = batches()
    reads = _beyond_memory(monkeypatch)
    assert batches() == plain
    assert len({i for b in plain for i in b}) == ROWS // 2
    # its first read is one batch (one request, as asked); then windows, ascending
    assert len(reads) > 2 and all(bool(np.all(np.diff(ids) > 0)) for ids in reads[1:])


def test_an_order_that_fits_one_window_is_read_in_two(
    server: ServerThread, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader whose memory holds the whole epoch still reads it in two windows: the
    second is asked for while the first is handed out, and the first rows wait for half
    the epoch's reads."""
    _beyond_memory(monkeypatch)
    monkeypatch.setattr(client_dataset, "memory_budget", lambda: 100 * BUDGET)
    windows: list[int] = []
    real = read_ascending

    def spy(read: Any, ids: np.ndarray, **kwargs: Any) -> Block:
        windows.append(len(ids))
        return real(read, ids, **kwargs)

    monkeypatch.setattr(client_dataset, "read_ascending", spy)
    remote = _remote(server, "http")
    assert remote.sweep_rows(rows=ROWS) == ROWS  # what the memory would hold
    got = _rows(remote, epochs=1)
    monkeypatch.undo()
    assert got == _rows(MindDataset(files, shuffle=Shuffle.GLOBAL), epochs=1)
    assert windows == [ROWS // 2, ROWS // 2]


@pytest.mark.parametrize("k", [1, 99, 250, 401])
def test_a_resume_inside_a_window_yields_the_rest_of_the_epoch(
    server: ServerThread, files: Path, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = [row for row, _ in _rows(_remote(server, "http"), epochs=1)]
    reads = _beyond_memory(monkeypatch)
    config.set_seed(SEED)
    it = _remote(server, "http").create_tuple_iterator(num_epochs=1, output_numpy=True)
    head = [int(row[0]) for _, row in zip(range(k), it, strict=False)]
    state = json.loads(json.dumps(it.state_dict()))
    it.stop()
    resumed = _remote(server, "http").create_tuple_iterator(num_epochs=1, output_numpy=True)
    resumed.load_state_dict(state)
    rest = [int(row[0]) for row in resumed]
    assert head + rest == full
    assert reads and all(bool(np.all(np.diff(ids) > 0)) for ids in reads)  # it swept


def test_a_damaged_chunk_on_the_server_fails_where_block_reads_do(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window that meets a damaged chunk is read again block by block: the rows before
    the damage come out, never a row of the damaged chunk, then the error."""
    folder = tmp_path / "damaged"
    folder.mkdir()
    for part in files.parent.iterdir():
        if part.name.startswith("t.mrecord") and part.is_file():
            (folder / part.name).write_bytes(part.read_bytes())
    path = folder / files.name
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        offset, length, _ = shard.chunk_place(3, shard.field_index("vec"))
        starts = shard.page_starts_list
        lost = set(range(starts[3], starts[4]))
    with open(path, "r+b") as f:
        f.seek(offset + length // 2)
        byte = f.read(1)
        f.seek(offset + length // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    order = [row for row, _ in _rows(MindDataset(files, shuffle=Shuffle.GLOBAL), epochs=1)]
    _beyond_memory(monkeypatch)
    got: list[int] = []
    with ServerThread({"t": path}, limits=Limits(max_block_rows=STEP)) as srv:
        config.set_seed(SEED)
        remote = _remote(srv, "http")
        assert remote.sweep_rows(rows=ROWS) == 100
        with pytest.raises(CorruptFileError, match=r"page 3, field 'vec'"):
            for row in remote.create_tuple_iterator(num_epochs=1, output_numpy=True):
                got.append(int(row[0]))
    assert got == order[: len(got)] and not lost & set(got)
