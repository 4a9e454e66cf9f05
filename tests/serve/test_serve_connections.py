"""`mrecord serve` over real sockets: connections that send nothing, and the bound address.

These run uvicorn in a thread (:class:`~mrecord.serve.server.run.ServerThread`): what is
checked happens below the ASGI app (sockets held open, the ``Host`` a client sends).
"""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest

from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 40


@pytest.fixture(scope="module")
def mixed(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=3)


def _status(host: str, port: int, path: str = "/api/datasets") -> int:
    conn = http.client.HTTPConnection(host, port, timeout=20)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server closes ``sock`` within its timeout (end of stream or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connections_that_never_send_a_request_are_dropped(mixed: Path) -> None:
    limits = Limits(header_timeout_s=0.5)
    with ServerThread({"m": mixed}, limits=limits, max_connections=4, local_socket=False) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(b"GET /api/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow")  # never ends
        try:
            for sock in [*idle, slow]:
                sock.settimeout(10)
                assert _closed_by_server(sock)
            # Every slot is free again: five real requests in a row are answered.
            assert [_status("127.0.0.1", srv.port) for _ in range(5)] == [200] * 5
        finally:
            for sock in [*idle, slow]:
                sock.close()


def test_a_connection_that_sends_requests_is_kept_between_them(mixed: Path) -> None:
    """The header deadline is per request: a reader that keeps asking keeps its connection."""
    limits = Limits(header_timeout_s=5.0)
    with ServerThread({"m": mixed}, limits=limits, local_socket=False) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            for _ in range(3):
                conn.request("GET", "/api/datasets")
                response = conn.getresponse()
                assert response.status == 200
                response.read()
                assert response.will_close is False
            first = conn.sock
            conn.request("GET", "/api/datasets/m")
            assert conn.getresponse().status == 200
            assert conn.sock is first  # the same connection all along
        finally:
            conn.close()


def test_a_server_bound_to_another_loopback_address_answers_it(mixed: Path) -> None:
    with ServerThread({"m": mixed}, host="127.0.0.2", local_socket=False) as srv:
        assert srv.url.startswith("http://127.0.0.2:")
        assert _status("127.0.0.2", srv.port) == 200
        assert _status("127.0.0.2", srv.port, "/api/datasets/m/rows?stop=2") == 200


@pytest.mark.parametrize(
    ("bound", "admitted", "refused"),
    [
        ("127.0.0.2", "127.0.0.2:8750", "127.0.0.3:8750"),
        ("::1", "[::1]:8750", "127.0.0.2:8750"),
        ("0.0.0.0", "localhost:8750", "0.0.0.0:8750"),
    ],
)
def test_the_bound_loopback_address_and_no_other_is_admitted(
    bound: str, admitted: str, refused: str
) -> None:
    from mrecord.serve.server.security import host_ok, loopback_hosts

    hosts = loopback_hosts(bound)
    assert host_ok(admitted, hosts)
    assert not host_ok(refused, hosts)
    assert not host_ok("evil.example:8750", hosts)
