"""The background checksum thread (``mrecord.storage.verify_ahead``): it speeds up first
reads but never lets a damaged chunk through, stays paced by the readers, checks only
the columns being read, and stops with the reader."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.errors import ChecksumError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import verify_ahead
from mrecord.storage.verified import clear_verified

PAGES = 200
ROWS_PER_PAGE = 3


def _write(path: Path) -> None:
    """PAGES pages of ROWS_PER_PAGE blobs of 600 bytes."""
    with FileWriter(path) as writer:
        writer.add_schema({"label": {"type": "int32"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1300)
        n = PAGES * ROWS_PER_PAGE
        writer.write_raw_data(
            {
                "label": np.arange(n, dtype=np.int32),
                "blob": [bytes([i % 251]) * 600 for i in range(n)],
            }
        )


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "ds"
    _write(path)
    clear_verified()  # nothing checked by an earlier test's reader of another file
    return path


def _ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mrecord-verify-ahead"]


def test_a_damaged_chunk_is_never_served(dataset: Path) -> None:
    """The thread finds the damage and leaves the chunk unverified; the reader that
    reaches it raises ChecksumError, and every row read before is intact."""
    with DatasetReader.open(dataset) as probe:
        shard = probe.shards[0]
        pages = shard.meta.num_pages
        col = shard.field_index("blob")
        damaged_page = pages - 3
        offset = int(shard.meta.chunks[damaged_page, col]["offset"])
        damaged_rows = set(range(int(shard.page_starts[damaged_page]),
                                  int(shard.page_starts[damaged_page + 1])))
    with open(dataset, "r+b") as f:
        f.seek(offset + 10)
        f.write(b"\xff\x00\xff")
    clear_verified()
    with DatasetReader.open(dataset) as reader:
        shard = reader.shards[0]
        order = [i for i in range(reader.num_rows) if i not in damaged_rows]
        for i in order:  # every intact row, first page to last: the thread runs ahead
            assert reader.read_row(i)["blob"] == bytes([i % 251]) * 600
        assert shard._ahead is not None and shard._ahead.join(timeout=30)
        assert not shard._verified[damaged_page, col]
        with pytest.raises(ChecksumError, match=f"page {damaged_page}"):
            reader.read_row(min(damaged_rows))


def test_the_thread_checks_ahead_of_a_random_reader(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading every row in random order: the readers check fewer chunks themselves
    than there are, because the thread did the rest."""
    cold_by_readers: list[int] = []
    original = verify_ahead.VerifyAhead.note_cold_check

    def counting(self: verify_ahead.VerifyAhead, page: int, col: int) -> None:
        cold_by_readers.append(col)
        original(self, page, col)

    monkeypatch.setattr(verify_ahead.VerifyAhead, "note_cold_check", counting)
    with DatasetReader.open(dataset, columns=["blob"]) as reader:
        col = reader.shards[0].field_index("blob")
        rng = np.random.default_rng(0)
        for i in rng.permutation(reader.num_rows).tolist():
            assert reader.read_row(i)["blob"] == bytes([i % 251]) * 600
        shard = reader.shards[0]
        assert shard._ahead is not None and shard._ahead.join(timeout=30)
        assert shard._verified[:, col].all()
        # the label column was never read: the thread left it alone
        assert not shard._verified[:, shard.field_index("label")].any()
    assert len(cold_by_readers) < shard.meta.num_pages


def test_a_few_reads_do_not_check_the_whole_file(dataset: Path) -> None:
    """Paced: after k cold checks the thread checks at most LEAD * k + SLACK chunks."""
    with DatasetReader.open(dataset, columns=["blob"]) as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        starts = shard.page_starts
        cold = verify_ahead.START_AFTER + 4
        for page in range(cold):  # one row of each of the first pages
            reader.read_row(int(starts[page]))
        assert shard._ahead is not None and shard._ahead.join(timeout=30)  # idle: ends
        checked = int(shard._verified[:, col].sum())
        assert cold < checked <= cold + verify_ahead.LEAD * cold + verify_ahead.SLACK
        assert checked < shard.meta.num_pages


def test_close_stops_the_thread(dataset: Path) -> None:
    reader = DatasetReader.open(dataset)
    rng = np.random.default_rng(1)
    for i in rng.permutation(reader.num_rows)[: verify_ahead.START_AFTER * 3].tolist():
        reader.read_row(i)
    ahead = reader.shards[0]._ahead
    assert ahead is not None
    threads = [t for t in _ahead_threads() if t is ahead._thread]
    assert threads, "reading 48 pages cold should have started the thread"
    reader.close()
    assert not threads[0].is_alive()


def test_never_and_always_start_no_thread(dataset: Path) -> None:
    for verify in ("never", "always"):
        with DatasetReader.open(dataset, verify=verify) as reader:
            for i in range(0, reader.num_rows, ROWS_PER_PAGE):
                reader.read_row(i)
            assert reader.shards[0]._ahead is None


def test_the_thread_works_where_the_reader_reads(dataset: Path) -> None:
    """A reader of a region in the middle of the file gets that region checked ahead,
    not the start of the file."""
    with DatasetReader.open(dataset, columns=["blob"]) as reader:
        shard = reader.shards[0]
        col = shard.field_index("blob")
        assert shard.meta.num_pages == PAGES
        first, count = 40, verify_ahead.START_AFTER + 4  # the budget ends before page 200
        for page in range(first, first + count):
            reader.read_row(int(shard.page_starts[page]))
        assert shard._ahead is not None and shard._ahead.join(timeout=30)
        assert not shard._verified[:first, col].any()
        assert shard._verified[first + count : first + count + 10, col].all()


def _read_everything_in_child(reader: DatasetReader, out: object) -> None:
    """In a forked child: read every row through the parent's reader object."""
    rows = [reader.read_row(i)["blob"] for i in range(reader.num_rows)]
    ahead = reader.shards[0]._ahead
    ok = all(r == bytes([i % 251]) * 600 for i, r in enumerate(rows))
    out.put((ok, ahead is not None and ahead._pid == os.getpid()))  # type: ignore[attr-defined]


# Python >= 3.12 warns on any fork of a process with threads; forking after reading is
# what DataLoader workers do, and what this test checks is safe.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_reads_while_the_parents_thread_runs(dataset: Path) -> None:
    """DataLoader workers fork after the parent has read and use its reader: the child
    must not wait on the parent's thread or locks, and checks ahead with its own thread."""
    import multiprocessing

    parent = DatasetReader.open(dataset)
    rng = np.random.default_rng(2)
    for i in rng.permutation(parent.num_rows)[: verify_ahead.START_AFTER * 2].tolist():
        parent.read_row(i)  # the parent's thread is running now
    ahead = parent.shards[0]._ahead
    assert ahead is not None and ahead._thread is not None and ahead._thread.is_alive()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_read_everything_in_child, args=(parent, out))
    child.start()
    try:
        ok, own_thread = out.get(timeout=60)
    finally:
        child.join(30)
        parent.close()
    assert child.exitcode == 0
    assert ok and own_thread  # the inherited checker was reset for the child
