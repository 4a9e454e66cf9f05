"""Remote datasets larger than the cache, a store that is down, a store that lies.

Byte counts come from a TCP proxy in front of the store (``counting_proxy``): what the
network carried, headers included. They are deterministic with one reader thread.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.servers import (
    HttpServer,
    counting_proxy,
    http_server,
    s3_server,
    upload_folder,
)
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle, config
from mrecord.errors import ChecksumError, RemoteStorageError
from mrecord.remote import RemoteCache, open_remote_shards
from mrecord.remote.open import StaleCacheWarning
from mrecord.remote.ranged import RangeShardFile

ROWS, VALUE_BYTES, PAGE_BYTES = 400, 24_000, 128 << 10  # 5 rows per page, 4 shards


def write_images(folder: Path, rows: int = ROWS, value_bytes: int = VALUE_BYTES) -> Path:
    """Random 'images' (bytes, stored plain, several rows per page), a label, a string and
    a variable-shape array; returns shard 0."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = FileWriter(folder / "d.mrecord", shard_num=4)
    writer.add_schema(
        {
            "data": {"type": "bytes"},
            "label": {"type": "int32"},
            "name": {"type": "string"},
            "v": {"type": "float32", "shape": [-1, 2]},
        }
    )
    writer.set_page_size(PAGE_BYTES)
    rng = np.random.default_rng(0)
    writer.write_raw_data(
        [
            {
                "data": rng.bytes(value_bytes),
                "label": i % 10,
                "name": f"row {i}",
                "v": np.full((i % 4, 2), i, dtype=np.float32),
            }
            for i in range(rows)
        ]
    )
    writer.commit()
    return folder / "d.mrecord0"


def shard_bytes(first: Path) -> int:
    return sum(p.stat().st_size for p in first.parent.glob(f"{first.name[:-1]}?"))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(path))
    monkeypatch.delenv("MRECORD_CACHE_BYTES", raising=False)
    monkeypatch.delenv("MRECORD_STALE_CACHE", raising=False)
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, HttpServer]]:
    first = write_images(tmp_path / "srv")
    with http_server(first.parent) as server:
        yield first, server


def test_epochs_fetch_about_dataset_minus_cache(
    served: tuple[Path, HttpServer], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GLOBAL shuffle over a dataset three times the cache: every epoch after the first
    fetches at most 1.1 x (dataset - cache) bytes (the order is known: the cache keeps the
    rows read soonest and fetches single rows); the first, with the open, about the
    dataset once. The rows are exactly the local ones, in the same order.

    The pipeline reads ahead across an epoch's end, so some of epoch k+1's bytes can be
    counted in epoch k (once 7.36 MB against a bound of 7.10, with epochs 1 and 2 adding
    up to the same total as every other run): the later epochs are held to the bound on
    average, and each to it plus a tenth of an epoch's bytes shifted by the read-ahead."""
    first, server = served
    dataset = shard_bytes(first)
    cache = dataset // 3
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(cache))
    config.set_seed(7)
    local = MindDataset(str(first), shuffle=Shuffle.GLOBAL, num_parallel_workers=1)
    want = []
    it = local.create_tuple_iterator(num_epochs=3, output_numpy=True, columns=["name"])
    for _ in range(3):
        want.append([str(row[0]) for row in it])
    port = int(server.url.rsplit(":", 1)[1])
    with counting_proxy(port) as proxy:
        ds = MindDataset(
            f"http://127.0.0.1:{proxy.port}/{first.name}",
            shuffle=Shuffle.GLOBAL,
            num_parallel_workers=1,
        )
        assert any(isinstance(s, RangeShardFile) for s in ds.reader.shards)
        opened = proxy.sent
        sent, got = [], []
        it = ds.create_tuple_iterator(num_epochs=3, output_numpy=True, columns=["name"])
        for _ in range(3):
            before = proxy.sent
            got.append([str(row[0]) for row in it])
            sent.append(proxy.sent - before)
    assert got == want
    assert opened + sent[0] <= 1.1 * dataset, (opened, sent, dataset)
    later = 1.1 * (dataset - cache)
    assert sum(sent[1:]) <= 2 * later, (sent, dataset, cache)
    for n in sent[1:]:
        assert n <= 1.1 * later, (sent, dataset, cache)


def test_rows_through_range_reads_are_the_local_rows(
    served: tuple[Path, HttpServer], tmp_path: Path
) -> None:
    """Every column kind, any ids (repeats, several pages and shards at once), with and
    without a plan, with a piece store too small for much: the local rows."""
    first, server = served
    cache = RemoteCache(tmp_path / "c", max_bytes=shard_bytes(first) // 5)
    with DatasetReader.open(first) as local:
        reader = DatasetReader(open_remote_shards(f"{server.url}/{first.name}", cache=cache))
        with reader:
            assert all(isinstance(s, RangeShardFile) for s in reader.shards[1:])
            rng = np.random.default_rng(3)
            for round_ in range(6):
                if round_ == 3:
                    reader.plan_reads(lambda e: np.random.default_rng(e).permutation(ROWS), 0)
                ids = rng.integers(0, ROWS, size=37)
                a, b = reader.read_rows(ids), local.read_rows(ids)
                for name in local.column_names:
                    for x, y in zip(a.columns[name], b.columns[name], strict=True):
                        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
            assert reader[ROWS - 1]["name"] == f"row {ROWS - 1}"
            # The pieces' space is an entry of the cache: the bound holds, with it counted.
            assert list(cache.root.glob("*/.mrecord-pieces-*.mrecord-cache"))
            assert cache.used_bytes() <= cache.max_bytes
    assert not list(cache.root.glob("*/.mrecord-pieces-*"))  # given back at close


def test_a_tiny_cache_holds_little_in_memory(
    served: tuple[Path, HttpServer], tmp_path: Path
) -> None:
    """MRECORD_CACHE_BYTES far below a shard: after an epoch of random reads the reader keeps
    no blocks of the shards in memory (it kept 16 x 4 MiB per shard)."""
    first, server = served
    dataset = shard_bytes(first)
    cache = RemoteCache(tmp_path / "c", max_bytes=dataset // 20)
    reader = DatasetReader(open_remote_shards(f"{server.url}/{first.name}", cache=cache))
    with reader:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for ids in np.array_split(np.random.default_rng(0).permutation(ROWS), 20):
                reader.read_rows(ids)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    assert held < dataset // 10, (held, dataset)


def test_a_store_that_changes_under_a_reader_gives_an_error_not_other_rows(
    served: tuple[Path, HttpServer], tmp_path: Path
) -> None:
    """Rows fetched one by one are checked against digests taken from their checked chunk:
    the store serving other bytes (a rewrite, a faulty proxy) is a ChecksumError; a file
    cut short on the store is a RemoteStorageError naming the bytes it did not send."""
    first, server = served
    dbs = sum(p.stat().st_size for p in first.parent.glob("*.db"))
    cache = RemoteCache(tmp_path / "c", max_bytes=dbs)  # no room for pieces: all from the store
    reader = DatasetReader(open_remote_shards(f"{server.url}/{first.name}", cache=cache))
    with reader:
        shard = reader.shards[1]
        assert isinstance(shard, RangeShardFile)
        start = int(reader.file_starts[1])
        reader.read_rows([start])  # its chunks fetched whole, checked, indexed
        col = shard.field_index("data")
        chunk = int(shard.meta.chunks[0, col]["offset"])
        served_file = first.parent / shard.path.name
        data = bytearray(served_file.read_bytes())
        data[chunk + int(shard._index[(0, col)].bounds[0]) + 100] ^= 0xFF  # in row 0's value
        served_file.write_bytes(bytes(data))
        with pytest.raises(ChecksumError, match="other bytes than the commit"):
            reader.read_rows([start + 1, start])
        last_page = shard.meta.num_pages - 1
        cut = int(shard.meta.chunks[last_page, col]["offset"]) + 10
        served_file.write_bytes(bytes(data[:cut]))
        with pytest.raises(RemoteStorageError, match="instead of"):
            reader.read_rows([int(reader.file_starts[2]) - 1])


def test_a_warm_cache_opens_while_the_store_is_down(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file cached and verified, the store stopped: the open reads the cache with a
    StaleCacheWarning; MRECORD_STALE_CACHE=refuse (or a dataset not all cached) raises
    RemoteStorageError."""
    first = write_images(tmp_path / "data", rows=40, value_bytes=300)
    with DatasetReader.open(first) as local:
        want = [r["name"] for r in local.iter_rows()]
    with s3_server("down") as options:
        options = {**options, "config_kwargs": {"retries": {"max_attempts": 1}}}  # fail fast
        upload_folder(first.parent, "s3://down/d", options)
        with DatasetReader.open("s3://down/d/d.mrecord0", storage_options=options) as warm:
            assert [r["name"] for r in warm.iter_rows()] == want
    with pytest.warns(StaleCacheWarning, match="may be stale"):
        ds = MindDataset("s3://down/d/d.mrecord0", shuffle=False, storage_options=options)
    assert _rows_of(ds) == want
    monkeypatch.setenv("MRECORD_STALE_CACHE", "refuse")
    with pytest.raises(RemoteStorageError, match=r"down/d/d\.mrecord0"):
        DatasetReader.open("s3://down/d/d.mrecord0", storage_options=options)
    monkeypatch.delenv("MRECORD_STALE_CACHE")
    (Path(next(iter(cache_dir.glob("*/d.mrecord2"))))).unlink()
    with pytest.raises(RemoteStorageError, match="cannot stand in"):
        DatasetReader.open("s3://down/d/d.mrecord0", storage_options=options)


def _rows_of(ds: MindDataset) -> list[str]:
    return [str(r[0]) for r in ds.create_tuple_iterator(columns=["name"], output_numpy=True)]


def test_the_cli_reads_s3_with_aws_endpoint_url_and_its_errors_name_it(
    tmp_path: Path, cache_dir: Path
) -> None:
    """The CLI takes no storage options: AWS_ENDPOINT_URL (MinIO, moto) and the AWS_* keys
    are how it reaches an S3-compatible store, and its error says so."""
    first = write_images(tmp_path / "data", rows=20, value_bytes=100)
    with s3_server("cli") as options:
        upload_folder(first.parent, "s3://cli/d", options)
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": options["client_kwargs"]["endpoint_url"],
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "1",
            "MRECORD_STALE_CACHE": "refuse",
        }
        cmd = [sys.executable, "-m", "mrecord.cli", "info", "s3://cli/d/d.mrecord0"]
        ok = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        assert ok.returncode == 0, ok.stderr
        assert "d.mrecord3" in ok.stdout
    down = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert down.returncode != 0
    assert "AWS_ENDPOINT_URL" in down.stderr, down.stderr


@pytest.mark.parametrize(
    ("shuffle", "num_shards", "shard_id"),
    [
        (Shuffle.FALSE, None, None),
        (Shuffle.PARTIAL, 3, 1),
        (Shuffle.FILES, 2, 0),
        (Shuffle.INFILE, None, None),
    ],
)
def test_every_mode_reads_the_local_rows_from_a_store_larger_than_the_cache(
    served: tuple[Path, HttpServer],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    shuffle: Shuffle,
    num_shards: int | None,
    shard_id: int | None,
) -> None:
    """Shuffle modes, sharding, several reader threads, two epochs: the rows and order of the
    local files (single-row fetches and the piece store change nothing a user sees)."""
    first, server = served
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(shard_bytes(first) // 4))
    config.set_seed(11)
    kwargs: dict[str, object] = {"shuffle": shuffle, "num_parallel_workers": 3}
    if num_shards is not None:
        kwargs.update(num_shards=num_shards, shard_id=shard_id, partial_window=50)
    local = MindDataset(str(first), **kwargs)  # type: ignore[arg-type]
    remote = MindDataset(f"{server.url}/{first.name}", **kwargs)  # type: ignore[arg-type]
    assert any(isinstance(s, RangeShardFile) for s in remote.reader.shards)
    for ds in (local, remote):
        it = ds.create_tuple_iterator(num_epochs=2, output_numpy=True, columns=["name", "data"])
        got = [[(str(r[0]), bytes(r[1])) for r in it] for _ in range(2)]
        if ds is local:
            want = got
    assert got == want
