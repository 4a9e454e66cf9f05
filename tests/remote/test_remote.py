"""Remote datasets (docs/REMOTE.md): a local S3 (moto) and a local HTTP server stand in for
object stores. Same rows as local, a cache reused across processes and bounded in size, damage
in transit refused, a vanished server or object named in a typed error."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.servers import HttpServer, http_server, s3_server, upload_folder
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle, config
from mrecord.errors import (
    ArgumentError,
    ChecksumError,
    DatasetNotFoundError,
    RemoteStorageError,
)
from mrecord.remote import RemoteCache, is_url
from mrecord.remote.fs import RemoteFile
from mrecord.remote.open import open_remote_shards

pytest.importorskip("fsspec")  # the dev extra installs it: this never skips under `make test`


def write_dataset(
    folder: Path, name: str = "data.mrecord", rows: int = 60, shift: int = 0, blob: int = 0
) -> Path:
    """A 3-shard dataset with every field kind (``blob`` random bytes more per row in ``b``);
    returns shard 0."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = FileWriter(folder / name, shard_num=3, overwrite=True)
    writer.add_schema(
        {
            "x": {"type": "int64"},
            "s": {"type": "string"},
            "b": {"type": "bytes", "compression": "zstd"},
            "a": {"type": "float32", "shape": [2, 3]},
            "v": {"type": "int32", "shape": [-1]},
        }
    )
    writer.set_page_size(1024)
    writer.write_raw_data(
        [
            {
                "x": i + shift,
                "s": f"row {i + shift}",
                "b": bytes([i % 256]) * (i % 7) + np.random.default_rng(i).bytes(blob),
                "a": np.full((2, 3), i, dtype=np.float32),
                "v": np.arange(i % 5, dtype=np.int32),
            }
            for i in range(rows)
        ]
    )
    writer.commit()
    return folder / f"{name}0"


def all_rows(reader: DatasetReader) -> list[dict[str, Any]]:
    return list(reader.iter_rows())


def assert_same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key in w:
            np.testing.assert_array_equal(np.asarray(g[key]), np.asarray(w[key]))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache per test; the environment carries it into child processes."""
    path = tmp_path / "cache"
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(path))
    monkeypatch.delenv("MRECORD_CACHE_BYTES", raising=False)
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, HttpServer]]:
    """A dataset under a local HTTP server: (local shard 0, the server)."""
    first = write_dataset(tmp_path / "srv")
    with http_server(first.parent) as server:
        yield first, server


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    """moto's S3 on 127.0.0.1 (one per module: it takes a second to start)."""
    with s3_server("data") as options:
        yield options


def test_url_detection_keeps_urls_away_from_pathlib() -> None:
    """s3://, gs://, https:// are URLs; relative and Windows-drive paths are not; a URL that
    went through pathlib.Path is named as such instead of "does not exist"."""
    assert is_url("s3://bucket/x") and is_url("gs://b/x") and is_url("https://h/x")
    assert not is_url("data.mrecord0") and not is_url("C:\\data\\x") and not is_url("/a://b")
    with pytest.raises(ArgumentError, match="pass the URL as a str"):
        DatasetReader.open(Path("s3://bucket/data.mrecord0"))


def test_http_reads_the_same_rows_as_local(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    first, server = served
    with DatasetReader.open(first) as local:
        want = all_rows(local)
    with DatasetReader.open(f"{server.url}/{first.name}") as remote:
        assert remote.num_rows == 60
        assert all(Path(f).is_relative_to(cache_dir) for f in remote.files)
        assert_same_rows(all_rows(remote), want)
        assert_same_rows(remote.__getitems__([5, -1, 0]), [want[5], want[-1], want[0]])


def test_s3_mind_dataset_same_order_as_local(
    tmp_path: Path, s3: dict[str, Any], cache_dir: Path
) -> None:
    """MindDataset over s3:// (storage_options passed through) gives local's shuffled order."""
    first = write_dataset(tmp_path / "local")
    upload_folder(first.parent, "s3://data/same-order", s3)
    config.set_seed(7)
    local = [r["x"].item() for r in MindDataset(str(first), shuffle=Shuffle.GLOBAL)
             .create_dict_iterator(num_epochs=1, output_numpy=True)]
    remote_ds = MindDataset(
        f"s3://data/same-order/{first.name}", shuffle=Shuffle.GLOBAL, storage_options=s3
    )
    it = remote_ds.create_dict_iterator(num_epochs=1, output_numpy=True)
    remote = [r["x"].item() for r in it]
    assert remote == local and sorted(remote) == list(range(60))


def test_s3_list_of_urls_reads_only_those(
    tmp_path: Path, s3: dict[str, Any], cache_dir: Path
) -> None:
    first = write_dataset(tmp_path / "local")
    upload_folder(first.parent, "s3://data/listed", s3)
    urls = [f"s3://data/listed/data.mrecord{i}" for i in (2, 0)]
    with (
        DatasetReader.open(urls, storage_options=s3) as remote,
        DatasetReader.open([first.parent / "data.mrecord2", first]) as local,
    ):
        assert_same_rows(all_rows(remote), all_rows(local))


_OPEN_IN_CHILD = """
import sys
from mrecord import DatasetReader
with DatasetReader.open(sys.argv[1]) as reader:
    print(reader.num_rows, int(reader[-1]["x"]))
"""


def test_cache_is_reused_by_another_process(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    """A second process finds the files in the cache: it only checks their version."""
    first, server = served
    url = f"{server.url}/{first.name}"
    DatasetReader.open(url).close()
    assert server.count("GET", f"/{first.name}") == 1
    before = len(server.requests)
    out = subprocess.run(
        [sys.executable, "-c", _OPEN_IN_CHILD, url], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["60", "59"]
    assert not [r for r in server.requests[before:] if r.startswith("GET")]


def _open_rows(urls: str | list[str]) -> int:
    with DatasetReader.open(urls) as reader:
        return reader.num_rows


def test_processes_opening_together_download_each_file_once(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    """Three processes, one by sibling discovery and two by lists in opposite orders
    (which must not deadlock on the cache's locks), download each file once."""
    _, server = served
    urls = [f"{server.url}/data.mrecord{i}" for i in range(3)]
    with ProcessPoolExecutor(3, mp_context=get_context("spawn")) as pool:
        opened = pool.map(_open_rows, [urls[0], urls, urls[::-1]], timeout=120)
        assert list(opened) == [60, 60, 60]
    for i in range(3):
        assert server.count("GET", f"/data.mrecord{i}") == 1
        assert server.count("GET", f"/data.mrecord{i}.db") == 1


def test_a_rewritten_remote_dataset_is_fetched_again(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    """A new commit on the server (same file sizes) is not served from the stale cache."""
    first, server = served
    url = f"{server.url}/{first.name}"
    with DatasetReader.open(url) as reader:
        assert int(reader[0]["x"]) == 0
    write_dataset(first.parent, shift=1000)
    with DatasetReader.open(url) as reader:
        assert int(reader[0]["x"]) == 1000


def test_a_corrupt_download_is_refused_and_not_cached(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    first, server = served
    shard = first.parent / "data.mrecord1"
    with DatasetReader.open(first) as reader:
        offset = int(reader.shards[1].meta.chunks[0, 0]["offset"])
    data = bytearray(shard.read_bytes())
    data[offset] ^= 0xFF
    shard.write_bytes(bytes(data))
    url = f"{server.url}/data.mrecord1"
    with pytest.raises(ChecksumError) as info:
        DatasetReader.open(url)
    assert url in str(info.value) and info.value.path == url
    cached = [p.name for p in cache_dir.rglob("data.mrecord1*")]
    assert "data.mrecord1" not in cached and "data.mrecord1.mrecord-cache" not in cached


def test_server_gone_is_a_clear_error(tmp_path: Path, cache_dir: Path) -> None:
    first = write_dataset(tmp_path / "srv")
    with http_server(first.parent) as server:
        url = f"{server.url}/{first.name}"
    with pytest.raises(RemoteStorageError) as info:
        DatasetReader.open(url)
    assert url in str(info.value)
    assert isinstance(info.value, OSError)


def test_missing_remote_object_is_dataset_not_found(
    served: tuple[Path, HttpServer], s3: dict[str, Any], cache_dir: Path
) -> None:
    _, server = served
    with pytest.raises(DatasetNotFoundError, match=r"nope\.mrecord0"):
        DatasetReader.open(f"{server.url}/nope.mrecord0")
    with pytest.raises(DatasetNotFoundError, match=r"nope\.mrecord0"):
        DatasetReader.open("s3://data/nothing/nope.mrecord0", storage_options=s3)


def test_cache_is_bounded_and_evicts_least_recently_used(tmp_path: Path) -> None:
    """With room for 1.5 datasets, opening a second evicts the first one's oldest files."""
    a = write_dataset(tmp_path / "srv" / "a")
    b = write_dataset(tmp_path / "srv" / "b")
    size = sum(p.stat().st_size for p in a.parent.iterdir() if p.name.startswith("data.mrecord"))
    cache = RemoteCache(tmp_path / "cache", max_bytes=size + size // 2)
    with http_server(tmp_path / "srv") as server:
        ra = DatasetReader(open_remote_shards(f"{server.url}/a/{a.name}", cache=cache))
        rows_a = all_rows(ra)
        rb = DatasetReader(open_remote_shards(f"{server.url}/b/{b.name}", cache=cache))
        assert cache.used_bytes() <= cache.max_bytes
        # a's least recently used files (its .db files, fetched first) were evicted ...
        assert not all(Path(f"{f}.db").exists() for f in ra.files)
        assert_same_rows(all_rows(ra), rows_a)  # ... yet the open reader still reads it
        assert all(Path(f).exists() for f in rb.files)
        ra.close()
        rb.close()
        small = RemoteCache(tmp_path / "small", max_bytes=1000)
        with pytest.raises(ArgumentError, match="MRECORD_CACHE_BYTES"):
            open_remote_shards(f"{server.url}/a/{a.name}", cache=small)


def test_remote_reader_pickles_by_url_into_a_spawned_process(
    served: tuple[Path, HttpServer], cache_dir: Path
) -> None:
    first, server = served
    reader = DatasetReader.open(f"{server.url}/{first.name}")
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        got = pool.submit(_rows_of, reader, [3, -1]).result()
    assert got == [3, 59]
    reader.close()


def _rows_of(reader: DatasetReader, ids: list[int]) -> list[int]:
    return [int(row["x"]) for row in reader.__getitems__(ids)]


def test_without_fsspec_a_url_asks_for_the_remote_extra(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["fsspec"] = None  # as if mrecord[remote] were not installed
        from mrecord import DatasetReader
        try:
            DatasetReader.open("s3://bucket/data.mrecord0")
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MRECORD_CACHE_DIR": str(tmp_path)},
    )
    assert "pip install 'mrecord[remote]'" in out.stdout
    assert "s3://bucket/data.mrecord0" in out.stdout


@pytest.fixture
def served_big(tmp_path: Path) -> Iterator[tuple[Path, HttpServer]]:
    """Like ``served``, with shards much larger than their .db files."""
    first = write_dataset(tmp_path / "big", blob=4000)
    with http_server(first.parent) as server:
        yield first, server


def test_a_shard_larger_than_the_cache_is_read_by_range_requests(
    served_big: tuple[Path, HttpServer], tmp_path: Path
) -> None:
    """Only the .db files fit: shards are read in place, chunk by chunk, checksums checked."""
    first, server = served_big
    largest_db = max(p.stat().st_size for p in first.parent.glob("*.db"))
    cache = RemoteCache(tmp_path / "tiny", max_bytes=3 * largest_db)
    url = f"{server.url}/{first.name}"
    with DatasetReader.open(first) as local:
        want = all_rows(local)
    reader = DatasetReader(open_remote_shards(url, verify="always", cache=cache))
    with reader:
        assert not any(f.exists() for f in reader.files)  # no shard was downloaded whole
        assert server.count("GET", f"/{first.name}") == 0
        assert_same_rows(all_rows(reader), want)
        assert_same_rows(reader.__getitems__([7, 3]), [want[7], want[3]])
    assert server.count("RANGE", f"/{first.name}") > 0


def test_range_reads_catch_damage_when_the_chunk_is_read(
    without_head_index: None, served_big: tuple[Path, HttpServer], tmp_path: Path
) -> None:
    """A damaged chunk read by range requests raises. (Written without a head index: with
    one, this small chunk's values come from its intact copy there, checked by the same
    CRC; tests/storage/test_head_index.py.)"""
    first, server = served_big
    with DatasetReader.open(first) as reader:
        offset = int(reader.shards[0].meta.chunks[0, 0]["offset"])
    data = bytearray(first.read_bytes())
    data[offset] ^= 0xFF
    first.write_bytes(bytes(data))
    largest_db = max(p.stat().st_size for p in first.parent.glob("*.db"))
    cache = RemoteCache(tmp_path / "tiny", max_bytes=3 * largest_db)
    url = f"{server.url}/{first.name}"
    reader = DatasetReader(open_remote_shards(url, verify="once", cache=cache))
    with reader, pytest.raises(ChecksumError, match="page 0"):
        reader[0]


class _FakeFs:
    """An fsspec stand-in: ``get_file`` writes ``size`` bytes and counts downloads."""

    def __init__(self) -> None:
        self.downloads: list[str] = []

    def get_file(self, path: str, local: str) -> None:
        self.downloads.append(path)
        Path(local).write_bytes(b"x" * int(path.rsplit("-", 1)[1]))


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([100, 300, 700, 1500])),
        min_size=1,
        max_size=25,
    )
)
@settings(max_examples=30)
def test_cache_stays_within_its_bound_and_reuses_what_it_holds(
    fetches: list[tuple[int, int]],
) -> None:
    """Whatever is fetched, the cache holds at most max_bytes; a file that fits is there right
    after its fetch; a file still cached is not downloaded again."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = RemoteCache(tmp, max_bytes=1000)
        fs = _FakeFs()
        folder = cache.folder("mem://d", {})
        for name, size in fetches:
            remote = RemoteFile(f"mem://d/f{name}-{size}", fs, f"f{name}-{size}", size, str(size))
            cached_before = (folder / f"f{name}-{size}").exists()
            downloads = len(fs.downloads)
            with cache.session() as session:
                got = session.fetch(remote, folder, lambda path: None)
                assert (got is not None) == (size <= 1000)
                if got is not None:
                    assert got.read_bytes() == b"x" * size
            assert cache.used_bytes() <= 1000
            if cached_before:
                assert len(fs.downloads) == downloads
