"""Tests written for mutants of mrecord/storage/shard_output.py that survived the storage tests
(docs/RELIABILITY.md, "Mutation testing"): a shard's bytes exactly as docs/FORMAT.md lays them
out (header, chunks at 64-byte boundaries with zero padding, metadata, trailer), an append's
tail laid out from the committed end, pages adopted from an earlier run, shards assembled from
page runs of other files, the background flush every ``SYNC_EVERY`` bytes, short writes, and
``abort`` that never fails and leaves nothing open."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, verify_dataset
from mrecord.errors import WriterStateError
from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, Trailer, encode_header
from mrecord.format.metadata import ShardMetadata
from mrecord.storage import shard_output
from mrecord.storage.index_db import write_index_db
from mrecord.storage.naming import db_path, partial_path
from mrecord.storage.shard import read_shard_metadata
from mrecord.storage.shard_output import PageRun, ShardOutput, assemble_shard, write_tail

SCHEMA = {"id": {"type": "int64"}, "blob": {"type": "bytes"}}


def _write(path: Path, ids: range, shards: int = 1) -> Path:
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(1024)  # a few rows per page
        writer.write_raw_data(
            {
                "id": np.array(ids, dtype=np.int64),
                "blob": [bytes([i % 251]) * (100 + 37 * (i % 9)) for i in ids],
            }
        )
    return path


@pytest.fixture(autouse=True, params=["direct", "buffered"])
def write_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with pages written by ``O_DIRECT`` and by buffered ``writev``:
    the bytes must be the same (tests of ``writev`` itself turn direct writes off)."""
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", request.param == "direct")
    monkeypatch.setattr(shard_output, "DIRECT_AFTER", 0)  # direct from the first byte
    return str(request.param)


@pytest.fixture
def meta(tmp_path: Path) -> ShardMetadata:
    """Some shard's metadata (``finish`` only encodes it)."""
    return read_shard_metadata(_write(tmp_path / "m", range(3)))


def _tail(meta: ShardMetadata, metadata_offset: int) -> bytes:
    """Metadata and trailer as FORMAT.md gives them, the metadata at ``metadata_offset``."""
    body = meta.encode()
    return body + Trailer(metadata_offset, len(body), checksum(body)).encode()


def _zeros(n: int) -> bytes:
    return bytes(n)


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_new_shard_is_header_aligned_chunks_metadata_and_trailer(
    tmp_path: Path, meta: ShardMetadata, umask: None
) -> None:
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    assert (out.offset, out.tail_length) == (HEADER_SIZE, HEADER_SIZE)
    assert out.write_page([([b"a" * 10], 10), ([b"bc", b"def"], 5)]).tolist() == [64, 128]
    assert out.write_page([([b"x" * 64], 64)]).tolist() == [192]
    assert out.sync() == 256  # durable so far: the file's length
    out.write_page([([b"y"], 1)])
    out.finish(meta)
    data = partial.read_bytes()
    assert data == (
        encode_header()
        + b"a" * 10
        + _zeros(54)
        + b"bcdef"
        + _zeros(59)
        + b"x" * 64
        + b"y"
        + _zeros(0)
        + _tail(meta, 257)
    )
    assert out.offset == out.tail_length == len(data)
    assert stat.S_IMODE(partial.stat().st_mode) == 0o644


@pytest.mark.parametrize(("base", "pad"), [(100, 28), (128, 0)])
def test_an_append_tail_is_laid_out_from_the_committed_end(
    tmp_path: Path, meta: ShardMetadata, base: int, pad: int
) -> None:
    """Byte 0 of the tail file lands at ``base`` in the shard: offsets are the shard's."""
    partial = tmp_path / "tail"
    out = ShardOutput(partial, base_length=base)
    assert (out.offset, out.tail_length) == (base, 0)
    first = base + pad
    assert out.write_page([([b"aaa"], 3)]).tolist() == [first]
    assert out.sync() == pad + 3  # the tail file's length
    second = first + 64
    assert out.write_page([([b"b"], 1)]).tolist() == [second]
    out.finish(meta)
    data = partial.read_bytes()
    assert data == _zeros(pad) + b"aaa" + _zeros(61) + b"b" + _tail(meta, second + 1)
    assert out.tail_length == len(data)
    assert out.offset == base + len(data)


def test_a_finished_output_refuses_more_work_naming_its_file(
    tmp_path: Path, meta: ShardMetadata
) -> None:
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    out.finish(meta)
    message = f"shard output {str(partial)!r} is closed"
    with pytest.raises(WriterStateError) as info:
        out.write_page([([b"a"], 1)])
    assert str(info.value) == message
    for call in (lambda: out.finish(meta), out.sync, lambda: out.adopt(partial, 64)):
        with pytest.raises(WriterStateError, match="is closed"):
            call()
    assert partial.read_bytes() == encode_header() + _tail(meta, 64)


def test_write_tail_writes_at_the_position_and_cuts_what_follows(
    tmp_path: Path, meta: ShardMetadata
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"k" * 10 + b"old bytes past the end" * 50)
    fd = os.open(path, os.O_RDWR)
    try:
        end = write_tail(fd, 10, 1000, meta)
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert data == b"k" * 10 + _tail(meta, 1000)
    assert end == len(data)


class _OsProxy:
    """``os`` for shard_output, with some calls replaced."""

    def __init__(self, **calls: Any):
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        return self._calls.get(name, getattr(os, name))


def test_short_positional_writes_are_resumed(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    def pwrite(fd: int, data: Any, position: int) -> int:
        return os.pwrite(fd, memoryview(data)[:7], position)

    monkeypatch.setattr(shard_output, "os", _OsProxy(pwrite=pwrite))
    path = tmp_path / "f"
    path.write_bytes(b"k" * 20)
    fd = os.open(path, os.O_RDWR)
    try:
        end = write_tail(fd, 20, 20, meta)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"k" * 20 + _tail(meta, 20)
    assert end == 20 + len(_tail(meta, 20))


def test_a_short_write_that_ends_inside_a_later_buffer_is_finished(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``writev`` wrote the first buffers whole and part of another: the rest follows."""
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)  # writev's own contract
    real = os.writev

    def writev(fd: int, buffers: list[Any]) -> int:
        if len(buffers) < 3:
            return real(fd, buffers)
        return real(fd, [buffers[0], buffers[1], memoryview(buffers[2])[:2]])

    monkeypatch.setattr(shard_output, "os", _OsProxy(writev=writev))
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    out.write_page([([b"ab", b"cde", b"fghij", b"kl"], 12)])
    out.write_page([([b"m"], 1), ([b"no", b"pq", b"rst", b"u"], 8)])
    out.finish(meta)
    monkeypatch.undo()
    assert partial.read_bytes() == (
        encode_header()
        + b"abcdefghijkl"
        + _zeros(52)
        + b"m"
        + _zeros(63)
        + b"nopqrstu"
        + _tail(meta, 200)
    )


def test_every_page_is_written_by_the_one_writer_thread_of_the_process(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One page in flight per shard, on one ``mrecord-write`` thread (not one per page)."""
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)  # writev's own contract
    threads: list[threading.Thread] = []
    real = os.writev

    def writev(fd: int, buffers: list[Any]) -> int:
        threads.append(threading.current_thread())
        return real(fd, buffers)

    monkeypatch.setattr(shard_output, "os", _OsProxy(writev=writev))
    outputs = [ShardOutput(tmp_path / f"p{i}") for i in range(2)]
    for _ in range(3):
        for out in outputs:
            out.write_page([([b"z" * 5], 5)])
    for out in outputs:
        out.finish(meta)
    page_writers = threads[2:]  # (the headers are written by the caller)
    assert len(page_writers) == 6
    assert all(t is page_writers[0] for t in page_writers)  # (idents may be reused)
    assert page_writers[0].name.startswith("mrecord-write")
    assert page_writers[0] is not threading.current_thread()


def test_a_background_flush_runs_once_sync_every_bytes_are_written(
    tmp_path: Path, meta: ShardMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module docstring's promise: ``fdatasync`` every ``SYNC_EVERY`` bytes, counted
    from the last flush, at the page that reaches it."""
    calls: list[int] = []
    flushers: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        flushers.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(shard_output, "SYNC_EVERY", 128)
    out = ShardOutput(tmp_path / "p")
    out.write_page([([b"a" * 64], 64)])  # 64 bytes since the file began
    out.write_page([([b"b" * 64], 64)])  # 128: the next page starts a flush
    assert calls == []
    out.write_page([([b"c" * 64], 64)])
    out.finish(meta)
    assert len(calls) == 1
    assert flushers[0].startswith("mrecord-fsync")  # on its own thread, not the writer's
    other = ShardOutput(tmp_path / "q")
    other.write_page([([b"a" * 64], 64)])
    assert other.sync() == 128
    assert len(calls) == 2
    other.write_page([([b"b" * 64], 64)])  # counting starts again after sync()
    other.write_page([([b"c" * 64], 64)])
    other.finish(meta)
    assert len(calls) == 2


def test_adopted_pages_are_continued_after_their_length(
    tmp_path: Path, meta: ShardMetadata
) -> None:
    """A resumed conversion: the pages an earlier run made durable, cut to ``length``."""
    source = tmp_path / "checkpoint"
    source.write_bytes(encode_header() + b"p" * 40 + b"junk written after the checkpoint")
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    out.write_page([([b"lost"], 4)])  # replaced by the adopted pages
    out.adopt(source, 104)
    assert out.offset == 104
    assert out.write_page([([b"q" * 3], 3)]).tolist() == [128]
    assert out.sync() == 131
    out.finish(meta)
    data = partial.read_bytes()
    assert data == encode_header() + b"p" * 40 + _zeros(24) + b"qqq" + _tail(meta, 131)
    assert os.path.samefile(source, partial)  # hard-linked, not copied


def test_abort_removes_the_file_closes_it_and_may_run_twice(tmp_path: Path) -> None:
    fds = set(os.listdir("/proc/self/fd"))
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    out.write_page([([b"a" * 10], 10)])
    out.abort()
    out.abort()
    assert not partial.exists()
    assert set(os.listdir("/proc/self/fd")) <= fds


def test_abort_after_a_failed_write_raises_nothing_and_removes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shard_output, "DIRECT_WRITES", False)  # writev's own contract

    def writev(fd: int, buffers: list[Any]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    partial = tmp_path / "p"
    out = ShardOutput(partial)
    monkeypatch.setattr(shard_output, "os", _OsProxy(writev=writev))
    out.write_page([([b"a" * 10], 10)])  # fails on the writer thread
    with pytest.raises(OSError, match="No space"):  # ... and is raised by the next call
        out.write_page([([b"b"], 1)])
    out.write_page([([b"c"], 1)])
    out.abort()
    assert not partial.exists()


def test_abort_after_a_failed_flush_raises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(shard_output, "SYNC_EVERY", 1)
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    out.write_page([([b"a"], 1)])
    out.write_page([([b"b"], 1)])  # starts the flush that fails
    out.abort()
    assert not partial.exists()


def test_abort_when_closing_or_removing_fails_raises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vanished folder (a file where it was) and a failing ``close``: nothing to do."""
    folder = tmp_path / "gone"
    folder.mkdir()
    out = ShardOutput(folder / "p")
    out.write_page([([b"a"], 1)])
    shutil.rmtree(folder)
    folder.write_bytes(b"a file now")
    real_close = os.close
    closed: list[int] = []

    def close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(shard_output, "os", _OsProxy(close=close))
    out.abort()
    assert len(closed) == 1


# -- shards assembled from page runs (the Ray sink's publish) -------------------------------


def _ids(meta: ShardMetadata, first_id: int, start: int, stop: int) -> list[int]:
    """The ids of pages ``start:stop`` of a shard whose rows are ``first_id``, +1, ..."""
    page_starts = np.concatenate([[0], np.cumsum(meta.page_rows.astype(np.int64))])
    return list(range(first_id + int(page_starts[start]), first_id + int(page_starts[stop])))


def _publish(target: Path, final: ShardMetadata) -> list[int]:
    """Give ``target`` its ``.db`` and read every row's id back; the data must verify."""
    write_index_db(db_path(target), final, 0, {})
    assert verify_dataset(target).ok
    with DatasetReader.open(target) as reader:
        return [int(r["id"]) for r in reader.iter_rows()]


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two finished shard files with several pages each (ids from 0 and 1000), and the
    dataset ``t`` (one shard) whose identity the assembled shard takes."""
    a = _write(tmp_path / "a", range(0, 30))
    b = _write(tmp_path / "b", range(1000, 1025))
    t = _write(tmp_path / "t", range(1))
    return a, b, t


def test_a_shard_assembled_from_runs_of_pages_holds_their_rows_in_order(
    parts: tuple[Path, Path, Path], umask: None
) -> None:
    a, b, t = parts
    meta_a, meta_b = read_shard_metadata(a), read_shard_metadata(b)
    assert meta_a.num_pages >= 4 and meta_b.num_pages >= 3
    template = read_shard_metadata(t)
    runs = [PageRun(a, meta_a, 1, 3), PageRun(b, meta_b, 0, 2), PageRun(a, meta_a, 3, 4)]
    final = assemble_shard(partial_path(t), runs, template)  # (what the Ray sink publishes)
    os.replace(partial_path(t), t)
    want = _ids(meta_a, 0, 1, 3) + _ids(meta_b, 1000, 0, 2) + _ids(meta_a, 0, 3, 4)
    assert final.num_rows == len(want)
    assert final.page_rows.tolist() == (
        meta_a.page_rows[1:3].tolist() + meta_b.page_rows[0:2].tolist() + [meta_a.page_rows[3]]
    )
    assert (final.dataset_id, final.shard_names) == (template.dataset_id, template.shard_names)
    on_disk = read_shard_metadata(t)  # what it returns is what a reader gets
    assert on_disk.page_rows.tolist() == final.page_rows.tolist()
    assert on_disk.page_rows.dtype == final.page_rows.dtype
    assert on_disk.chunks.tolist() == final.chunks.tolist()
    assert on_disk.chunks.dtype == final.chunks.dtype
    assert all(int(o) % 64 == 0 for o in final.chunks["offset"].reshape(-1))
    data = t.read_bytes()
    assert data[:HEADER_SIZE] == encode_header()
    # each run's pages at the first 64-byte boundary after the previous run's (no gaps)
    end = HEADER_SIZE
    for k, (lo, hi) in enumerate([(0, 2), (2, 4), (4, 5)]):
        block = final.chunks[lo:hi].reshape(-1)
        assert int(block["offset"].min()) == -(-end // 64) * 64, k
        end = int((block["offset"] + block["length"]).max())
    # every chunk's bytes are those of its source, moved whole
    sources = [(a, meta_a, 1, 3), (b, meta_b, 0, 2), (a, meta_a, 3, 4)]
    moved = [(src.read_bytes(), m.chunks[s:e].reshape(-1)) for src, m, s, e in sources]
    flat_final = final.chunks.reshape(-1)
    i = 0
    for raw, chunks in moved:
        for chunk in chunks:
            new = flat_final[i]
            assert new["length"] == chunk["length"]
            assert (
                data[int(new["offset"]) : int(new["offset"]) + int(new["length"])]
                == raw[int(chunk["offset"]) : int(chunk["offset"]) + int(chunk["length"])]
            )
            i += 1
    assert stat.S_IMODE(t.stat().st_mode) == 0o644
    assert _publish(t, final) == want


def test_one_whole_file_is_renamed_and_only_its_tail_rewritten(
    parts: tuple[Path, Path, Path],
) -> None:
    a, _, t = parts
    meta_a = read_shard_metadata(a)
    before = a.read_bytes()
    template = read_shard_metadata(t)
    final = assemble_shard(t, [PageRun(a, meta_a, 0, meta_a.num_pages)], template)
    assert not a.exists()
    end = int((meta_a.chunks["offset"] + meta_a.chunks["length"]).max())
    data = t.read_bytes()
    assert data[:end] == before[:end]
    assert data[end:] == _tail(final, end)
    assert final.page_rows.tolist() == meta_a.page_rows.tolist()
    assert final.dataset_id == template.dataset_id
    assert _publish(t, final) == list(range(30))


def test_a_shard_assembled_from_no_pages_is_header_metadata_and_trailer(
    parts: tuple[Path, Path, Path],
) -> None:
    _, _, t = parts
    template = read_shard_metadata(t)
    final = assemble_shard(t, [], template)
    assert (final.num_rows, final.num_pages) == (0, 0)
    assert final.chunks.shape == (0, len(template.schema.fields))
    on_disk = read_shard_metadata(t)
    assert (on_disk.page_rows.dtype, on_disk.chunks.dtype) == (
        final.page_rows.dtype,
        final.chunks.dtype,
    )
    assert t.read_bytes() == encode_header() + _tail(final, HEADER_SIZE)
    assert _publish(t, final) == []


def test_an_empty_part_is_renamed_with_its_tail_after_the_header(
    tmp_path: Path, parts: tuple[Path, Path, Path]
) -> None:
    """A part with no pages (a write task that got no rows) as a whole run."""
    _, _, t = parts
    first = _write(tmp_path / "two", range(1), shards=2)
    empty = first.with_name("two1")
    meta_empty = read_shard_metadata(empty)
    assert meta_empty.num_pages == 0
    template = read_shard_metadata(t)
    final = assemble_shard(t, [PageRun(empty, meta_empty, 0, 0)], template)
    assert t.read_bytes() == encode_header() + _tail(final, HEADER_SIZE)
    assert _publish(t, final) == []


@pytest.mark.parametrize("whole", ["first pages", "last pages"])
def test_one_run_of_part_of_a_file_is_copied_not_renamed(
    parts: tuple[Path, Path, Path], whole: str
) -> None:
    """Only a run of a whole file may take the file itself."""
    a, _, t = parts
    meta_a = read_shard_metadata(a)
    start, stop = (0, 2) if whole == "first pages" else (2, meta_a.num_pages)
    before = a.read_bytes()
    final = assemble_shard(t, [PageRun(a, meta_a, start, stop)], read_shard_metadata(t))
    assert a.read_bytes() == before
    assert final.page_rows.tolist() == meta_a.page_rows[start:stop].tolist()
    assert _publish(t, final) == _ids(meta_a, 0, start, stop)


def test_runs_longer_than_a_copy_step_are_copied_in_steps(
    parts: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shard_output, "_COPY_STEP", 100)
    a, b, t = parts
    meta_a, meta_b = read_shard_metadata(a), read_shard_metadata(b)
    runs = [PageRun(a, meta_a, 0, 2), PageRun(b, meta_b, 1, 3)]
    final = assemble_shard(t, runs, read_shard_metadata(t))
    assert _publish(t, final) == _ids(meta_a, 0, 0, 2) + _ids(meta_b, 1000, 1, 3)


def test_a_source_that_fails_to_close_after_its_copy_is_no_failure(
    parts: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pages were copied: a failing ``close`` of the read-only source changes nothing."""
    a, b, t = parts
    meta_a, meta_b = read_shard_metadata(a), read_shard_metadata(b)
    failed: list[int] = []

    def close(fd: int) -> None:
        os.close(fd)
        if not failed:  # the first run's source, closed after its copy
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(shard_output, "os", _OsProxy(close=close))
    runs = [PageRun(a, meta_a, 0, 1), PageRun(b, meta_b, 0, 1)]
    final = assemble_shard(t, runs, read_shard_metadata(t))
    monkeypatch.undo()
    assert len(failed) == 1
    assert _publish(t, final) == _ids(meta_a, 0, 0, 1) + _ids(meta_b, 1000, 0, 1)


def test_abort_after_a_failed_adopt_raises_nothing(tmp_path: Path) -> None:
    partial = tmp_path / "p"
    out = ShardOutput(partial)
    with pytest.raises(FileNotFoundError):
        out.adopt(tmp_path / "no_checkpoint", 64)
    out.abort()
    assert not partial.exists()


def test_a_run_copied_in_two_steps_the_last_of_one_byte(
    parts: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run that ends with its source's pages, in a step of all its bytes but one, then
    that one."""
    _, b, t = parts
    meta_b = read_shard_metadata(b)
    last = meta_b.num_pages
    block = meta_b.chunks[1:last].reshape(-1)
    span = int((block["offset"] + block["length"]).max()) - int(block["offset"].min())
    monkeypatch.setattr(shard_output, "_COPY_STEP", span - 1)  # two steps: span - 1, then 1
    final = assemble_shard(t, [PageRun(b, meta_b, 1, last)], read_shard_metadata(t))
    assert _publish(t, final) == _ids(meta_b, 1000, 1, last)
