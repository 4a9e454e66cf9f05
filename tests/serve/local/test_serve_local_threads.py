"""The same-host server's read threads: a read of a dataset larger than the server's
memory waits on the device, so it is answered on a read thread while the loop serves
the other connections; the rows are the same, and a dataset in memory is still
answered in the loop."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import MindDataset, Shuffle
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread
from tests.serve.local.helpers import ROWS, _remote, _rows

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)

HELD_ID = 7
"""A read asking for this row alone, three times, waits until the test lets it go."""


@pytest.fixture
def reading_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the threads the server's reads ran on."""
    names: list[str] = []
    real = DatasetReader.read_rows

    def spy(self: DatasetReader, ids: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(threading.current_thread().name)
        return real(self, ids, *args, **kwargs)

    monkeypatch.setattr(DatasetReader, "read_rows", spy)
    yield names


def _beyond_memory(monkeypatch: pytest.MonkeyPatch, beyond: bool) -> None:
    monkeypatch.setattr(ServedDataset, "beyond_memory", lambda self: beyond)


@pytest.mark.parametrize("shard", [None, 1])
def test_reads_beyond_memory_are_answered_on_read_threads_with_the_same_rows(
    mixed: Path, monkeypatch: pytest.MonkeyPatch, reading_threads: list[str], shard: int | None
) -> None:
    _beyond_memory(monkeypatch, True)
    kwargs: dict[str, Any] = {"shuffle": Shuffle.GLOBAL, "num_parallel_workers": 4}
    if shard is not None:
        kwargs.update(num_shards=3, shard_id=shard)
    want = _rows(MindDataset(mixed, **kwargs))
    with ServerThread({"mixed": mixed}) as server:
        remote = _remote(server, "local", **kwargs)
        got = _rows(remote)
    assert got == want
    assert len(got) == 2 * (ROWS if shard is None else ROWS // 3)
    served = [name for name in reading_threads if name.startswith("mrecord-local")]
    assert served and all(name.startswith("mrecord-local-read") for name in served)


def test_reads_of_a_dataset_in_memory_stay_in_the_loop(
    mixed: Path, monkeypatch: pytest.MonkeyPatch, reading_threads: list[str]
) -> None:
    _beyond_memory(monkeypatch, False)
    with ServerThread({"mixed": mixed}) as server:
        block = _remote(server, "local", shuffle=False).read_rows([3, 1, 2], ["id"])
    assert np.asarray(block.columns["id"]).tolist() == [3, 1, 2]
    served = [name for name in reading_threads if name.startswith("mrecord-local")]
    assert served and set(served) == {"mrecord-local"}


def test_a_read_waiting_on_the_device_holds_up_no_other_reader(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One reader's read is held (as a read from a slow device would be); another
    reader's reads are answered meanwhile, and the held one gets its rows after."""
    _beyond_memory(monkeypatch, True)
    held, let_go = threading.Event(), threading.Event()
    real = DatasetReader.read_rows

    def slow(self: DatasetReader, ids: Any, *args: Any, **kwargs: Any) -> Any:
        if np.asarray(ids).tolist() == [HELD_ID] * 3:
            held.set()
            assert let_go.wait(60), "the test never let the held read go"
        return real(self, ids, *args, **kwargs)

    monkeypatch.setattr(DatasetReader, "read_rows", slow)
    with ServerThread({"mixed": mixed}) as server:
        first, second = _remote(server, "local"), _remote(server, "local")
        got: dict[str, Any] = {}
        waiting = threading.Thread(
            target=lambda: got.update(held=first.read_rows([HELD_ID] * 3, ["id"])), daemon=True
        )
        waiting.start()
        try:
            assert held.wait(30), "the held read never reached the server's reader"
            for _ in range(5):  # answered while the first reader's read is held
                block = second.read_rows([5, 0, 9], ["id"])
                assert np.asarray(block.columns["id"]).tolist() == [5, 0, 9]
            assert "held" not in got
        finally:
            let_go.set()
            waiting.join(60)
    assert np.asarray(got["held"].columns["id"]).tolist() == [HELD_ID] * 3


@pytest.mark.parametrize("beyond", [True, False])
def test_a_reader_keeps_as_many_reads_in_flight_as_the_socket_answers_at_once(
    mixed: Path, monkeypatch: pytest.MonkeyPatch, beyond: bool
) -> None:
    """The info answer tells a same-host reader how many reads the socket answers at
    once (the read threads, beyond memory; else one); the reader keeps that many in
    flight (two at least)."""
    _beyond_memory(monkeypatch, beyond)
    with ServerThread({"mixed": mixed}, limits=Limits(read_threads=6)) as server:
        with urllib.request.urlopen(f"{server.url}/api/datasets/mixed") as answer:
            info = json.load(answer)
        remote = _remote(server, "local")
        in_flight = remote._transport.in_flight
    assert info["local_reads"] == (6 if beyond else 1)
    assert in_flight == (6 if beyond else 2)
