"""A bounded load test of ``mrecord serve``: N clients, each sending M block requests.

Used by ``benchmarks/bench_serve.py`` (16 clients x 200 requests, latencies printed)
and, at a small scale, by the tests (no errors allowed). It stops by itself: every
client sends exactly ``requests`` requests, each with a timeout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mrecord.serve.protocol.wire import decode_block, encode_request

__all__ = ["LoadResult", "run_load"]


@dataclass
class LoadResult:
    """Latencies (seconds) of the requests that succeeded, and the errors of those that did not."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """p50/p99 latency in ms, requests/s, rows/s and MB/s."""
        lat = np.array(self.latencies or [float("nan")]) * 1e3
        return {
            "requests": len(self.latencies),
            "errors": len(self.errors),
            "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "requests_per_s": len(self.latencies) / self.seconds if self.seconds else 0.0,
            "rows_per_s": self.rows / self.seconds if self.seconds else 0.0,
            "mb_per_s": self.bytes / 1e6 / self.seconds if self.seconds else 0.0,
        }


def run_load(
    url: str,
    dataset: str,
    *,
    clients: int = 16,
    requests: int = 200,
    ids_per_request: int = 64,
    num_rows: int,
    token: str | None = None,
    seed: int = 0,
) -> LoadResult:
    """``clients`` threads each send ``requests`` POST /blocks of random ids; collect timings."""
    import httpx

    result = LoadResult()
    lock = threading.Lock()
    headers = {"authorization": f"Bearer {token}"} if token else {}
    path = f"{url.rstrip('/')}/api/datasets/{dataset}/blocks"

    def client(index: int) -> None:
        rng = np.random.default_rng([seed, index])
        with httpx.Client(headers=headers, timeout=30.0) as http:
            for _ in range(requests):
                ids = rng.integers(0, num_rows, size=ids_per_request)
                start = time.perf_counter()
                try:
                    response = http.post(path, content=encode_request(ids, None))
                    ok = response.status_code == 200
                    if ok:
                        rows, _ = decode_block(bytearray(response.content))
                        ok = rows == len(ids)
                    error = None if ok else f"HTTP {response.status_code}: {response.text[:200]}"
                except Exception as exc:  # a load test reports every failure, whatever it is
                    error = f"{type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - start
                with lock:
                    if error is None:
                        result.latencies.append(elapsed)
                        result.rows += len(ids)
                        result.bytes += len(response.content)
                    else:
                        result.errors.append(error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = time.perf_counter() - start
    return result
