"""One client cannot starve the others (issue 28, per-client limits): a greedy client with
many block requests in flight holds only its share of the server's read threads, the
others still get answers, and its requests beyond ``client_max_requests`` are ``busy``.

No timing: the greedy client's reads are held at a gate (an event) while the second
client reads; the counts say who got a thread.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mrecord import RemoteDataset
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.wire import encode_request
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread
from mrecord.testing.mixed import write_mixed

GREEDY = "127.0.0.2"  # another loopback address: another client to the server
GREEDY_IDS = [49, 3, 17, 8]
"""What the greedy client asks for (no other read asks for these ids in this order)."""
PARALLEL = 6


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_a_greedy_client_does_not_stop_another_from_progressing(tmp_path: Path) -> None:
    data = write_mixed(tmp_path / "mixed.mrecord", 50, seed=1)
    served = ServedDataset.open("mixed", data)
    gate = threading.Event()
    lock = threading.Lock()
    greedy_reading: list[int] = []
    original = served.reader.read_rows

    def read_rows(ids: Any, *args: Any, **kwargs: Any) -> Any:
        if np.asarray(ids).tolist() == GREEDY_IDS:  # a greedy request: held at the gate
            with lock:
                greedy_reading.append(1)
            gate.wait(120)
        return original(ids, *args, **kwargs)

    served.reader.read_rows = read_rows  # type: ignore[method-assign]
    limits = Limits(read_threads=2, client_read_threads=1, client_max_requests=4)
    statuses: list[int] = []

    with ServerThread({"mixed": served}, limits=limits, local_socket=False) as server:

        def greedy_request() -> None:
            conn = http.client.HTTPConnection(
                "127.0.0.1", server.port, timeout=120, source_address=(GREEDY, 0)
            )
            try:
                body = encode_request(np.array(GREEDY_IDS), ["id"])
                conn.request("POST", "/api/datasets/mixed/blocks", body=body)
                answer = conn.getresponse()
                answer.read()
                with lock:
                    statuses.append(answer.status)
            finally:
                conn.close()

        threads = [threading.Thread(target=greedy_request) for _ in range(PARALLEL)]
        try:
            for t in threads:
                t.start()
            # Its share is one read thread: one request reads (held at the gate), three
            # wait in its own queue, and the two beyond client_max_requests are busy.
            _wait_for(lambda: len(greedy_reading) == 1, "the greedy client's first read")
            _wait_for(lambda: statuses.count(503) == PARALLEL - 4, "busy answers")

            # The other client (127.0.0.1) reads while the greedy one holds its share.
            polite = RemoteDataset(
                server.url, "mixed", columns_list=["id"], transport="http", timeout=60, retries=0
            )
            block = polite.read_rows(np.arange(10, 20))
            polite.close()
            assert block.columns["id"].tolist() == list(range(10, 20))
            assert len(greedy_reading) == 1  # never more than its share at once
        finally:
            gate.set()
            for t in threads:
                t.join(timeout=120)
        assert sorted(statuses) == [200] * 4 + [503] * (PARALLEL - 4)
    served.close()


def test_mrecord_serve_takes_the_client_shares_from_its_options(tmp_path: Path) -> None:
    import json
    import socket
    import subprocess
    import sys
    import urllib.request

    data = write_mixed(tmp_path / "mixed.mrecord", 20, seed=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [
        sys.executable, "-c", "from mrecord.cli.main import main; main()", "serve",
        f"mixed={data}", "--port", str(port), "--local-socket", "off", "--workers", "6",
        "--client-workers", "2", "--client-max-requests", "9",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api/datasets/mixed"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    limits = json.loads(answer.read())["limits"]
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert limits["read_threads"] == 6
    assert limits["client_read_threads"] == 2
    assert limits["client_max_requests"] == 9
