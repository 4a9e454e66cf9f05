"""The server reads ahead for its clients (issue 28): a ``RemoteDataset`` over HTTP tells
the server the row ids of the blocks after those in flight (its order is a pure
function), and the server hands them to the storage read-ahead
(``DatasetReader.will_need``), counted in ``/metrics``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, RemoteDataset, Shuffle
from mrecord.pipeline.sources.lookahead import hinting
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread
from mrecord.testing.mixed import write_mixed

ROWS = 300
BLOCK = 16


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_hinting_tells_each_block_ahead_blocks_before_it_is_read() -> None:
    events: list[tuple[str, int]] = []
    chunks = [np.array([k]) for k in range(10)]
    for ids in hinting(iter(chunks), 3, lambda ids: events.append(("hint", int(ids[0])))):
        events.append(("read", int(ids[0])))
    assert [k for e, k in events if e == "read"] == list(range(10))  # nothing lost, in order
    assert [k for e, k in events if e == "hint"] == list(range(3, 10))  # 0-2 are read at once
    for k in range(3, 10):  # hinted before block k - 3 was handed on to be read
        assert events.index(("hint", k)) < events.index(("read", k - 3))


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the memory budget the served datasets' readers report."""

    def set_budget(nbytes: int) -> None:
        monkeypatch.setattr(DatasetReader, "memory_budget", property(lambda self: nbytes))

    return set_budget


def test_the_server_reads_ahead_the_blocks_a_client_will_ask_for(
    tmp_path: Path, budget: Callable[[int], None]
) -> None:
    budget(8 << 30)
    served = ServedDataset.open("mixed", write_mixed(tmp_path / "mixed.mrecord", ROWS, seed=1))
    lock = threading.Lock()
    hinted: list[tuple[list[int], list[str]]] = []
    original = served.reader.will_need

    def will_need(ids: Any, columns: Any = None) -> None:
        with lock:
            hinted.append((np.asarray(ids).tolist(), list(columns)))
        original(ids, columns)

    served.reader.will_need = will_need  # type: ignore[method-assign]
    with ServerThread({"mixed": served}, local_socket=False) as server:
        ds = RemoteDataset(
            server.url, "mixed", columns_list=["id", "blob"], shuffle=Shuffle.GLOBAL,
            transport="http", num_parallel_workers=2,
        )  # fmt: skip
        ds._block_rows = BLOCK  # many blocks in a small epoch
        got = [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
        ds.close()  # the hints sent so far have been answered
        metrics = server.app.metrics
        _wait_for(
            lambda: sum(len(ids) for ids, _ in hinted) == metrics.hinted_rows.get("mixed", 0),
            "the server taking every hint it received",
        )
        text = metrics.render()
    assert sorted(got) == list(range(ROWS))  # hints change nothing read
    ahead = 2 + 2  # blocks in flight (num_parallel_workers) + 2: read at once, not hinted
    expected = [got[i : i + BLOCK] for i in range(ahead * BLOCK, ROWS, BLOCK)]
    assert sorted(ids for ids, _ in hinted) == sorted(expected)  # exactly the coming blocks
    assert all(columns == ["id", "blob"] for _, columns in hinted)
    assert f'mrecord_serve_hinted_rows_total{{dataset="mixed"}} {ROWS - ahead * BLOCK}' in text
    served.close()


def test_a_server_short_of_memory_answers_hints_and_does_not_take_them(
    tmp_path: Path, budget: Callable[[int], None]
) -> None:
    """Under 1 GiB to fill, read-ahead into the page cache and the blocks being read
    evict each other (memory.py): the hints are counted, answered, not taken, and the
    rows read are the same."""
    budget(200 << 20)
    served = ServedDataset.open("mixed", write_mixed(tmp_path / "mixed.mrecord", ROWS, seed=1))
    taken: list[int] = []
    served.reader.will_need = lambda ids, columns=None: taken.append(len(ids))  # type: ignore[method-assign]
    with ServerThread({"mixed": served}, local_socket=False) as server:
        ds = RemoteDataset(
            server.url, "mixed", columns_list=["id"], transport="http", num_parallel_workers=2
        )
        ds._block_rows = BLOCK
        got = sorted(int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True))
        ds.close()
        hinted = server.app.metrics.hinted_rows.get("mixed", 0)
    assert got == list(range(ROWS))
    assert hinted == ROWS - 4 * BLOCK and taken == []
    served.close()


def test_no_hints_when_turned_off(tmp_path: Path) -> None:
    data = write_mixed(tmp_path / "mixed.mrecord", 100, seed=1)
    with ServerThread({"mixed": data}, local_socket=False) as server:
        ds = RemoteDataset(server.url, "mixed", transport="http", read_ahead_hints=False)
        ds._block_rows = BLOCK
        assert len(list(ds.create_tuple_iterator(num_epochs=1))) == 100
        ds.close()
        assert server.app.metrics.hinted_rows == {}


def test_a_torch_streaming_dataset_hints_each_next_read(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("torch")
    from mrecord.torch import StreamingDataset

    data = write_mixed(tmp_path / "mixed.mrecord", ROWS, seed=1)
    served = ServedDataset.open("mixed", data)
    lock = threading.Lock()
    hinted: list[list[int]] = []
    original = served.reader.will_need

    def will_need(ids: Any, columns: Any = None) -> None:
        with lock:
            hinted.append(np.asarray(ids).tolist())
        original(ids, columns)

    served.reader.will_need = will_need  # type: ignore[method-assign]
    args: dict[str, Any] = {"seed": 3, "batch_size": 8, "rank": 1, "world_size": 2}
    with ServerThread({"mixed": served}, local_socket=False) as server:
        url = f"{server.url}/api/datasets/mixed"
        ds = StreamingDataset(url, columns=["id"], storage_options={"transport": "http"}, **args)
        got = [int(s["id"]) for s in ds]
        ds._handle.reader._ds.close()  # type: ignore[attr-defined]  # hints sent: answered
        metrics = server.app.metrics
        _wait_for(
            lambda: sum(len(ids) for ids in hinted) == metrics.hinted_rows.get("mixed", 0) > 0,
            "the server taking the hints",
        )
    files = [int(s["id"]) for s in StreamingDataset(data, columns=["id"], **args)]
    assert got == files  # hints change nothing read
    for ids in hinted:  # each hint is rows this rank read next, in its order
        at = got.index(ids[0])
        assert got[at : at + len(ids)] == ids and at > 0
    served.close()
