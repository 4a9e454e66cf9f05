"""Range reads of rows with a CRC-32C per value (format 1.3, issue 23's "object stores
larger than the cache"): a row's first read fetches its chunk's head and table and then the
row's value, not the whole chunk. Byte counts come from a TCP proxy in front of the store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mrecord.format.value_crcs as value_crcs
from harness.servers import counting_proxy, http_server
from mrecord import DatasetReader
from mrecord.remote.ranged import RangeShardFile
from tests.remote.test_remote_larger import VALUE_BYTES, shard_bytes, write_images

ROWS_READ = 20


@pytest.mark.parametrize("tables", [True, False])
def test_rows_of_large_values_fetch_their_values_not_their_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tables: bool
) -> None:
    """20 random rows of 24 KB values, 5 to a chunk, through a cache far smaller than the
    store: with tables about the values' bytes go over the network; without (a 1.2
    dataset) each row's first read took its whole chunk, several times the values."""
    if not tables:
        monkeypatch.setattr(value_crcs, "VALUE_CRC_MIN_BYTES", 1 << 62)
    first = write_images(tmp_path / "srv")
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(shard_bytes(first) // 8))
    ids = np.random.default_rng(3).choice(400, ROWS_READ, replace=False)
    with DatasetReader.open(first) as local:
        want = [bytes(v) for v in local.read_rows(ids, columns=["data"]).columns["data"]]
    with http_server(first.parent) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with (
            counting_proxy(port) as proxy,
            DatasetReader.open(f"http://127.0.0.1:{proxy.port}/{first.name}") as reader,
        ):
            ranged = [s for s in reader.shards if isinstance(s, RangeShardFile)]
            assert ranged and ranged[0].has_value_crcs(0, 0) is tables
            before = proxy.sent
            got = reader.read_rows(ids, columns=["data"]).columns["data"]
            sent = proxy.sent - before
    assert [bytes(v) for v in got] == want
    values = ROWS_READ * VALUE_BYTES
    if tables:
        # the values, plus per request a few hundred bytes of HTTP and a head and table
        assert values <= sent <= 1.2 * values, (sent, values)
    else:
        assert sent >= 2.5 * values, (sent, values)


def test_a_value_the_store_sends_changed_is_refused_by_its_crc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value's bytes changed in the store after the dataset was opened: its read raises
    ChecksumError naming the row, and the other rows read are right."""
    from mrecord.errors import ChecksumError
    from mrecord.storage.shard import ShardFile

    first = write_images(tmp_path / "srv")
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(shard_bytes(first) // 8))
    shard1 = first.with_name(first.name[:-1] + "1")
    with ShardFile(shard1) as local:
        head = local.parse_head(0, 0)
        assert head is not None and local.has_value_crcs(0, 0)
        at = int(local.meta.chunks[0, 0]["offset"]) + head.data_start + head.offsets[2] + 5
    with DatasetReader.open(first) as local_reader:
        bad = local_reader.shards[0].meta.num_rows + 2  # rows are numbered shard by shard
        good = [bytes(local_reader.read_rows([bad + 1], columns=["data"]).columns["data"][0])]
    with (
        http_server(first.parent) as server,
        DatasetReader.open(f"{server.url}/{first.name}") as reader,
    ):
        assert isinstance(reader.shards[1], RangeShardFile)
        data = bytearray(shard1.read_bytes())
        data[at] ^= 0x04
        shard1.write_bytes(bytes(data))
        with pytest.raises(ChecksumError, match="row 2 of page 0, field 'data'"):
            reader.read_rows([bad], columns=["data"])
        got = reader.read_rows([bad + 1], columns=["data"]).columns["data"]
        assert [bytes(v) for v in got] == good


@pytest.mark.parametrize("indexed", [True, False])
def test_random_rows_with_a_head_index_send_one_request_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indexed: bool
) -> None:
    """Format 1.4: a random read of values and labels through a small cache asks the store
    for each value, and once per shard for the head index; the heads and the label chunks
    (copied whole into the index) cost no request of their own. Without the index (as 1.3
    wrote the data) each row's first read also asked for its chunk's head and its page's
    label chunk."""
    import mrecord.writer.shard_writer as shard_writer

    monkeypatch.setattr(shard_writer, "HEAD_INDEX", indexed)
    first = write_images(tmp_path / "srv")
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MRECORD_CACHE_BYTES", str(shard_bytes(first) // 8))
    ids = np.random.default_rng(4).choice(400, ROWS_READ, replace=False)
    with DatasetReader.open(first) as local:
        want = local.read_rows(ids, columns=["data", "label"]).columns
        want_data = [bytes(v) for v in want["data"]]
        want_labels = list(want["label"])
    with (
        http_server(first.parent) as server,
        DatasetReader.open(f"{server.url}/{first.name}") as reader,
    ):
        names = [s.path.name for s in reader.shards]
        assert all(isinstance(s, RangeShardFile) for s in reader.shards)
        before = sum(server.count("RANGE", f"/{n}") for n in names)
        got = reader.read_rows(ids, columns=["data", "label"]).columns
        asked = sum(server.count("RANGE", f"/{n}") for n in names) - before
    assert [bytes(v) for v in got["data"]] == want_data
    assert list(got["label"]) == want_labels
    if indexed:
        assert asked <= ROWS_READ + len(names), asked
    else:
        assert asked >= ROWS_READ + len(names) + ROWS_READ // 2, asked
