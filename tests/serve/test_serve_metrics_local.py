"""``GET /metrics`` counts the blocks of the same-host socket too, and the server logs one
structured line per client session (issue 28, "Operable")."""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from mrecord import RemoteDataset, Shuffle
from mrecord.serve.server.run import ServerThread
from mrecord.testing.mixed import write_mixed

TOKEN = "metrics-token"
ROWS = 120
COLUMNS = ["id", "vec", "blob", "text", "points"]


def _metrics(server: ServerThread) -> dict[str, float]:
    request = urllib.request.Request(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def _value_bytes(row: dict[str, object]) -> int:
    """Bytes of one row's values as the reader holds them."""
    total = 0
    for value in row.values():
        if isinstance(value, np.ndarray) and value.dtype.kind == "U":  # a string, as numpy
            total += len(str(value[()]).encode("utf-8"))
        elif isinstance(value, bytes):
            total += len(value)
        else:
            total += np.asarray(value).nbytes
    return total


def test_same_host_socket_reads_are_counted_in_metrics(tmp_path: Path) -> None:
    data = write_mixed(tmp_path / "mixed.mrecord", ROWS, seed=2)
    with ServerThread({"mixed": data}, token=TOKEN) as server:
        ds = RemoteDataset(
            server.url, "mixed", columns_list=COLUMNS, shuffle=Shuffle.GLOBAL, token=TOKEN,
            transport="local",
        )  # fmt: skip
        assert ds.transport == "local"
        rows = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
        ds.close()
        got = _metrics(server)
    assert len(rows) == ROWS
    assert got['mrecord_serve_rows_total{dataset="mixed"}'] == ROWS
    # Bytes of the values delivered (written into the reader's memory or mapped from a
    # shared file): exactly what the reader got.
    assert got['mrecord_serve_bytes_total{dataset="mixed"}'] == sum(_value_bytes(r) for r in rows)


def test_one_structured_log_line_per_client_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = write_mixed(tmp_path / "mixed.mrecord", 20, seed=2)
    caplog.set_level(logging.INFO, logger="mrecord.serve")
    with ServerThread({"mixed": data}, token=TOKEN, local_socket=False) as server:
        ds = RemoteDataset(server.url, "mixed", columns_list=["id"], token=TOKEN)
        it = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
        assert sum(1 for _ in range(2) for _ in it) == 40  # two epochs, many requests
        ds.close()
        _metrics(server)
    sessions = [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "mrecord.serve" and '"client_session"' in r.getMessage()
    ]
    # Many requests from one address within the idle time: one session, one line.
    assert len(sessions) == 1, sessions
    assert sessions[0]["event"] == "client_session"
    assert sessions[0]["client"] == "127.0.0.1"
    assert sessions[0]["path"].startswith("/api/datasets")
