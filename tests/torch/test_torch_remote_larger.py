"""``mrecord.torch``'s StreamingDataset over a remote dataset larger than the cache.

It tells the remote layer the rows it will read, as ``MindDataset`` does
(docs/REMOTE.md "Larger than the cache"): this pass's rows of this rank and worker,
then the next epoch's. The piece store then keeps the rows read soonest, so every
epoch after the first fetches at most 1.1 x (dataset - cache) bytes. Byte counts come
from a TCP proxy in front of the store (``counting_proxy``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.servers import HttpServer, counting_proxy, http_server
from mrecord import FileWriter, MindDataset, Shuffle, config

pytest.importorskip("fsspec")
pytest.importorskip("torch")

ROWS, VALUE_BYTES, PAGE_BYTES = 400, 24_000, 128 << 10  # 5 rows per page, 4 shards
EPOCHS = 3


def _write_images(folder: Path) -> Path:
    """Random 'images' (bytes, several rows per page) and a name; returns shard 0."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with FileWriter(folder / "d.mrecord", shard_num=4) as writer:
        writer.add_schema({"data": {"type": "bytes"}, "name": {"type": "string"}})
        writer.set_page_size(PAGE_BYTES)
        writer.write_raw_data(
            [{"data": rng.bytes(VALUE_BYTES), "name": f"row {i}"} for i in range(ROWS)]
        )
    return folder / "d.mrecord0"


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, HttpServer]]:
    monkeypatch.delenv("MRECORD_STALE_CACHE", raising=False)
    first = _write_images(tmp_path / "srv")
    with http_server(first.parent) as server:
        yield first, server


def _fetched(
    server: HttpServer, cache_dir: Path, read_epoch: Callable[[str], Callable[[int], list[str]]]
) -> tuple[int, list[int], list[list[str]]]:
    """(bytes of the open, bytes of each epoch, names read) through a counting proxy,
    with a cache of its own in ``cache_dir``."""
    os.environ["MRECORD_CACHE_DIR"] = str(cache_dir)
    port = int(server.url.rsplit(":", 1)[1])
    with counting_proxy(port) as proxy:
        epoch_of = read_epoch(f"http://127.0.0.1:{proxy.port}/d.mrecord0")
        opened = proxy.sent
        sent, names = [], []
        for epoch in range(EPOCHS):
            before = proxy.sent
            names.append(epoch_of(epoch))
            sent.append(proxy.sent - before)
    return opened, sent, names


@pytest.mark.parametrize(
    ("rank", "world_size", "batch_size"), [(0, 1, None), (1, 2, 8)], ids=["one", "rank1of2"]
)
def test_streaming_epochs_fetch_what_mind_dataset_fetches(
    served: tuple[Path, HttpServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rank: int,
    world_size: int,
    batch_size: int | None,
) -> None:
    """GLOBAL over a dataset three times the cache: after the first epoch, a rank's
    epochs fetch at most 1.1 x what MindDataset's same rank fetches, and on one rank at
    most 1.1 x (dataset - cache); the samples are the local files'. (Without telling
    the remote layer its rows, StreamingDataset fetched 1.2 x MindDataset's bytes on
    two ranks, and more than 1.1 x (dataset - cache) on one.)"""
    from mrecord.torch import StreamingDataset

    first, server = served
    dataset = sum(p.stat().st_size for p in first.parent.glob("d.mrecord?"))
    cache = dataset // 3
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(cache))
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "unused"))
    args: dict[str, Any] = {
        "shuffle": Shuffle.GLOBAL,
        "seed": 7,
        "rank": rank,
        "world_size": world_size,
        "batch_size": batch_size,
    }

    def streaming(url: str) -> Callable[[int], list[str]]:
        ds = StreamingDataset(url, **args)

        def epoch(e: int) -> list[str]:
            ds.set_epoch(e)
            return [str(s["name"]) for s in ds]

        return epoch

    def mind(url: str) -> Callable[[int], list[str]]:
        config.set_seed(7)
        shards: dict[str, Any] = (
            {"num_shards": world_size, "shard_id": rank} if world_size > 1 else {}
        )
        ds = MindDataset(url, shuffle=Shuffle.GLOBAL, num_parallel_workers=1, **shards)
        it = ds.create_tuple_iterator(num_epochs=EPOCHS, output_numpy=True, columns=["name"])
        return lambda e: [str(row[0]) for row in it]

    local = streaming(str(first))
    want = [local(e) for e in range(EPOCHS)]
    _, sent, got = _fetched(server, tmp_path / "c1", streaming)
    assert got == want
    _, mind_sent, _ = _fetched(server, tmp_path / "c2", mind)
    # Epochs after the first, together: MindDataset's reader runs ahead across epochs.
    assert sum(sent[1:]) <= 1.1 * sum(mind_sent[1:]), (sent, mind_sent)
    if world_size == 1:
        for n in sent[1:]:
            assert n <= 1.1 * (dataset - cache), (sent, dataset, cache)
