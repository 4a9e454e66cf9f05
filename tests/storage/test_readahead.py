"""Read-ahead hints (ShardFile.will_need, storage.readahead) never change what a read returns."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle, config
from mrecord.pipeline.sources.lookahead import HintThread
from mrecord.storage.readahead import hint_heads
from mrecord.storage.shard import ShardFile

SCHEMA = {"x": {"type": "int64"}, "blob": {"type": "bytes"}}


def _write(path: Path, rows: int, shards: int = 1) -> None:
    writer = FileWriter(str(path), shard_num=shards)
    writer.add_schema(SCHEMA)
    writer.set_page_size(1 << 12)
    writer.write_raw_data(
        [{"x": i, "blob": bytes([i % 251]) * (100 + 37 * (i % 50))} for i in range(rows)]
    )
    writer.commit()


def test_will_need_accepts_any_ranges_and_reads_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, 300)
    with DatasetReader.open(path) as reader:
        before = list(reader.read_rows(np.arange(300)).iter_rows())
    with ShardFile(path) as shard:
        size = shard.size
        shard.will_need([(0, size), (size - 1, 10), (size + 100, 5), (17, 0), (4095, 2)])
        shard.will_need([])
        assert shard.hinted
    with DatasetReader.open(path) as reader:
        for shard in reader.shards:
            shard.will_need([(0, shard.size)])
        after = list(reader.read_rows(np.arange(300)).iter_rows())
    assert after == before


def test_will_need_on_a_closed_shard_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path, 10)
    shard = ShardFile(path)
    shard.close()
    shard.will_need([(0, 100)])  # a hint may be ignored; it never raises


def test_mrecord_bench_prints_the_device_limit_beside_the_rates(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    path = tmp_path / "d.mrecord"
    _write(path, 300)
    text = CliRunner().invoke(cli, ["bench", str(path), "--max-rows", "100"]).stdout
    assert "device limit:" in text and "rows/s of" in text and "% of it" in text
    result = CliRunner().invoke(cli, ["bench", str(path), "--json", "--max-rows", "100"])
    out = json.loads(result.stdout)
    assert out["device_limit_rows_per_second"] > 0
    assert out["device_limit_row_bytes"] > 0


def _fadvised(monkeypatch: Any) -> list[tuple[int, int]]:
    """The ranges ``os.posix_fadvise(..., WILLNEED)`` is called with from now on."""
    calls: list[tuple[int, int]] = []
    real = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            calls.append((offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    return calls


def _pages_covered(ranges: list[tuple[int, int]], offset: int, length: int) -> bool:
    return any(a <= offset and offset + length <= a + n for a, n in ranges)


def test_hint_heads_asks_for_the_heads_and_unchecked_chunks_and_nothing_once_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """What a cold read waits on before its values: the bytes column's heads (value
    offsets and checksums) and, under verify="once", the int column's chunks; once a read
    has parsed and checked them, nothing is asked again."""
    path = tmp_path / "d.mrecord"
    _write(path, 300)
    calls = _fadvised(monkeypatch)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        x, blob = shard.field_index("x"), shard.field_index("blob")
        pages = np.array([0, 2, 2, 5], dtype=np.int64)
        assert hint_heads(shard, pages, ["x", "blob"]) > 0
        for page in (0, 2, 5):
            assert _pages_covered(calls, *shard.head_range(page, blob))
            chunk = shard.meta.chunks[page, x]
            assert _pages_covered(calls, int(chunk["offset"]), int(chunk["length"]))
        assert not _pages_covered(calls, *shard.head_range(1, blob))  # not asked for
        before = list(reader.read_rows(np.arange(300)).iter_rows())
        calls.clear()
        assert hint_heads(shard, pages, ["x", "blob"]) == 0  # parsed and checked now
        assert calls == []
    with DatasetReader.open(path) as again:
        assert list(again.read_rows(np.arange(300)).iter_rows()) == before


def test_hint_heads_leaves_fixed_chunks_alone_when_nothing_checks_them(
    tmp_path: Path, monkeypatch: Any, without_head_index: None
) -> None:
    """A file without a head index (1.3): the bytes column's head is asked for, and no
    fixed-width chunk when nothing checks them (tests/storage/test_head_index.py: with
    the index, no head either)."""
    path = tmp_path / "d.mrecord"
    _write(path, 300)
    calls = _fadvised(monkeypatch)
    with DatasetReader.open(path, verify="never") as reader:
        shard = reader.shards[0]
        assert hint_heads(shard, np.array([3]), ["x"]) == 0
        assert calls == []
        assert hint_heads(shard, np.array([3]), ["blob"]) == 1
        assert _pages_covered(calls, *shard.head_range(3, shard.field_index("blob")))


def _announced(monkeypatch: Any, few_requests: bool) -> list[int]:
    """Make every reader beyond memory (on storage that serves few requests for its
    bandwidth when ``few_requests``), announcements run at once; the list fills with the
    ids announced to ``will_need_heads``."""
    hinted: list[int] = []
    real = DatasetReader.will_need_heads

    def spy(self: DatasetReader, ids: Any, columns: Any = None, **kwargs: Any) -> bool:
        hinted.extend(np.asarray(ids).tolist())
        return real(self, ids, columns, **kwargs)

    monkeypatch.setattr(DatasetReader, "beyond_memory", property(lambda self: True))
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: few_requests))
    monkeypatch.setattr(DatasetReader, "will_need_heads", spy)
    monkeypatch.setattr(HintThread, "submit", lambda self, fn, *args: fn(*args))
    return hinted


@pytest.mark.parametrize("few_requests", [False, True])
def test_mind_dataset_beyond_memory_announces_coming_blocks_and_reads_the_same(
    tmp_path: Path, monkeypatch: Any, few_requests: bool
) -> None:
    """Beyond memory, MindDataset has each coming block's heads asked for a few blocks
    before it is read (all but the first few, in order); the rows are unchanged. Not on
    storage that serves few requests for its bandwidth (an hdd-like throttle): there the
    heads asked for ahead queue in front of the first blocks' own requests (2.4 GB of
    images, GLOBAL, 200 requests a second: the first row after 6.0 s and 1,261 requests,
    against 1.0 s without), so nothing is announced."""
    path = tmp_path / "d.mrecord"
    _write(path, 3000, shards=2)
    files = [str(path) + "0", str(path) + "1"]

    old_seed = config.get_seed()
    try:
        want = _global_epoch(files)
        hinted = _announced(monkeypatch, few_requests)
        got = _global_epoch(files)
    finally:
        config.set_seed(old_seed)
    assert got == want
    if few_requests:
        assert hinted == []
    else:
        assert 0 < len(hinted) < len(got)  # the first blocks are read at once, not announced
        assert hinted == got[len(got) - len(hinted) :]


def test_heads_are_not_asked_for_alone_where_the_read_takes_whole_chunks(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A block-local read beyond memory (``Shuffle.BLOCK``'s window of pages) reads its
    chunks whole, heads included, into the reader's buffers: asking for the heads ahead
    costs a request each (an hdd-like volume's 200 a second went to them: the first
    epoch at 55% of its sequential limit, the second at 96%). A random read of big values
    (one row per chunk) still has them asked for; the rows read are the same."""
    path = tmp_path / "d.mrecord"
    _write(path, 3000)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)

    def written(ids: np.ndarray) -> list[tuple[int, bytes]]:
        return [(i, bytes([i % 251]) * (100 + 37 * (i % 50))) for i in ids.tolist()]

    def read(reader: DatasetReader, ids: np.ndarray) -> list[tuple[int, bytes]]:
        return [(int(r["x"]), r["blob"]) for r in reader.read_rows(ids).iter_rows()]

    calls = _fadvised(monkeypatch)
    with DatasetReader.open(path) as reader:
        starts = reader.shards[0].page_starts_list
        local = np.random.default_rng(3).permutation(np.arange(starts[2], starts[6]))
        assert reader.will_need_heads(local) is False  # nothing for a hint to do
        assert calls == []
        assert read(reader, local) == written(local)
        spread = np.array([starts[page] for page in range(8, 20)][::-1])
        assert reader.will_need_heads(spread) is True
        assert calls  # one row a chunk: the heads are what its read waits on first
        assert read(reader, spread) == written(spread)


def test_heads_are_not_asked_for_alone_where_the_read_streams(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A read in file order beyond memory, on storage that serves few requests for its
    bandwidth, streams its bytes in large requests (``readahead.stream_ahead``): a head
    asked for alone a few blocks early lies past the stream and costs a request of its
    own (measured on an hdd-like volume: a third of the requests were 4-8 KiB, the epoch
    at 47% of the sequential limit). Without few requests it still asks; rows unchanged."""
    path = tmp_path / "d.mrecord"
    _write(path, 3000)
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: True))
    calls = _fadvised(monkeypatch)
    with DatasetReader.open(path) as reader:
        starts = reader.shards[0].page_starts_list
        in_order = np.arange(starts[10], starts[30])
        reader.will_need_heads(in_order)
        assert calls == []
        got = [(int(r["x"]), r["blob"]) for r in reader.read_rows(in_order).iter_rows()]
        assert got == [(i, bytes([i % 251]) * (100 + 37 * (i % 50))) for i in in_order.tolist()]
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: False))
    with DatasetReader.open(path) as reader:
        reader.will_need_heads(np.arange(starts[40], starts[60]))
        assert calls  # direct reads in file order: the heads are what they wait on first


def _global_epoch(files: list[str]) -> list[int]:
    """One GLOBAL epoch of column ``x`` of ``files`` (seed 7), read in blocks of 100 rows."""
    config.set_seed(7)
    ds = MindDataset(files, ["x"], shuffle=Shuffle.GLOBAL, num_parallel_workers=2)
    ds._block_rows = 100  # many blocks in a small dataset
    it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
    return [int(row[0]) for row in it]


def _write_images(path: Path, rows: int, head_index: bool) -> None:
    """Values of 2-3 KB (each chunk gets a value table) and a small label."""
    import mrecord.writer.shard_writer as shard_writer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shard_writer, "HEAD_INDEX", head_index)
        with FileWriter(str(path)) as writer:
            writer.add_schema({"label": {"type": "int64"}, "blob": {"type": "bytes"}})
            writer.set_page_size(1 << 14)
            writer.write_raw_data(
                [{"label": i % 7, "blob": bytes([i % 251]) * (2000 + 13 * i)} for i in range(rows)]
            )


@pytest.mark.parametrize("head_index", [True, False])
def test_nothing_is_announced_where_the_head_index_serves_every_head(
    tmp_path: Path, monkeypatch: Any, head_index: bool
) -> None:
    """Where every head and label a cold read waits on comes from the head index (format
    1.4), announcing coming blocks would read nothing, only parse heads on a thread whose
    Python the first blocks' reading threads wait behind: nothing is announced. Written
    without the index (as a 1.3 writer did), the same rows are announced; both read the
    same rows."""
    path = tmp_path / "d.mrecord"
    _write_images(path, 400, head_index)
    with DatasetReader.open(path) as reader:
        assert reader.heads_all_indexed() is head_index
        assert reader.heads_all_indexed(["label"]) is head_index
    hinted = _announced(monkeypatch, few_requests=False)
    old_seed = config.get_seed()
    try:
        config.set_seed(7)
        ds = MindDataset(
            str(path), ["label", "blob"], shuffle=Shuffle.GLOBAL, num_parallel_workers=2
        )
        ds._block_rows = 50  # many blocks in a small dataset
        got = []
        for label, blob in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            i = (len(blob) - 2000) // 13
            assert bytes(blob) == bytes([i % 251]) * (2000 + 13 * i) and int(label) == i % 7
            got.append(i)
    finally:
        config.set_seed(old_seed)
    assert sorted(got) == list(range(400))
    assert (hinted == []) is head_index


def test_a_column_is_served_by_the_head_index_only_when_all_it_waits_on_is_there(
    tmp_path: Path,
) -> None:
    """``head_index_serves``: small values (no value tables, so no heads in the index)
    are not served; big ones are; a fixed column whose chunks the index copies is, and
    under ``verify="never"`` any fixed column is (nothing is checked ahead)."""
    small = tmp_path / "small.mrecord"
    _write(small, 300)  # values of ~1 KB on average, many chunks without a table
    with ShardFile(small) as shard:
        assert not shard.head_index_serves(shard.field_index("blob"))
    with ShardFile(small, verify="never") as shard:
        assert shard.head_index_serves(shard.field_index("x"))
    big = tmp_path / "big.mrecord"
    _write_images(big, 200, head_index=True)
    with ShardFile(big) as shard:
        assert shard.head_index_serves(shard.field_index("blob"))
        assert shard.head_index_serves(shard.field_index("label"))


def test_a_block_shuffle_reads_windows_ahead_instead_of_announcing_heads(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """``Shuffle.BLOCK`` beyond memory takes each window's chunks whole into the reader's
    buffers: asking for its heads ahead finds nothing to ask for (and working that out
    for every window took the GIL from the reading threads: BLOCK over 4M tabular rows
    in a 300 MB group, 0.98-1.06M rows/s against 1.17-1.34M). Its coming windows are
    read whole instead (``will_read_window``, tests/storage/test_window_hints.py), no
    head announced; a random order over big values (a file written without the head
    index) announces every coming block; the rows are those written."""
    path = tmp_path / "t.mrecord"
    with FileWriter(str(path)) as writer:
        writer.add_schema({"x": {"type": "int64"}, "v": {"type": "float32", "shape": [4]}})
        writer.set_page_size(1 << 12)
        writer.write_raw_data(
            [{"x": i, "v": np.full(4, i, dtype=np.float32)} for i in range(40000)]
        )
    calls: list[bool] = []
    real = DatasetReader.will_need_heads

    def spy(self: DatasetReader, ids: Any, columns: Any = None, **kwargs: Any) -> bool:
        calls.append(real(self, ids, columns, **kwargs))
        return calls[-1]

    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(DatasetReader, "needs_large_requests", property(lambda self: False))
    monkeypatch.setattr(DatasetReader, "will_need_heads", spy)
    monkeypatch.setattr(HintThread, "submit", lambda self, fn, *args: fn(*args))
    ds = MindDataset(
        str(path),
        ["x", "v"],
        shuffle=Shuffle.BLOCK,
        block_rows=200,
        window_blocks=4,
        num_parallel_workers=2,
    )
    ds._block_rows = 8192  # several blocks in this epoch (24-byte rows come 65,536 to one)
    got = [
        int(x)
        for x, v in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
        if v.tolist() == [float(x)] * 4
    ]
    assert sorted(got) == list(range(40000))
    assert calls == []  # no head asked for: the windows come whole

    calls.clear()
    # Values of 2-3 KB count as big here (read block by block, the path this is about):
    # small bytes values are swept where a pass pays, with no heads asked for.
    monkeypatch.setattr(dataset_reader, "_VIEW_MIN_BYTES", 1000)
    images = tmp_path / "i.mrecord"
    _write_images(images, 400, head_index=False)
    ds = MindDataset(str(images), ["label", "blob"], shuffle=Shuffle.GLOBAL, num_parallel_workers=2)
    ds._block_rows = 50
    assert sum(1 for _ in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)) == 400
    assert len(calls) > 1 and all(calls)
