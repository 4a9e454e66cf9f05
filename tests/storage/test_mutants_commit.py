"""Tests written for mutants of mrecord/storage/commit.py, committed.py and transaction.py that
survived the storage and recovery tests (docs/RELIABILITY.md, "Mutation testing"): the journal
exactly as docs/FORMAT.md (*Commit*) gives it, every refusal of a journal or tail whole (the
file it names and what to do), the lock's wait and message, and each boundary of a tail."""

from __future__ import annotations

import errno
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, reindex, verify_dataset
from mrecord.errors import (
    CorruptFileError,
    DatasetLockedError,
    StoragePermissionError,
    UnsupportedPlatformError,
)
from mrecord.format.layout import Trailer
from mrecord.storage import commit as commit_mod
from mrecord.storage.commit import DatasetLock, TailAppend
from mrecord.storage.failures import advice_for
from mrecord.storage.naming import journal_path, lock_path, partial_path, shard_file_names

SCHEMA = {"id": {"type": "int64"}}


class _Stop(Exception):
    """Raised by the crash hook: the commit stops at a chosen step."""


def _stop_at(step: str) -> Callable[[str], None]:
    def hook(reached: str) -> None:
        if reached == step:
            raise _Stop(step)

    return hook


def _create(folder: Path, name: str, shards: int, rows: int = 10) -> list[Path]:
    with FileWriter(folder / name, shard_num=shards) as writer:
        writer.add_schema(SCHEMA)
        writer.add_index(["id"])
        writer.write_raw_data({"id": np.arange(rows, dtype=np.int64)})
    return shard_file_names(folder / name, shards)


def _ids(first: Path) -> list[int]:
    with DatasetReader.open(first) as reader:
        return sorted(np.asarray(reader.read_rows(np.arange(reader.num_rows)).columns["id"]))


def _dataset_id(first: Path) -> str:
    with DatasetReader.open(first) as reader:
        return reader.shards[0].meta.dataset_id


# -- the journal, as docs/FORMAT.md gives it -----------------------------------------------------


def test_a_first_commits_journal_names_every_final(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = FileWriter(tmp_path / "ds", shard_num=2)
    writer.add_schema(SCHEMA)
    writer.add_index(["id"])
    writer.write_raw_data({"id": np.arange(4, dtype=np.int64)})
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at("journal"))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    doc = msgpack.unpackb(journal_path(tmp_path, "ds").read_bytes(), raw=True)
    assert set(doc) == {b"dataset_id", b"generation", b"files"}
    assert isinstance(doc[b"dataset_id"], str | bytes) and doc[b"generation"] == 1
    assert doc[b"files"] == [b"ds0", b"ds1", b"ds0.db", b"ds1.db"]
    assert not partial_path(journal_path(tmp_path, "ds")).exists()  # renamed into place
    assert sorted(_ids(tmp_path / "ds0")) == [0, 1, 2, 3]  # the reader finishes it


def test_an_appends_journal_records_each_tail_and_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path, "ds", 2)
    sizes = [f.stat().st_size for f in files]
    dataset_id = _dataset_id(files[0])
    writer = FileWriter.open_for_append(files[0])
    writer.write_raw_data({"id": np.arange(10, 14, dtype=np.int64)})
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at("journal"))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    raw = journal_path(tmp_path, "ds").read_bytes()
    doc = msgpack.unpackb(raw, raw=False)
    tails = [partial_path(f).stat().st_size for f in files]
    assert doc == {
        "dataset_id": dataset_id,
        "generation": 2,
        "files": [],
        "appends": [["ds0", sizes[0], tails[0]], ["ds1", sizes[1], tails[1]]],
        "db_appends": ["ds0.db", "ds1.db"],
    }
    assert raw == msgpack.packb(doc, use_bin_type=True)  # str keys and values, not bin
    assert _ids(files[0]) == list(range(14))


# -- read_journal: what a damaged journal says ------------------------------------------------


def _journal(folder: Path, doc: Any) -> Path:
    journal = journal_path(folder, "ds")
    journal.write_bytes(msgpack.packb(doc, use_bin_type=True))
    return journal


def _damaged(journal: Path, why: str) -> str:
    return (
        f"commit journal {str(journal)!r} is damaged ({why}); the files it names are from an "
        "unfinished commit: delete the journal to keep the previous generation"
    )


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([1, 2], "journal is not a map"),
        ({"dataset_id": "a", "files": []}, "journal generation is not an int"),
        ({"dataset_id": "a", "generation": True, "files": []}, "journal generation is not an int"),
        ({"dataset_id": "a", "generation": "1", "files": []}, "journal generation is not an int"),
        ({"generation": 1, "files": []}, "journal dataset_id is not a str"),
        ({"dataset_id": 7, "generation": 1, "files": []}, "journal dataset_id is not a str"),
        (
            {"dataset_id": "a", "generation": 1, "files": [], "appends": [["ds0", -1, 5]]},
            "journal append entry ['ds0', -1, 5] is malformed",
        ),
        (
            {"dataset_id": "a", "generation": 1, "files": [], "appends": [["ds0", 64, 0]]},
            "journal append entry ['ds0', 64, 0] is malformed",
        ),
        (
            {"dataset_id": "a", "generation": 1, "files": [], "appends": [["ds0", "64", 5]]},
            "journal append entry ['ds0', '64', 5] is malformed",
        ),
        (
            {"dataset_id": "a", "generation": 1, "files": [], "appends": [["ds0", 64, "5"]]},
            "journal append entry ['ds0', 64, '5'] is malformed",
        ),
        ({"dataset_id": "a", "generation": 1}, "'files'"),
    ],
)
def test_a_damaged_journal_says_what_is_wrong(tmp_path: Path, doc: Any, why: str) -> None:
    journal = _journal(tmp_path, doc)
    with pytest.raises(CorruptFileError) as info:
        commit_mod.read_journal(journal)
    assert str(info.value) == _damaged(journal, why)
    assert info.value.path == str(journal)


def test_a_journal_append_at_zero_of_one_byte_is_well_formed(tmp_path: Path) -> None:
    journal = _journal(
        tmp_path,
        {"dataset_id": "a", "generation": 3, "files": ["ds0"], "appends": [["ds1", 0, 1]],
         "db_appends": ["ds1.db"]},
    )
    done = commit_mod.read_journal(journal)
    assert (done.generation, done.dataset_id, done.files, done.db_appends) == (
        3, "a", ["ds0"], ["ds1.db"]
    )
    assert done.appends == [TailAppend("ds1", 0, 1)]


def test_a_journal_of_up_to_one_mib_is_read(tmp_path: Path) -> None:
    limit = 1 << 20
    names = ["ds"] * 1000
    doc = {"dataset_id": "x" * 100, "generation": 1, "files": names}
    pad = limit - len(msgpack.packb(doc, use_bin_type=True))
    doc["dataset_id"] = "x" * (100 + pad - 3)  # str 8 -> str 32 header: 3 bytes more
    journal = _journal(tmp_path, doc)
    assert journal.stat().st_size == limit
    assert commit_mod.read_journal(journal).files == names
    journal.write_bytes(journal.read_bytes() + b"\0")
    with pytest.raises(CorruptFileError) as info:
        commit_mod.read_journal(journal)
    assert str(info.value) == _damaged(journal, "journal is too large")


# -- the lock -----------------------------------------------------------------------------------


def test_a_locked_dataset_names_its_lock_file(tmp_path: Path) -> None:
    first = DatasetLock(tmp_path, "ds")
    first.acquire()
    assert first.held and first.path == lock_path(tmp_path, "ds")
    second = DatasetLock(tmp_path, "ds")
    with pytest.raises(DatasetLockedError) as info:
        second.acquire()
    assert str(info.value) == (
        f"dataset is locked: another process is writing it (lock file {str(first.path)!r}); "
        "wait for it to commit, or stop it"
    )
    assert not second.held
    first.release()
    first.release()  # idempotent
    assert not first.held
    second.acquire()
    second.release()


def test_a_lock_waits_for_its_holder(tmp_path: Path) -> None:
    first = DatasetLock(tmp_path, "ds")
    first.acquire()
    timer = threading.Timer(0.2, first.release)
    timer.start()
    second = DatasetLock(tmp_path, "ds")
    try:
        second.acquire(wait=30.0)  # returns once the holder lets go
        assert second.held and not first.held
    finally:
        timer.join()
        second.release()


def test_the_lock_file_is_readable_by_all(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        lock = DatasetLock(tmp_path, "ds")
        lock.acquire()
        lock.release()
    finally:
        os.umask(old)
    assert lock.path.stat().st_mode & 0o777 == 0o644


def test_a_lock_that_cannot_be_taken_closes_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_lock(fd: int, why: str) -> bool:
        raise OSError(errno.ENOLCK, "No locks available")

    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(commit_mod, "try_lock", no_lock)
    with pytest.raises(OSError, match="No locks available"):
        DatasetLock(tmp_path, "ds").acquire()
    held = DatasetLock(tmp_path, "ds")
    monkeypatch.undo()
    held.acquire()
    other = DatasetLock(tmp_path, "ds")
    with pytest.raises(DatasetLockedError):
        other.acquire(wait=0.05)
    held.release()
    assert len(os.listdir("/proc/self/fd")) == before


# -- tails ----------------------------------------------------------------------------------------


def test_a_tail_goes_at_its_committed_end_and_cuts_what_lies_beyond(tmp_path: Path) -> None:
    final = tmp_path / "ds0"
    final.write_bytes(b"A" * 100 + b"Z" * 50)  # 50 bytes of a torn earlier copy past E
    partial_path(final).write_bytes(bytes(range(30)))
    commit_mod.apply_tail(final, TailAppend("ds0", 100, 30))
    assert final.read_bytes() == b"A" * 100 + bytes(range(30))


def test_a_tail_is_copied_in_at_least_two_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    monkeypatch.setattr(commit_mod, "crash_hook", steps.append)
    for length, parts in [(1, 1), (2, 2), (3, 3), (4, 2), (1001, 3)]:
        final = tmp_path / f"ds{length}"
        final.write_bytes(b"A" * 7)
        tail = bytes(i % 251 for i in range(length))
        partial_path(final).write_bytes(tail)
        steps.clear()
        commit_mod.apply_tail(final, TailAppend(final.name, 7, length))
        assert final.read_bytes() == b"A" * 7 + tail
        assert steps == ["tail_part"] * (parts - 1), length


def test_a_large_tail_is_copied_in_blocks_of_8_mib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: list[int] = []
    copy = commit_mod.copy_range

    def counting(src: int, dst: int, src_offset: int, dst_offset: int, count: int) -> int:
        counts.append(count)
        return copy(src, dst, src_offset, dst_offset, count)

    monkeypatch.setattr(commit_mod, "copy_range", counting)
    final = tmp_path / "ds0"
    final.write_bytes(b"")
    length = (8 << 20) * 2 + 5
    partial_path(final).write_bytes(b"\1" * length)
    commit_mod.apply_tail(final, TailAppend("ds0", 0, length))
    assert counts[0] == 8 << 20 and sum(counts) >= length
    assert final.stat().st_size == length


def test_a_missing_tail_is_fine_only_when_it_was_applied(tmp_path: Path) -> None:
    final = tmp_path / "ds0"
    final.write_bytes(b"A" * 130)
    commit_mod.apply_tail(final, TailAppend("ds0", 100, 30))  # applied before: nothing to do
    assert final.read_bytes() == b"A" * 130
    with pytest.raises(CorruptFileError) as info:
        commit_mod.apply_tail(final, TailAppend("ds0", 100, 31))
    staged = partial_path(final)
    assert str(info.value) == (
        f"commit journal names the tail {str(staged)!r}, which is missing, and {str(final)!r} "
        "is not 131 bytes long; the commit cannot be finished: delete the journal and truncate "
        "the file to its previous length to keep the previous generation"
    )
    assert info.value.path == str(staged)
    assert final.read_bytes() == b"A" * 130


def test_a_tail_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    final = tmp_path / "ds0"
    final.write_bytes(b"A" * 100)
    staged = partial_path(final)
    staged.write_bytes(b"B" * 29)
    with pytest.raises(CorruptFileError) as info:
        commit_mod.apply_tail(final, TailAppend("ds0", 100, 30))
    assert str(info.value) == (
        f"tail {str(staged)!r} is not the 30 bytes its journal records; the commit cannot be "
        "finished"
    )
    assert info.value.path == str(staged)
    assert final.read_bytes() == b"A" * 100


@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP])
def test_copy_range_falls_back_to_pread_and_pwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def refused(*args: int) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refused, raising=False)
    (tmp_path / "src").write_bytes(b"0123456789")
    (tmp_path / "dst").write_bytes(b"abcdefghij")
    with open(tmp_path / "src", "rb") as src, open(tmp_path / "dst", "r+b") as dst:
        assert commit_mod.copy_range(src.fileno(), dst.fileno(), 2, 5, 4) == 4
    assert (tmp_path / "dst").read_bytes() == b"abcde2345j"


def test_copy_range_without_copy_file_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    (tmp_path / "src").write_bytes(b"0123456789")
    (tmp_path / "dst").write_bytes(b"")
    with open(tmp_path / "src", "rb") as src, open(tmp_path / "dst", "r+b") as dst:
        assert commit_mod.copy_range(src.fileno(), dst.fileno(), 8, 0, 4) == 2
        with pytest.raises(CorruptFileError) as info:
            commit_mod.copy_range(src.fileno(), dst.fileno(), 10, 2, 4)
    assert str(info.value) == "tail ended early at byte 10" and info.value.offset == 10
    assert (tmp_path / "dst").read_bytes() == b"89"


def test_copy_range_passes_on_other_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: int) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "copy_file_range", failing, raising=False)
    (tmp_path / "src").write_bytes(b"0123456789")
    (tmp_path / "dst").write_bytes(b"")
    with (
        open(tmp_path / "src", "rb") as src,
        open(tmp_path / "dst", "r+b") as dst,
        pytest.raises(OSError) as info,
    ):
        commit_mod.copy_range(src.fileno(), dst.fileno(), 0, 0, 4)
    assert info.value.errno == errno.EIO


def test_copy_range_copies_in_the_kernel_when_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, int, int]] = []
    real = os.copy_file_range

    def spy(src: int, dst: int, count: int, offset_src: int, offset_dst: int) -> int:
        calls.append((count, offset_src, offset_dst))
        return real(src, dst, count, offset_src, offset_dst)

    def no_pread(*args: int) -> bytes:
        raise AssertionError("pread used although copy_file_range copied")

    monkeypatch.setattr(os, "copy_file_range", spy)
    monkeypatch.setattr(os, "pread", no_pread)
    (tmp_path / "src").write_bytes(b"0123456789")
    (tmp_path / "dst").write_bytes(b"abc")
    with open(tmp_path / "src", "rb") as src, open(tmp_path / "dst", "r+b") as dst:
        assert commit_mod.copy_range(src.fileno(), dst.fileno(), 4, 1, 3) == 3
    assert calls == [(3, 4, 1)]
    assert (tmp_path / "dst").read_bytes() == b"a456"


# -- committed_dataset_id ------------------------------------------------------------------------


def test_the_dataset_id_of_a_committed_end(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 1)
    size = files[0].stat().st_size
    dataset_id = _dataset_id(files[0])
    assert commit_mod.committed_dataset_id(files[0], size) == dataset_id
    assert commit_mod.committed_dataset_id(files[0], size - 1) is None  # no trailer ends there
    assert commit_mod.committed_dataset_id(files[0], size + 1) is None  # past the end
    assert commit_mod.committed_dataset_id(files[0], 95) is None  # shorter than header+trailer
    body = bytearray(files[0].read_bytes())
    body[size - 40] ^= 0xFF  # inside the metadata: its checksum fails
    files[0].write_bytes(bytes(body))
    assert commit_mod.committed_dataset_id(files[0], size) is None


def test_a_generation_as_short_as_a_header_and_a_trailer_is_looked_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """96 bytes can hold a generation's end: the trailer is read, not skipped."""
    seen: list[int] = []
    final = tmp_path / "ds0"
    final.write_bytes(b"\0" * 96)
    parse = Trailer.parse

    def spy(data: bytes, file_size: int) -> Any:
        seen.append(file_size)
        return parse(data, file_size)

    monkeypatch.setattr(Trailer, "parse", spy)
    assert commit_mod.committed_dataset_id(final, 96) is None
    assert commit_mod.committed_dataset_id(final, 95) is None
    assert seen == [96]


def test_remove_partials_removes_only_the_partials_of_the_finals(tmp_path: Path) -> None:
    for name in ["a", "a.mrecord-partial", "b.mrecord-partial", "c"]:
        (tmp_path / name).write_bytes(b"x")
    commit_mod.remove_partials([tmp_path / "a", tmp_path / "c", tmp_path / "missing"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b.mrecord-partial", "c"]


def test_recover_without_a_journal_does_nothing(tmp_path: Path) -> None:
    assert commit_mod.recover(tmp_path, "ds") is False
    assert commit_mod.recover_locked(tmp_path, "ds") is False
    assert list(tmp_path.iterdir()) == []  # not even a lock file


def test_recover_finishes_a_commit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path, "ds", 2)
    writer = FileWriter.open_for_append(files[0])
    writer.write_raw_data({"id": np.arange(10, 12, dtype=np.int64)})
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at("renamed_one"))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    assert commit_mod.recover(tmp_path, "ds") is True
    assert not journal_path(tmp_path, "ds").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ds.mrecord-lock", "ds0", "ds0.db", "ds1", "ds1.db"
    ]
    assert _ids(files[0]) == list(range(12))


def test_recover_waits_for_a_live_writer(tmp_path: Path) -> None:
    """A journal while a writer holds the lock: recover waits, then finds it finished."""
    files = _create(tmp_path, "ds", 1)
    holder = DatasetLock(tmp_path, "ds")
    holder.acquire()
    journal = journal_path(tmp_path, "ds")
    journal.write_bytes(b"unreadable")  # what the writer is publishing

    def finish() -> None:
        journal.unlink()
        holder.release()

    timer = threading.Timer(0.2, finish)
    timer.start()
    try:
        assert commit_mod.recover(tmp_path, "ds", wait=30.0) is True
    finally:
        timer.join()
    assert _ids(files[0]) == list(range(10))


# -- the steps the crash harness stops at ---------------------------------------------------------


def _append(first: Path, start: int, n: int) -> FileWriter:
    writer = FileWriter.open_for_append(first)
    writer.write_raw_data({"id": np.arange(start, start + n, dtype=np.int64)})
    return writer


def test_publishing_passes_the_documented_steps_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash harness (reliability/steps.py) stops a commit at these names; each file
    renamed, each tail applied and each .db merged is one ``renamed_one``."""
    steps: list[str] = []
    monkeypatch.setattr(commit_mod, "crash_hook", steps.append)
    files = _create(tmp_path, "ds", 2)
    assert steps == ["journal", *["renamed_one"] * 4, "renamed_all"]
    steps.clear()
    with _append(files[0], 10, 6):
        pass
    # each tail is copied in two steps at least (three when its length is odd)
    assert [step for step, _ in itertools.groupby(steps)] == [
        "journal", "tail_part", "renamed_one", "tail_part", "renamed_one", "renamed_all"
    ]
    assert steps.count("renamed_one") == 4
    steps.clear()
    reindex(files[0])
    assert steps == ["journal", "renamed_one", "renamed_one", "renamed_all"]
    assert _ids(files[0]) == list(range(16))


def _stop_at_nth(step: str, nth: int) -> Callable[[str], None]:
    seen = [0]

    def hook(reached: str) -> None:
        if reached == step:
            seen[0] += 1
            if seen[0] == nth:
                raise _Stop(step)

    return hook


@pytest.mark.parametrize(
    ("step", "nth"),
    [("journal", 1), ("tail_part", 1), ("renamed_one", 1), ("tail_part", 2),
     ("renamed_one", 2), ("renamed_one", 3), ("renamed_one", 4), ("renamed_all", 1)],
)
def test_an_append_stopped_at_any_step_is_finished_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, nth: int
) -> None:
    """Stopped after a .db was merged (``renamed_one`` 3 and 4), the roll-forward must not
    merge it again: its rows would be there twice."""
    files = _create(tmp_path, "ds", 2)
    writer = _append(files[0], 10, 6)
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at_nth(step, nth))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    assert journal_path(tmp_path, "ds").exists()
    assert _ids(files[1]) == list(range(16))
    assert not journal_path(tmp_path, "ds").exists()
    report = verify_dataset(files[0])
    assert report.ok and report.rows == 16, report.problems
    page = MindPage(files[0])
    page.set_category_field("id")
    assert page.read_at_page_by_name(13, 0, 10)[0]["id"] == 13
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ds.mrecord-lock", "ds0", "ds0.db", "ds1", "ds1.db"
    ]


def test_a_lock_without_wait_never_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = DatasetLock(tmp_path, "ds")
    holder.acquire()
    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    with pytest.raises(DatasetLockedError):
        DatasetLock(tmp_path, "ds").acquire()
    assert naps == []
    holder.release()


def test_a_lock_without_fcntl_says_why_and_closes_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl now raises ImportError
    lock = DatasetLock(tmp_path, "ds")
    with pytest.raises(UnsupportedPlatformError) as info:
        lock.acquire()
    assert str(info.value).startswith("writing a dataset needs fcntl file locks")
    assert not lock.held and len(os.listdir("/proc/self/fd")) == before


def test_a_tail_is_copied_without_copy_file_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    final = tmp_path / "ds0"
    final.write_bytes(b"A" * 10)
    tail = bytes(range(101))
    partial_path(final).write_bytes(tail)
    commit_mod.apply_tail(final, TailAppend("ds0", 10, len(tail)))
    assert final.read_bytes() == b"A" * 10 + tail


def test_copy_range_at_the_end_of_its_source_is_an_error(tmp_path: Path) -> None:
    """copy_file_range copies nothing at the end of the source: that is a short tail, not a
    copy of 0 bytes (the caller would wait for the rest forever)."""
    (tmp_path / "src").write_bytes(b"0123456789")
    (tmp_path / "dst").write_bytes(b"")
    with (
        open(tmp_path / "src", "rb") as src,
        open(tmp_path / "dst", "r+b") as dst,
        pytest.raises(CorruptFileError, match="tail ended early at byte 10"),
    ):
        commit_mod.copy_range(src.fileno(), dst.fileno(), 10, 0, 4)


# -- check_journal: every refusal whole ---------------------------------------------------------


def _refusal(journal: Path, why: str) -> str:
    return (
        f"commit journal {str(journal)!r} {why}; it cannot be rolled forward: if the "
        "dataset's files are yours, delete the journal to keep the previous generation"
    )


def _check(folder: Path, name: str, doc: dict[str, Any]) -> None:
    journal = journal_path(folder, name)
    journal.write_bytes(msgpack.packb(doc, use_bin_type=True))
    commit_mod.check_journal(folder, name, commit_mod.read_journal(journal), journal)


def _refused(folder: Path, name: str, doc: dict[str, Any], why: str) -> None:
    with pytest.raises(CorruptFileError) as info:
        _check(folder, name, doc)
    journal = journal_path(folder, name)
    assert str(info.value) == _refusal(journal, why)
    assert info.value.path == str(journal)


@pytest.mark.parametrize("name", ["other", "xy", "dsx", "ds0x", "dsx.db", "d", "ds1.dbx"])
def test_a_journal_naming_a_file_of_another_dataset_is_refused(
    tmp_path: Path, name: str
) -> None:
    doc = {"dataset_id": "a", "generation": 1, "files": [name]}
    _refused(tmp_path, "ds", doc, f"names {name!r}, which is not a file of dataset 'ds'")


def test_a_journal_naming_the_datasets_own_files_passes(tmp_path: Path) -> None:
    names = ["ds", "ds.db", "ds0", "ds12", "ds12.db"]
    _check(tmp_path, "ds", {"dataset_id": "a", "generation": 1, "files": names})


def test_a_journal_whose_tails_do_not_fit_is_refused_naming_the_shard(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    final, size, dataset_id = files[0], files[0].stat().st_size, _dataset_id(files[0])
    base = {"dataset_id": dataset_id, "generation": 2, "files": []}
    _refused(tmp_path, "ds", {**base, "appends": [["ds7", size, 10]]},
             "appends to 'ds7', which does not exist")
    _refused(tmp_path, "ds", {**base, "appends": [["ds0", size + 1, 10]]},
             f"records a tail at byte {size + 1} of {str(final)!r}, past its end ({size} bytes)")
    _refused(tmp_path, "ds", {**base, "appends": [["ds0", size - 1, 10]]},
             f"records a tail at byte {size - 1} of {str(final)!r}, where no committed "
             "generation of it ends")
    _refused(tmp_path, "ds", {**base, "dataset_id": "f" * 32, "appends": [["ds0", size, 10]]},
             f"belongs to another dataset (id {'f' * 32!r}; {str(final)!r} is {dataset_id!r})")
    # at its committed end, with or without the .db (a journal need not pair them)
    _check(tmp_path, "ds", {**base, "appends": [["ds0", size, 10]]})
    _check(tmp_path, "ds", {**base, "appends": [["ds0", size, 10]], "db_appends": ["ds0.db"]})


def test_a_journal_of_another_datasets_files_is_refused_naming_the_file(tmp_path: Path) -> None:
    """The partial is what a roll-forward would rename, so it is what is checked while it
    exists; the final otherwise; a file that cannot be read is left to the reader."""
    files = _create(tmp_path, "data", 2)
    (tmp_path / "o").mkdir()
    other = _create(tmp_path / "o", "data", 2)
    ours, theirs = _dataset_id(files[0]), _dataset_id(other[0])
    final = files[1]
    doc = {"dataset_id": ours, "generation": 2, "files": ["data1"]}
    _check(tmp_path, "data", doc)
    partial_path(final).write_bytes(other[1].read_bytes())
    _refused(tmp_path, "data", doc,
             f"belongs to another dataset (id {ours!r}; {str(final)!r} is {theirs!r})")
    partial_path(final).unlink()
    mine = {**doc, "dataset_id": theirs}
    _refused(tmp_path, "data", mine,
             f"belongs to another dataset (id {theirs!r}; {str(final)!r} is {ours!r})")
    # an unreadable first file does not end the checks; a .db names its data file
    for names in (["data5", "data1"], ["data0.db"], ["data5.db", "data1.db"]):
        with pytest.raises(CorruptFileError, match="belongs to another dataset"):
            _check(tmp_path, "data", {**mine, "files": names})


# -- recover on a folder it may not write -------------------------------------------------------


def _unlockable(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def refused(self: DatasetLock, wait: float = 0.0) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(DatasetLock, "acquire", refused)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS])
def test_a_commit_that_cannot_be_finished_here_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    journal = journal_path(tmp_path, "ds")
    journal.write_bytes(b"x")
    _unlockable(monkeypatch, code)
    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    with pytest.raises(StoragePermissionError) as info:
        commit_mod.recover(tmp_path, "ds", wait=0.0)
    lock = lock_path(tmp_path, "ds")
    assert str(info.value) == (
        f"cannot finish the interrupted commit of dataset 'ds': failed on {str(lock)!r}: "
        f"{os.strerror(code)} ({errno.errorcode[code]}); the commit is durable (journal "
        f"{str(journal)!r}) but not published; nothing is lost, and opening the dataset where "
        f"it can be written finishes it; {advice_for(code)}"
    )
    assert info.value.errno == code and info.value.path == str(lock)
    assert naps == []  # wait=0: no writer is waited for


def test_a_read_only_file_system_has_no_writer_to_wait_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal_path(tmp_path, "ds").write_bytes(b"x")
    _unlockable(monkeypatch, errno.EROFS)
    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    with pytest.raises(StoragePermissionError):
        commit_mod.recover(tmp_path, "ds", wait=3600.0)
    assert naps == []


def test_a_writer_that_finishes_while_we_wait_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = journal_path(tmp_path, "ds")
    journal.write_bytes(b"x")
    _unlockable(monkeypatch, errno.EACCES)
    timer = threading.Timer(0.2, journal.unlink)
    timer.start()
    try:
        assert commit_mod.recover(tmp_path, "ds", wait=3600.0) is False
    finally:
        timer.join()


def test_other_lock_failures_pass_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal_path(tmp_path, "ds").write_bytes(b"x")
    _unlockable(monkeypatch, errno.EIO)
    with pytest.raises(OSError) as info:
        commit_mod.recover(tmp_path, "ds", wait=0.0)
    assert type(info.value) is OSError and info.value.errno == errno.EIO

    def locked(self: DatasetLock, wait: float = 0.0) -> None:
        raise DatasetLockedError("locked")

    monkeypatch.setattr(DatasetLock, "acquire", locked)
    with pytest.raises(DatasetLockedError):
        commit_mod.recover(tmp_path, "ds", wait=0.0)


def test_recover_locked_says_it_finished_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = FileWriter(tmp_path / "ds")
    writer.add_schema(SCHEMA)
    writer.write_raw_data({"id": np.arange(3, dtype=np.int64)})
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at("journal"))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    lock = DatasetLock(tmp_path, "ds")
    lock.acquire()
    try:
        assert commit_mod.recover_locked(tmp_path, "ds") is True
    finally:
        lock.release()
    assert _ids(tmp_path / "ds") == [0, 1, 2]
