"""What an operator of ``mrecord serve`` relies on: ``/healthz``, ``/metrics`` that count
what was served, TLS, and a client that warns before a token travels in clear text."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.certs import self_signed
from mrecord import MindDataset, RemoteDataset
from mrecord.errors import DatasetServerError, InsecureTokenWarning
from mrecord.serve.buffers import BufferPool
from mrecord.serve.client.transports.http import HttpTransport
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 150
TOKEN = "ops-token"


@pytest.fixture(scope="module")
def data(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=9)


def _get(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        return str(answer.read().decode())


def _samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line of a Prometheus text answer."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_healthz_is_open_and_metrics_need_the_token(data: Path) -> None:
    with ServerThread({"mixed": data}, token=TOKEN) as server:
        assert _get(server.url + "/healthz") == "ok"
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(server.url + "/metrics")
        assert refused.value.code == 401
        refused.value.close()
        assert "mrecord_serve_requests_in_flight" in _get(server.url + "/metrics", TOKEN)


def test_metrics_count_what_was_served(data: Path) -> None:
    with ServerThread({"mixed": data}, token=TOKEN, local_socket=False) as server:
        ds = RemoteDataset(server.url, "mixed", token=TOKEN, transport="http")
        got = ds.read_rows(np.arange(100), ["id", "blob"])
        ds.read_rows(np.arange(30), ["id"])
        with pytest.raises(Exception):  # noqa: B017 - any error answer; its code is counted
            ds.read_rows(np.array([ROWS + 5]), ["id"])
        ds.close()
        metrics = _samples(_get(server.url + "/metrics", TOKEN))
    assert metrics['mrecord_serve_rows_total{dataset="mixed"}'] == 130
    assert metrics['mrecord_serve_bytes_total{dataset="mixed"}'] > sum(
        len(b) for b in got.columns["blob"]
    )
    assert metrics['mrecord_serve_errors_total{code="bad_ids"}'] == 1
    # info + 3 block requests (+ the /metrics request itself, in flight while rendered)
    assert metrics['mrecord_serve_request_duration_seconds_bucket{le="+Inf"}'] == 4
    assert metrics["mrecord_serve_requests_in_flight"] == 1
    assert metrics["mrecord_serve_clients"] == 1


@pytest.fixture(scope="module")
def tls_server(
    data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, Path]]:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"), "127.0.0.1")
    with ServerThread(
        {"mixed": data}, token=TOKEN, local_socket=False, tls_cert=cert, tls_key=key
    ) as server:
        yield server, cert


def test_https_with_the_servers_certificate_reads_mind_datasets_rows(
    tls_server: tuple[ServerThread, Path], data: Path
) -> None:
    server, cert = tls_server
    assert server.url.startswith("https://")
    ds = RemoteDataset(
        server.url, "mixed", ["id"], token=TOKEN, cafile=str(cert), shuffle=False
    )
    assert ds.transport == "http"
    got = [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    local = MindDataset(data, ["id"], shuffle=False)
    want = [int(r[0]) for r in local.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert got == want


def test_an_untrusted_certificate_is_refused_at_once_with_what_to_do(
    tls_server: tuple[ServerThread, Path],
) -> None:
    server, _ = tls_server
    with pytest.raises(DatasetServerError, match=r"not trusted.*cafile"):
        RemoteDataset(server.url, "mixed", token=TOKEN, retries=0)


def test_plain_http_to_a_tls_server_gets_no_data(tls_server: tuple[ServerThread, Path]) -> None:
    server, _ = tls_server
    with pytest.raises(DatasetServerError):
        RemoteDataset(server.url.replace("https://", "http://"), "mixed", token=TOKEN, retries=0)


def test_a_token_over_plain_http_to_another_host_warns_once() -> None:
    def transport(url: str, token: str | None) -> HttpTransport:
        return HttpTransport(
            url, "d", token=token, timeout=1, connections=1, buffers=BufferPool(keep=0)
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transport("http://127.0.0.1:1", "t")  # this machine: nothing to warn about
        transport("https://10.231.9.9:1", "t")  # encrypted
        transport("http://10.231.9.9:1", None)  # no token
        assert caught == []
        transport("http://10.231.9.9:1", "t")
        transport("http://10.231.9.9:2", "t")  # the same host again: once is enough
    assert [type(w.message) for w in caught] == [InsecureTokenWarning]
    assert "10.231.9.9" in str(caught[0].message) and "https" in str(caught[0].message)
    assert issubclass(InsecureTokenWarning, UserWarning)
