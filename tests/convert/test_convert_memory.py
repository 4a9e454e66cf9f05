"""A conversion holds a few batches of rows at a time: converting a dataset of large rows
in a memory group smaller than the dataset finishes with every row (no batch of 4,096
rows of 100 KB, 410 MB, read at once)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mrecord import Block, DatasetReader, FileWriter
from mrecord.convert.base import BATCH_BYTES, Source
from mrecord.convert.mrecord_source import MrecordSource
from tests.memory_groups import need_memory_groups, run_in_memory_group
from tests.tracing import run_child

ROWS = 2_000
BLOB = 100_000  # 200 MB of values: more than the group's 160 MB


def _blob(i: int) -> bytes:
    return i.to_bytes(8, "little") + bytes([i % 251]) * (BLOB - 8)


def _write(path: Path) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        for start in range(0, ROWS, 100):
            writer.write_raw_data([{"id": i, "blob": _blob(i)} for i in range(start, start + 100)])


def _blocks(dst: Path) -> Iterator[tuple[np.ndarray, Block]]:
    """Every row of the dataset ``dst``, 500 at a time: (their ids, the block read)."""
    with DatasetReader.open(dst) as reader:
        for start in range(0, reader.num_rows, 500):
            ids = np.arange(start, min(reader.num_rows, start + 500))
            yield ids, reader.read_rows(ids)


_CONVERT = textwrap.dedent(
    """
    import json, sys
    from mrecord.convert import convert
    summary = convert("mrecord", sys.argv[1], sys.argv[2])
    print(json.dumps({"rows": summary.rows}))
    """
)


def test_a_conversion_of_large_rows_within_a_memory_group_smaller_than_the_data(
    tmp_path: Path,
) -> None:
    """2,000 rows of 100 KB (200 MB) converted in a 160 MB memory group: every row, in
    order. The default batch was 4,096 rows whatever their size: the whole dataset read
    at once, the converter OOM-killed (as 2.4 GB of images were in a 600 MB group)."""
    need_memory_groups("a conversion in 160 MB")
    src, dst = tmp_path / "src.mrecord", tmp_path / "dst.mrecord"
    _write(src)
    result = run_in_memory_group(160 << 20, _CONVERT, str(src), str(dst))
    assert result == {"rows": ROWS}
    for ids, block in _blocks(dst):
        assert np.asarray(block.columns["id"]).tolist() == ids.tolist()
        blobs = block.columns["blob"]
        assert all(bytes(v) == _blob(i) for v, i in zip(blobs, ids.tolist(), strict=True))


def test_a_default_batch_holds_at_most_batch_bytes(tmp_path: Path) -> None:
    """Large rows: as many as ``BATCH_BYTES`` hold (whatever the memory: the batches are
    part of the dataset's layout); a source that cannot tell its rows' size: its default
    batch."""
    src = tmp_path / "src.mrecord"
    _write(src)
    source = MrecordSource(src)
    try:
        size = source.row_bytes()
        assert size is not None and size == pytest.approx(BLOB + 8, rel=0.01)
        assert source.batch_rows_default() == BATCH_BYTES // size
    finally:
        source.close()

    class Unsized(Source):
        kind = "test"

        def iter_batches(self, batch_rows: int = 4096):  # type: ignore[no-untyped-def]
            yield {}

    unsized = Unsized(name="x", schema={"id": {"type": "int64"}}, num_rows=0)
    assert unsized.row_bytes() is None
    assert unsized.batch_rows_default() == Unsized.default_batch_rows


def test_a_resumed_conversion_keeps_its_checkpoints_batches(tmp_path: Path) -> None:
    """A checkpoint counts batches: a run resumed after an upgrade that changed the
    default (4,096 rows of any size before 2026-11-29) goes on in the batches of the run
    it resumes, where the new default would not match its checkpoint's options."""
    from mrecord.convert.driver import _default_batch_rows

    src = tmp_path / "src.mrecord"
    _write(src)
    source = MrecordSource(src)
    try:
        fresh = source.batch_rows_default()
        assert _default_batch_rows(source, None) == fresh
        assert _default_batch_rows(source, {"key": {"batch_rows": 4096}}) == 4096
        for bad in ({}, {"key": None}, {"key": {"batch_rows": 0}}, {"key": {"batch_rows": True}}):
            assert _default_batch_rows(source, bad) == fresh  # nothing usable kept
    finally:
        source.close()


def test_npz_and_mindrecord_sources_size_their_batches(tmp_path: Path) -> None:
    """An ``.npz`` of 64x64x3 images (12,296 bytes a row with its label) and a MindRecord
    dataset (its files' bytes over its rows) cut default batches of at most
    ``BATCH_BYTES``; small rows keep the default 4,096."""
    from mrecord.convert.mindrecord_source import MindRecordSource
    from mrecord.convert.npz import NpzSource

    images = tmp_path / "images.npz"
    np.savez(images, x=np.zeros((10, 64, 64, 3), dtype=np.uint8), y=np.arange(10))
    source = NpzSource(images)
    assert source.row_bytes() == 64 * 64 * 3 + 8
    assert source.batch_rows_default() == BATCH_BYTES // (64 * 64 * 3 + 8)
    small = tmp_path / "small.npz"
    np.savez(small, y=np.arange(10, dtype=np.int32))
    assert NpzSource(small).batch_rows_default() == Source.default_batch_rows

    fixture = Path(__file__).parents[1] / "fixtures" / "mindrecord" / "images.mindrecord"
    mindrecord = MindRecordSource(fixture)
    try:
        rows = mindrecord.dataset.num_rows
        size = sum(p.stat().st_size for p in mindrecord.dataset.files) // rows
        assert mindrecord.row_bytes() == size
        assert mindrecord.batch_rows_default() == min(4096, BATCH_BYTES // size)
    finally:
        mindrecord.close()


def test_the_default_worker_count_fits_the_memory_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``workers=None``: one per core where the memory holds them, fewer where it does
    not (``WORKER_BYTES`` each), never none; a count the caller gives stands. Two worker
    processes resizing images in a 120 MB memory group were OOM-killed, one finished."""
    import mrecord.storage.probe as probe
    from mrecord.convert.driver import WriteOptions
    from mrecord.convert.parallel import WORKER_BYTES

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(probe, "memory_budget", lambda: 100 * WORKER_BYTES)
    assert WriteOptions().worker_count == 16
    monkeypatch.setattr(probe, "memory_budget", lambda: 3 * WORKER_BYTES + 1)
    assert WriteOptions().worker_count == 3
    monkeypatch.setattr(probe, "memory_budget", lambda: WORKER_BYTES // 2)
    assert WriteOptions().worker_count == 1
    assert WriteOptions(workers=4).worker_count == 4
    monkeypatch.setattr(probe, "memory_budget", lambda: None)  # nothing says: the cores
    assert WriteOptions().worker_count == 16


def test_parquet_arrow_and_hf_sources_size_their_batches(tmp_path: Path) -> None:
    """A table of 20 KB blobs as Parquet, Arrow IPC and a Hugging Face dataset: default
    batches of at most ``BATCH_BYTES`` (each source's rows' size from its metadata, not
    read); small rows keep the default 4,096. These read 4,096 rows a batch whatever
    their size: 80 MB of these, 410 MB of 100 KB images."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mrecord.convert.arrow_sources import ArrowSource, HfSource, ParquetSource

    blob = 20_000
    table = pa.table(
        {
            "id": pa.array(range(300), pa.int64()),
            "blob": [np.random.default_rng(i).bytes(blob) for i in range(300)],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=100)
    with (
        pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as ipc,
    ):
        ipc.write_table(table)
    sources: list[Source] = [
        ParquetSource(tmp_path / "t.parquet"),
        ArrowSource(tmp_path / "t.arrow"),
    ]
    datasets = pytest.importorskip("datasets")
    sources.append(HfSource(datasets.Dataset(table)))
    for source in sources:
        try:
            size = source.row_bytes()
            # the blob, its 4-byte offset, the id: Arrow's bytes of a row
            assert size is not None and blob <= size <= blob + 64, source.kind
            assert source.batch_rows_default() == BATCH_BYTES // size
        finally:
            source.close()
    small = pa.table({"id": pa.array(range(300), pa.int64())})
    pq.write_table(small, tmp_path / "small.parquet")
    assert ParquetSource(tmp_path / "small.parquet").batch_rows_default() == 4096


_CONVERT_NPZ = textwrap.dedent(
    """
    import json, sys
    from mrecord.convert import convert
    summary = convert("npz", sys.argv[1], sys.argv[2])
    print(json.dumps({"rows": summary.rows}))
    """
)


def test_an_npz_larger_than_its_memory_group_converts(tmp_path: Path) -> None:
    """An ``np.savez`` archive of 200 MB (2,000 images of 100 KB) converted in a 160 MB
    memory group: every row. ``np.load`` reads an archive's arrays whole: a 393 MB one
    got the converter OOM-killed in a 250 MB group."""
    need_memory_groups("a conversion in 160 MB")
    src, dst = tmp_path / "images.npz", tmp_path / "dst.mrecord"
    images = np.random.default_rng(0).integers(0, 255, size=(ROWS, 100, 1000), dtype=np.uint8)
    np.savez(src, image=images, label=np.arange(ROWS, dtype=np.int64))
    result = run_in_memory_group(160 << 20, _CONVERT_NPZ, str(src), str(dst))
    assert result == {"rows": ROWS}
    for ids, block in _blocks(dst):
        assert np.asarray(block.columns["label"]).tolist() == ids.tolist()
        np.testing.assert_array_equal(np.asarray(block.columns["image"]), images[ids])


_PARQUET_RESIDENT = textwrap.dedent(
    """
    import json, os, sys
    import pyarrow as pa
    import pyarrow.parquet as pq
    from mrecord.convert.arrow_sources import ParquetSource
    from tests.tracing import resident_anonymous

    path, groups, group_rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    images = pa.array([os.urandom(100_000) for _ in range(group_rows)], pa.binary())
    schema = pa.schema([("image", pa.binary()), ("label", pa.int32())])
    with pq.ParquetWriter(path, schema) as writer:
        for _ in range(groups):
            labels = pa.array(range(group_rows), pa.int32())
            writer.write_table(pa.table({"image": images, "label": labels}))
    del images
    pa.default_memory_pool().release_unused()
    source = ParquetSource(path)
    before, peak, rows = resident_anonymous(), 0, 0
    for batch in source.iter_batches(source.batch_rows_default()):
        rows += len(batch["label"])
        del batch  # the writer takes a batch and lets go of it
        peak = max(peak, resident_anonymous())
    source.close()
    print(json.dumps({"rows": rows, "grown": peak - before}))
    """
)


def test_a_parquet_source_of_many_row_groups_gives_back_what_decoding_freed(
    tmp_path: Path,
) -> None:
    """A Parquet file of images in row groups of 80 (100 KB each: what ``mrecord cat
    --format parquet`` writes, 8 MB a group): Arrow's pool kept what decoding each row
    group freed, and the source's batches grew the process by 104 MB (48 MB now);
    converting 2.4 GB of such a file took 160 s in a 200 MB memory group (8.6 s now)."""
    pytest.importorskip("pyarrow")
    result = run_child(_PARQUET_RESIDENT, str(tmp_path / "images.parquet"), "20", "80")
    assert result["rows"] == 20 * 80
    assert result["grown"] < 72 << 20, result
