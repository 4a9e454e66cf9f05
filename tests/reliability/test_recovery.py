"""Recovery of interrupted commits (issue 27, D1-D3, D8, D9): every journal is found, trusted
only when it belongs to the dataset, and finished before anyone reads or writes.

A commit is stopped in this process by a crash hook that raises at a chosen inner step
(``mrecord.storage.commit.crash_hook``); past the journal the writer leaves its files as a
killed process would (``reliability/crash.py`` does the same with real SIGKILLs).
"""

from __future__ import annotations

import errno
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, reindex, verify_dataset
from mrecord.errors import CorruptFileError, StoragePermissionError
from mrecord.storage import commit as commit_mod
from mrecord.storage.commit import DatasetLock
from mrecord.storage.naming import journal_path, partial_path, shard_file_names

SCHEMA = {"id": {"type": "int64"}, "payload": {"type": "bytes"}}


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "payload": b"%d;" % i * (1 + i % 7)} for i in range(start, start + n)]


def _create(folder: Path, name: str, shards: int, n: int = 40) -> list[Path]:
    with FileWriter(folder / name, shard_num=shards) as writer:
        writer.add_schema(SCHEMA)
        writer.add_index(["id"])
        writer.set_page_size(1024)  # several pages, so a tail is copied in several parts
        writer.write_raw_data(_rows(0, n))
    return shard_file_names(folder / name, shards)


def _check(first: Path, n: int) -> None:
    with DatasetReader.open(first, verify="always") as reader:
        assert reader.num_rows == n
        block = reader.read_rows(np.arange(n))
    ids = np.asarray(block.columns["id"]).tolist()
    assert sorted(ids) == list(range(n))
    payloads = block.columns["payload"]
    assert all(p == b"%d;" % i * (1 + i % 7) for i, p in zip(ids, payloads, strict=True))
    report = verify_dataset(first)
    assert report.ok and report.rows == n, report.problems


class _Stop(Exception):
    """Raised by the crash hook: the commit stops at a chosen step."""


def _stop_at(step: str) -> Callable[[str], None]:
    def hook(reached: str) -> None:
        if reached == step:
            raise _Stop(step)

    return hook


def _stopped_append(
    monkeypatch: pytest.MonkeyPatch, files: list[Path], start: int, n: int, step: str
) -> None:
    writer = FileWriter.open_for_append(files[-1])
    writer.write_raw_data(_rows(start, n))
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at(step))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)


def _stopped_create(
    monkeypatch: pytest.MonkeyPatch, folder: Path, name: str, shards: int, n: int, step: str
) -> list[Path]:
    writer = FileWriter(folder / name, shard_num=shards)
    writer.add_schema(SCHEMA)
    writer.add_index(["id"])
    writer.write_raw_data(_rows(0, n))
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at(step))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    return shard_file_names(folder / name, shards)


# -- D1: open_for_append locks and recovers before it reads a shard ------------------------


@pytest.mark.parametrize(("name", "shards"), [("d", 1), ("d", 2), ("ds1", 2)])
def test_append_after_a_kill_mid_tail_rolls_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, shards: int
) -> None:
    """Killed while its tail is half copied, an append is finished by the next appender."""
    files = _create(tmp_path, name, shards)
    _stopped_append(monkeypatch, files, 40, 60, "tail_part")
    with FileWriter.open_for_append(files[0]) as writer:
        writer.write_raw_data(_rows(100, 5))
    _check(files[0], 105)
    assert not journal_path(tmp_path, name).exists()


# -- D2: names that end in digits -----------------------------------------------------------

_DIGIT_NAMES = [("ds1", 2), ("v2", 3), ("train_2024", 2), ("x7", 11)]


@pytest.mark.parametrize(("name", "shards"), _DIGIT_NAMES)
def test_first_commit_of_a_name_ending_in_digits_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, shards: int
) -> None:
    """Stopped after its journal is durable, a first commit is finished by the first reader."""
    files = _stopped_create(monkeypatch, tmp_path, name, shards, 50, "journal")
    assert not files[0].exists()
    _check(files[0], 50)
    assert not journal_path(tmp_path, name).exists()


@pytest.mark.parametrize(("name", "shards"), _DIGIT_NAMES)
@pytest.mark.parametrize("opener", ["reader", "appender"])
def test_append_of_a_name_ending_in_digits_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, shards: int, opener: str
) -> None:
    """Killed mid-copy of a tail, the dataset is finished by whoever opens it first."""
    files = _create(tmp_path, name, shards)
    _stopped_append(monkeypatch, files, 40, 60, "tail_part")
    if opener == "appender":
        FileWriter.open_for_append(files[0]).abort()
    _check(files[0], 100)
    assert not journal_path(tmp_path, name).exists()


def test_a_neighbour_whose_name_is_a_prefix_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Datasets ``ds`` (ds0, ds1) and ``ds1`` (ds10, ds11) share a folder, each with an
    unfinished commit: opening one finishes its own journal and never touches the other."""
    ds = _create(tmp_path, "ds", 2)
    _stopped_append(monkeypatch, ds, 40, 10, "journal")
    ds1 = _stopped_create(monkeypatch, tmp_path, "ds1", 2, 30, "journal")
    other = journal_path(tmp_path, "ds").read_bytes()
    _check(ds1[0], 30)
    assert journal_path(tmp_path, "ds").read_bytes() == other
    _check(ds[1], 50)


# -- D3: reindex takes the lock before it reads ---------------------------------------------


def test_reindex_racing_an_append_publishes_the_new_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that commits just before reindex takes the lock: reindex indexes the
    generation it finds under the lock, so the dataset opens (and the .db matches) after."""
    files = _create(tmp_path, "d", 2)
    original = DatasetLock.acquire
    armed = [True]

    def append_first(self: DatasetLock, wait: float = 0.0) -> None:
        if armed[0]:
            armed[0] = False
            with FileWriter.open_for_append(files[0]) as writer:
                writer.write_raw_data(_rows(40, 20))
        original(self, wait)

    monkeypatch.setattr(DatasetLock, "acquire", append_first)
    reindex(files[0])
    monkeypatch.setattr(DatasetLock, "acquire", original)
    assert not armed[0]
    _check(files[0], 60)


# -- D8: a journal is trusted only when it belongs to the dataset ---------------------------


def _forge(folder: Path, name: str, doc: dict[str, Any]) -> Path:
    journal = journal_path(folder, name)
    journal.write_bytes(msgpack.packb(doc, use_bin_type=True))
    return journal


def _dataset_id(path: Path) -> str:
    with DatasetReader.open(path) as reader:
        return reader.shards[0].meta.dataset_id


@pytest.mark.parametrize("base", [1 << 40, "inside"])
def test_a_journal_whose_tail_lies_outside_the_shard_is_refused(
    tmp_path: Path, base: int | str
) -> None:
    """A tail offset past the shard's end (a 1 TiB sparse file) or not at a committed end
    (inside the pages) is refused before any byte is written."""
    files = _create(tmp_path, "ds", 2)
    size = files[0].stat().st_size
    offset = size // 2 if base == "inside" else base
    partial_path(files[0]).write_bytes(b"\0" * 64)
    _forge(tmp_path, "ds", {
        "dataset_id": _dataset_id(files[0]), "generation": 2, "files": [],
        "appends": [["ds0", offset, 64]], "db_appends": [],
    })
    before = files[0].read_bytes()
    with pytest.raises(CorruptFileError, match="journal") as info:
        DatasetReader.open(files[0])
    assert str(journal_path(tmp_path, "ds")) in str(info.value)
    assert files[0].read_bytes() == before
    with pytest.raises(CorruptFileError, match="journal"):
        FileWriter.open_for_append(files[1])
    assert files[0].read_bytes() == before


def test_a_journal_of_another_dataset_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal whose dataset id is not the shards' (copied from another dataset, or
    forged) is refused; the dataset's files are untouched."""
    files = _create(tmp_path, "ds", 2)
    _stopped_append(monkeypatch, files, 40, 20, "journal")
    journal = journal_path(tmp_path, "ds")
    doc = msgpack.unpackb(journal.read_bytes())
    doc["dataset_id"] = "f" * 32
    journal.write_bytes(msgpack.packb(doc, use_bin_type=True))
    before = [f.read_bytes() for f in files]
    with pytest.raises(CorruptFileError, match="another dataset"):
        DatasetReader.open(files[0])
    assert [f.read_bytes() for f in files] == before


def test_a_journal_naming_files_of_another_dataset_is_refused(tmp_path: Path) -> None:
    """A journal renames only its own dataset's files (NAME, NAME<digits>, their .db)."""
    files = _create(tmp_path, "ds", 2)
    victim = tmp_path / "other"
    victim.write_bytes(b"precious")
    partial_path(victim).write_bytes(b"overwritten")
    _forge(tmp_path, "ds", {"dataset_id": _dataset_id(files[0]), "generation": 1,
                            "files": ["other"]})
    with pytest.raises(CorruptFileError, match="journal"):
        DatasetReader.open(files[0])
    assert victim.read_bytes() == b"precious"


# -- D9: a read-only medium holding an unfinished commit ------------------------------------


def test_an_unfinished_commit_on_a_read_only_medium_is_a_typed_error(
    small_fs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(small_fs, "d", 2)
    _stopped_append(monkeypatch, files, 40, 20, "journal")
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    with pytest.raises(StoragePermissionError) as info:
        DatasetReader.open(files[0])
    text = str(info.value)
    assert info.value.errno == errno.EROFS, text
    assert str(journal_path(small_fs, "d")) in text and "read-write" in text, text
    with pytest.raises(StoragePermissionError):
        MindPage(str(files[0]))
    subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    _check(files[0], 60)  # writable again: the commit is finished, nothing was lost


def test_verify_during_a_commit_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``verify_dataset`` started while reindex publishes (its journal is there for a second):
    a commit in flight is not damage; verify waits for it and passes."""
    files = _create(tmp_path, "d", 2, 200)
    reports: list[Any] = []
    threads: list[threading.Thread] = []

    def hook(step: str) -> None:
        if step == "journal" and not threads:
            check = threading.Thread(target=lambda: reports.append(verify_dataset(files[0])))
            threads.append(check)
            threads[0].start()
            time.sleep(1.0)  # verify meets the journal of a live commit meanwhile

    monkeypatch.setattr(commit_mod, "crash_hook", hook)
    reindex(files[1])
    threads[0].join(timeout=60)
    assert len(reports) == 1 and reports[0].ok, reports[0].problems
