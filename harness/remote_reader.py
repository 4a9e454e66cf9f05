"""A ``RemoteDataset`` reader run in an emulated host: ``python -m harness.remote_reader SPEC``.

``SPEC`` is JSON::

    {"urls": ["http://10.231.0.1:8750"], "dataset": "mixed", "token": "...",
     "cafile": null, "retries": 4, "workers": 2, "block_rows": null,
     "runs": [{"shuffle": "global", "num_shards": 2, "shard_id": 0, "seed": 1,
               "epochs": 1, "column": "id", "state": null, "stop_after": null}],
     "pause": {"after": 100, "ready": "/tmp/r", "go": "/tmp/g", "wait_s": 60},
     "bench": null}

Each run reads ``column`` of every row (in ``epochs`` epochs) and reports the values in
order; with ``state`` it first resumes there (``set_state``); with ``stop_after`` it stops
after that many rows and reports ``get_state(0, stop_after)``. ``pause`` (first run only):
after ``after`` rows, create ``ready`` and wait (at most ``wait_s``) for ``go`` (the
test kills servers meanwhile). ``block_rows`` makes requests smaller than the usual
16 MiB (so that an epoch of a small dataset is many requests).

``bench`` ({"column": "image", "seconds": 5, "latency_blocks": 50}) instead measures:
MB/s of ``column`` for ``seconds`` (from the iterator's creation) and p50 / p99 of 256-row
``read_rows`` requests. One line of JSON is printed at the end: ``{"runs": [...]}`` or
``{"error": "Type: message"}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import mrecord
from mrecord import RemoteDataset, Shuffle, config


def _shuffle(value: Any) -> Any:
    return Shuffle(value) if isinstance(value, str) else value


def _dataset(spec: dict[str, Any], run: dict[str, Any], columns: list[str]) -> RemoteDataset:
    urls = spec["urls"]
    ds = RemoteDataset(
        urls if len(urls) > 1 else urls[0],
        spec.get("dataset", "mixed"),
        columns_list=columns,
        shuffle=_shuffle(run.get("shuffle")),
        num_shards=run.get("num_shards"),
        shard_id=run.get("shard_id"),
        token=spec.get("token"),
        transport="http",
        num_parallel_workers=int(spec.get("workers", 2)),
        retries=int(spec.get("retries", 4)),
        cafile=spec.get("cafile"),
        read_ahead_hints=bool(spec.get("hints", True)),
    )
    if spec.get("block_rows"):
        ds._block_rows = int(spec["block_rows"])  # small requests: many per epoch
    return ds


def _wait_for(pause: dict[str, Any]) -> None:
    Path(pause["ready"]).touch()
    deadline = time.monotonic() + float(pause.get("wait_s", 60))
    while not Path(pause["go"]).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {pause['go']} within {pause.get('wait_s', 60)} s")
        time.sleep(0.02)


def _read(spec: dict[str, Any], run: dict[str, Any], pause: dict[str, Any] | None) -> Any:
    config.set_seed(int(run.get("seed", 1234)))
    if pause is not None:
        config.set_prefetch_size(1)  # little read ahead: the pause falls mid-epoch
    column = run.get("column", "id")
    ds = _dataset(spec, run, [column])
    if run.get("state") is not None:
        ds.set_state(run["state"])
    epochs = int(run.get("epochs", 1))
    stop_after = run.get("stop_after")
    values: list[Any] = []
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    for _ in range(epochs):
        for row in it:
            values.append(np.asarray(row[0]).tolist())
            if pause is not None and len(values) == int(pause["after"]):
                _wait_for(pause)
            if stop_after is not None and len(values) == int(stop_after):
                ds.close()
                return {"values": values, "state": ds.get_state(0, int(stop_after))}
    ds.close()
    return {"values": values}


def drain(
    ds: Any, column: str, seconds: float, max_rows: int | None = None
) -> tuple[int, int, float]:
    """Read ``column`` of every row ``ds`` yields, epoch after epoch, for up to ``seconds``
    (and ``max_rows`` rows, when given), timed from the iterator's creation (ramp-up
    included: a timer started after a warm-up would miss the blocks read ahead meanwhile
    and overstate the rate); ``(bytes of values, rows, seconds)``. The loop of every
    reader the benchmarks compare (served and local). A ``for`` over the iterator is one
    epoch: the next ``for`` starts the next one (until 2026-11-26 this read one epoch
    only, so a small dataset's rate was mostly its ramp-up)."""
    start = time.perf_counter()
    nbytes, rows = 0, 0
    with ds.create_dict_iterator(num_epochs=-1, output_numpy=True) as it:
        while True:
            for row in it:
                rows += 1
                value = row[column]
                nbytes += value.nbytes if isinstance(value, np.ndarray) else len(value)
                out_of_time = time.perf_counter() - start >= seconds
                if out_of_time or (max_rows is not None and rows >= max_rows):
                    return nbytes, rows, time.perf_counter() - start
            if not rows:  # an empty dataset: nothing to wait for
                return 0, 0, time.perf_counter() - start


def _bench(spec: dict[str, Any], bench: dict[str, Any]) -> dict[str, Any]:
    column = bench.get("column", "image")
    ds = _dataset(spec, {"shuffle": _shuffle(bench.get("shuffle", "global"))}, [column])
    seconds = float(bench.get("seconds", 5))
    nbytes, rows, elapsed = drain(ds, column, seconds)
    total = sum(ds.file_row_counts)
    rng = np.random.default_rng(0)
    latencies = []
    for _ in range(int(bench.get("latency_blocks", 40))):
        first = int(rng.integers(0, max(1, total - 256)))
        t0 = time.perf_counter()
        ds.read_rows(np.arange(first, first + 256) % total)
        latencies.append(time.perf_counter() - t0)
    ds.close()
    lat = np.asarray(latencies) * 1e3
    return {
        "mb_s": nbytes / elapsed / 1e6,
        "rows": rows,
        "seconds": elapsed,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
    }


def main(argv: list[str]) -> int:
    """Run the spec in ``argv[0]``; print one JSON line."""
    spec = json.loads(argv[0])
    try:
        if spec.get("bench"):
            out: dict[str, Any] = {"bench": _bench(spec, spec["bench"])}
        else:
            runs = spec.get("runs", [{}])
            out = {
                "runs": [
                    _read(spec, run, spec.get("pause") if i == 0 else None)
                    for i, run in enumerate(runs)
                ]
            }
    except Exception as exc:  # reported to the test, which asserts on it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    assert mrecord  # the package under test, from PYTHONPATH
    sys.exit(main(sys.argv[1:]))
