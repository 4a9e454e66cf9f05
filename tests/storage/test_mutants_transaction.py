"""Tests written for mutants of mrecord/storage/transaction.py that survived the storage and
recovery tests (docs/RELIABILITY.md, "Mutation testing"): each refusal and failure of a
transaction whole (the file, the dataset, its state and what to do), what an abort removes,
and what an append or a reindex starts from."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, verify_dataset
from mrecord.errors import (
    ChecksumError,
    CorruptFileError,
    DatasetExistsError,
    DatasetLockedError,
    DiskFullError,
    StorageError,
    StoragePermissionError,
    WriterStateError,
)
from mrecord.storage import commit as commit_mod
from mrecord.storage import transaction as txn_mod
from mrecord.storage.commit import DatasetLock
from mrecord.storage.naming import db_path, journal_path, partial_path, shard_file_names
from mrecord.storage.transaction import StagedShard, Transaction, TransactionState
from tests.storage.test_transaction import _stage

UNTOUCHED = "nothing was written; the dataset's files are as they were"
DURABLE = (
    "the commit is durable (its journal was written) but publishing stopped; the next open "
    "of the dataset finishes it"
)


def _create(
    folder: Path, name: str, shards: int, rows: int = 10, overwrite: bool = False
) -> list[Path]:
    with FileWriter(folder / name, shard_num=shards, overwrite=overwrite) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        ids = np.arange(rows, dtype=np.int64)
        writer.write_raw_data({"id": ids, "label": (ids % 3).astype(np.int32)})
    return shard_file_names(folder / name, shards)


def test_a_lock_file_that_cannot_be_opened_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: DatasetLock, wait: float = 0.0) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(DatasetLock, "acquire", refused)
    with pytest.raises(StoragePermissionError) as info:
        Transaction.begin(tmp_path, "ds", action="append to")
    lock = tmp_path / "ds.mrecord-lock"
    assert str(info.value) == (
        f"cannot append to dataset: failed on lock file {str(lock)!r}: Permission denied "
        f"(EACCES); {UNTOUCHED}; check the permissions of the folder and its files, then retry"
    )
    assert info.value.operation == "append to dataset: failed on lock file"


def test_a_locked_dataset_is_refused_as_such(tmp_path: Path) -> None:
    txn = Transaction.begin(tmp_path, "ds")
    with pytest.raises(DatasetLockedError):
        Transaction.begin(tmp_path, "ds")
    txn.abort()


def test_a_damaged_journal_at_begin_releases_the_lock(tmp_path: Path) -> None:
    journal = journal_path(tmp_path, "ds")
    journal.write_bytes(b"\xc1")  # never valid MessagePack
    with pytest.raises(CorruptFileError, match="is damaged"):
        Transaction.begin(tmp_path, "ds")
    journal.unlink()
    Transaction.begin(tmp_path, "ds").abort()  # the lock was released


def test_an_existing_file_is_refused_naming_it_and_the_way_out(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    txn = Transaction.begin(tmp_path, "ds")
    with pytest.raises(DatasetExistsError) as info:
        txn.claim(files, overwrite=False)
    assert str(info.value) == (
        f"{str(files[0])!r} already exists; pass overwrite=True to replace the dataset, or use "
        "FileWriter.open_for_append to add rows"
    )
    assert txn.state is TransactionState.ABORTED


def test_only_a_db_left_is_an_existing_file_too(tmp_path: Path) -> None:
    db_path(tmp_path / "ds").write_bytes(b"x")
    txn = Transaction.begin(tmp_path, "ds")
    with pytest.raises(DatasetExistsError, match=r"ds\.db' already exists"):
        txn.claim([tmp_path / "ds"], overwrite=False)


@pytest.mark.parametrize("which", ["ds1", "ds1.db"])
def test_a_folder_where_a_file_belongs_is_named(tmp_path: Path, which: str) -> None:
    (tmp_path / which).mkdir()
    txn = Transaction.begin(tmp_path, "ds", action="create")
    with pytest.raises(StorageError) as info:
        txn.claim(shard_file_names(tmp_path / "ds", 2), overwrite=True)
    folder = tmp_path / which
    assert str(info.value) == (
        f"cannot create dataset: failed on {str(folder)!r}: Is a directory (EISDIR); "
        f"{UNTOUCHED}; a folder stands where a data file belongs: move it away and retry"
    )
    assert info.value.errno == errno.EISDIR and info.value.path == str(folder)
    assert txn.state is TransactionState.ABORTED


def test_claim_removes_the_litter_of_a_killed_writer(tmp_path: Path) -> None:
    files = shard_file_names(tmp_path / "ds", 2)
    litter = [partial_path(p) for f in files for p in (f, db_path(f))]
    litter.append(partial_path(journal_path(tmp_path, "ds")))
    for path in litter:
        path.write_bytes(b"x")
    other = tmp_path / "other.mrecord-partial"
    other.write_bytes(b"x")
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(files, overwrite=False)
    assert [p for p in litter if p.exists()] == [] and other.exists()
    txn.abort()


def test_a_finished_transaction_refuses_everything_saying_why(tmp_path: Path) -> None:
    txn = Transaction.begin(tmp_path, "ds")
    txn.abort()
    txn.abort()  # idempotent
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda: txn.claim([tmp_path / "ds"], overwrite=True), "claim files"),
        (lambda: txn.commit("0" * 32, 1, []), "commit"),
        (lambda: txn.stage_index(StagedShard(tmp_path / "ds", None)), "stage an index"),  # type: ignore[arg-type]
    ]
    for call, what in calls:
        with pytest.raises(WriterStateError) as info:
            call()
        assert str(info.value) == f"cannot {what}: the transaction is aborted"
    committed = Transaction.begin(tmp_path, "ds")
    committed.claim([], overwrite=False)
    committed.commit("0" * 32, 1, [])
    assert committed.state is TransactionState.COMMITTED and committed.durable
    with pytest.raises(WriterStateError) as info:
        committed.commit("0" * 32, 1, [])
    assert str(info.value) == "cannot commit: the transaction is committed"


def test_a_commit_is_all_tails_or_none_and_all_index_only_or_none(tmp_path: Path) -> None:
    files = shard_file_names(tmp_path / "ds", 2)
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(files, overwrite=False)
    staged = _stage(files, 5, "0" * 32)
    mixed = [staged[0], StagedShard(files[1], staged[1].meta, base_length=0, tail_length=1)]
    with pytest.raises(WriterStateError) as info:
        txn.commit("0" * 32, 1, mixed)
    assert str(info.value) == "a commit appends to every shard or to none"
    mixed = [staged[0], StagedShard(files[1], staged[1].meta, index_only=True)]
    with pytest.raises(WriterStateError) as info:
        txn.commit("0" * 32, 1, mixed)
    assert str(info.value) == "a commit replaces the .db of every shard or of none"
    assert txn.state is TransactionState.OPEN  # refused before anything: still usable
    txn.commit("0" * 32, 1, staged)
    with DatasetReader.open(files[0]) as reader:
        assert reader.num_rows == 10


def test_run_all_writes_the_db_partials(tmp_path: Path) -> None:
    files = shard_file_names(tmp_path / "ds", 3)
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(files, overwrite=False)
    calls: list[int] = []

    def run_all(writers: object) -> None:
        assert isinstance(writers, list)
        calls.append(len(writers))
        for write in writers:
            write()

    dataset_id = uuid.uuid4().hex
    txn.commit(dataset_id, 1, _stage(files, 4, dataset_id), run_all=run_all)
    assert calls == [3]
    assert all(db_path(f).is_file() for f in files)


def test_an_append_starts_from_the_committed_shards(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    partial_path(files[0]).write_bytes(b"litter")
    txn, shards = Transaction.begin_append(files[1])
    try:
        assert [s.path for s in shards] == files
        assert [s.length for s in shards] == [f.stat().st_size for f in files]
        assert [s.meta.shard_index for s in shards] == [0, 1]
        assert txn.committed_generation == 1 and txn.dataset_name == "ds"
        assert txn.directory == tmp_path
        assert not partial_path(files[0]).exists()
        assert txn.dataset_state() == (
            "nothing of this commit is visible; the last committed generation 1 is intact"
        )
    finally:
        txn.abort()
    assert files[0].stat().st_size == shards[0].length  # an abort touches no committed byte


def test_a_reindex_starts_from_the_committed_shards_verified(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    txn, shards = Transaction.begin_reindex(files[0])
    try:
        assert [s.path for s in shards] == files and txn.committed_generation == 1
        with pytest.raises(DatasetLockedError):
            Transaction.begin(tmp_path, "ds")
    finally:
        for shard in shards:
            shard.close()
        txn.abort()


def test_a_new_datasets_state_says_nothing_was_left(tmp_path: Path) -> None:
    txn = Transaction.begin(tmp_path, "ds")
    assert txn.committed_generation is None
    assert txn.dataset_state() == (
        "nothing of this commit is visible; no file of it was left behind"
    )
    error = txn.storage_error(OSError(errno.EIO, "Input/output error"), "write rows to")
    assert str(error) == (
        f"cannot write rows to dataset 'ds': failed on {str(tmp_path)!r}: Input/output error "
        "(EIO); nothing of this commit is visible; no file of it was left behind; the device "
        "reported an I/O error: check it (dmesg, SMART) before retrying"
    )
    named = txn.storage_error(OSError(errno.EIO, "Input/output error", "/x/f"), "commit", "s")
    assert str(named).startswith("cannot commit dataset 'ds': failed on '/x/f': ")
    assert "; s; " in str(named)
    txn.abort()


def test_a_shard_changed_since_the_append_began_is_refused(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    writer = FileWriter.open_for_append(files[0])
    writer.write_raw_data({"id": np.arange(10, 12), "label": np.zeros(2, dtype=np.int32)})
    size = files[1].stat().st_size
    with open(files[1], "ab") as fh:
        fh.write(b"x" * 3)
    with pytest.raises(StorageError) as info:
        writer.commit()
    assert str(info.value) == (
        f"{str(files[1])!r} changed since open_for_append (it is {size + 3} bytes, was {size}); "
        "nothing of this commit is visible; the last committed generation 1 is intact; open "
        "the dataset for append again"
    )
    assert info.value.errno == errno.ESTALE and info.value.operation == "commit"
    assert info.value.path == str(files[1])
    assert not journal_path(tmp_path, "ds").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".mrecord-partial")]


def test_an_append_needs_room_for_its_tails_and_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path, "ds", 2)
    writer = FileWriter.open_for_append(files[0])
    writer.write_raw_data({"id": np.arange(10, 12), "label": np.zeros(2, dtype=np.int32)})
    needed: list[int] = []
    monkeypatch.setattr(txn_mod, "check_free_space", lambda d, n: needed.append(n))
    monkeypatch.setattr(commit_mod, "crash_hook", _raise_at_journal)
    with pytest.raises(_Journal):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    tails = sum(partial_path(f).stat().st_size for f in files)
    rows = sum(partial_path(db_path(f)).stat().st_size for f in files)
    assert needed == [tails + 2 * rows + (1 << 20)]


class _Journal(Exception):
    pass


def _raise_at_journal(step: str) -> None:
    if step == "journal":
        raise _Journal


def test_a_failure_past_the_commit_point_says_the_commit_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path, "ds", 2)
    writer = FileWriter.open_for_append(files[0])
    writer.write_raw_data({"id": np.arange(10, 12), "label": np.zeros(2, dtype=np.int32)})

    def failing(step: str) -> None:
        if step == "journal":
            raise OSError(errno.EIO, "Input/output error", str(files[0]))

    monkeypatch.setattr(commit_mod, "crash_hook", failing)
    with pytest.raises(StorageError) as info:
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    assert str(info.value) == (
        f"cannot publish dataset 'ds': failed on {str(files[0])!r}: Input/output error (EIO); "
        f"{DURABLE}; the device reported an I/O error: check it (dmesg, SMART) before retrying"
    )
    assert info.value.__notes__ == [DURABLE]
    assert journal_path(tmp_path, "ds").exists()
    with DatasetReader.open(files[0]) as reader:  # finished by the next open
        assert reader.num_rows == 12


# -- added for the survivors of the first mutation_quick run over transaction.py -------------

EIO_ADVICE = "the device reported an I/O error: check it (dmesg, SMART) before retrying"


def _refuse_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: DatasetLock, wait: float = 0.0) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(DatasetLock, "acquire", refused)


@pytest.mark.parametrize(
    ("begin", "action"),
    [
        (lambda f: Transaction.begin(f.parent, "ds"), "create"),
        (lambda f: Transaction.begin_append(f), "append to"),
        (lambda f: Transaction.begin_reindex(f), "reindex"),
    ],
)
def test_a_lock_that_fails_names_what_the_writer_was_doing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, begin: Callable[[Path], object], action: str
) -> None:
    files = _create(tmp_path, "ds", 2)
    _refuse_lock(monkeypatch)
    with pytest.raises(StorageError) as info:
        begin(files[1])
    lock = tmp_path / "ds.mrecord-lock"
    assert str(info.value) == (
        f"cannot {action} dataset: failed on lock file {str(lock)!r}: Input/output error (EIO); "
        f"{UNTOUCHED}; {EIO_ADVICE}"
    )


def _failing(*args: object, **kwargs: object) -> None:
    raise OSError(errno.EIO, "Input/output error")


@pytest.mark.parametrize(
    ("target", "begin", "operation"),
    [
        ("recover", lambda f: Transaction.begin(f.parent, "ds"), "create dataset: failed on"),
        ("open", lambda f: Transaction.begin_append(f), "open for append: failed on"),
        ("open", lambda f: Transaction.begin_reindex(f), "rebuild index: failed on"),
    ],
)
def test_a_failure_while_opening_names_the_step_and_releases_the_lock(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    begin: Callable[[Path], object],
    operation: str,
) -> None:
    files = _create(tmp_path, "ds", 2)
    with monkeypatch.context() as patch:
        if target == "recover":
            patch.setattr(commit_mod, "recover_locked", _failing)
        else:
            patch.setattr(txn_mod, "open_committed", _failing)
        with pytest.raises(StorageError) as info:
            begin(files[1])
    assert str(info.value) == (
        f"cannot {operation} {str(tmp_path)!r}: Input/output error (EIO); {UNTOUCHED}; "
        f"{EIO_ADVICE}"
    )
    assert info.value.operation == operation
    Transaction.begin(tmp_path, "ds").abort()  # the lock was released


def test_a_reindex_needs_no_index_and_checks_every_chunk_it_reads(tmp_path: Path) -> None:
    """A reindex rebuilds missing or damaged ``.db`` files, so it must not need them; and
    it checks each chunk again even where a reader of this process checked it before."""
    files = _create(tmp_path, "ds", 2)
    db_path(files[1]).unlink()
    txn, shards = Transaction.begin_reindex(files[0])
    for shard in shards:
        shard.close()
    txn.abort()
    with DatasetReader.open(files[0], check_index=False) as reader:  # checks every chunk once
        reader.read_rows(np.arange(reader.num_rows))
    with DatasetReader.open(files[0], check_index=False) as reader:
        meta = reader.shards[0].meta
    label = [f.name for f in meta.schema.fields].index("label")
    chunk = meta.chunks[0, label]
    stat = files[0].stat()
    with open(files[0], "r+b") as fh:  # bit rot after the check: same size and mtime
        fh.seek(int(chunk["offset"]))
        byte = fh.read(1)
        fh.seek(int(chunk["offset"]))
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    txn, shards = Transaction.begin_reindex(files[0])
    try:
        with DatasetReader(shards, columns=["label"]) as sub, pytest.raises(ChecksumError):
            sub.read_rows(np.arange(sub.num_rows))  # what reindex() reads
    finally:
        txn.abort()


def _staged_dataset(tmp_path: Path, shards: int = 2) -> tuple[Transaction, list[Path], str]:
    files = shard_file_names(tmp_path / "ds", shards)
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(files, overwrite=False)
    return txn, files, uuid.uuid4().hex


def test_an_index_staged_early_is_not_written_again_at_commit(tmp_path: Path) -> None:
    txn, files, dataset_id = _staged_dataset(tmp_path)
    staged = _stage(files, 6, dataset_id)
    for shard in staged:
        txn.stage_index(shard)
        assert partial_path(db_path(shard.final)).is_file()
    calls: list[int] = []

    def run_all(writers: object) -> None:
        assert isinstance(writers, list)
        calls.append(len(writers))

    # The staged shards without their values: a writer that staged each index holds none.
    txn.commit(dataset_id, 1, [StagedShard(s.final, s.meta) for s in staged], run_all=run_all)
    assert calls == [0]
    with DatasetReader.open(files[0]) as reader:
        assert reader.num_rows == 12
    assert verify_dataset(files[0]).ok


def test_a_failed_staged_index_aborts_with_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn, files, dataset_id = _staged_dataset(tmp_path)
    staged = _stage(files, 6, dataset_id)
    target = str(partial_path(db_path(files[0])))

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", target)

    monkeypatch.setattr(txn_mod, "write_index_db", full)
    with pytest.raises(DiskFullError) as info:
        txn.stage_index(staged[0])
    assert str(info.value) == (
        f"cannot commit dataset 'ds': failed on {target!r}: No space left on device (ENOSPC); "
        "nothing of this commit is visible; no file of it was left behind; "
        f"{_advice(errno.ENOSPC)}"
    )
    assert txn.state is TransactionState.ABORTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.mrecord-lock"]
    Transaction.begin(tmp_path, "ds").abort()  # the lock was released


@pytest.mark.parametrize("typed", [True, False])
def test_a_staged_index_refused_by_a_typed_or_value_error_passes_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: bool
) -> None:
    txn, files, dataset_id = _staged_dataset(tmp_path)
    staged = _stage(files, 6, dataset_id)
    error: Exception = (
        StorageError("already typed", errno=errno.EIO, path="x", operation="write index")
        if typed
        else ValueError("index values of another length")
    )

    def refuse(*args: object) -> None:
        raise error

    monkeypatch.setattr(txn_mod, "write_index_db", refuse)
    with pytest.raises(type(error)) as info:
        txn.stage_index(staged[0])
    assert info.value is error
    assert txn.state is TransactionState.ABORTED


def _advice(code: int) -> str:
    from mrecord.storage.failures import advice_for

    return advice_for(code)


def test_a_bare_failure_before_the_commit_point_names_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn, files, dataset_id = _staged_dataset(tmp_path)
    staged = _stage(files, 6, dataset_id)
    target = str(partial_path(db_path(files[1])))

    def failing(shard: StagedShard) -> None:
        raise OSError(errno.EIO, "Input/output error", target)

    monkeypatch.setattr(txn_mod, "_write_db", failing)
    with pytest.raises(StorageError) as info:
        txn.commit(dataset_id, 1, staged)
    assert str(info.value) == (
        f"cannot commit dataset 'ds': failed on {target!r}: Input/output error (EIO); "
        f"nothing of this commit is visible; no file of it was left behind; {EIO_ADVICE}"
    )
    assert info.value.operation == "commit dataset 'ds': failed on"


@pytest.mark.parametrize("which", ["data", "db"])
def test_a_folder_made_where_a_file_belongs_after_the_claim_stops_the_commit_before_its_point(
    tmp_path: Path, which: str
) -> None:
    txn, files, dataset_id = _staged_dataset(tmp_path)
    staged = _stage(files, 6, dataset_id)
    folder = files[1] if which == "data" else db_path(files[1])
    folder.mkdir()
    with pytest.raises(StorageError) as info:
        txn.commit(dataset_id, 1, staged)
    assert str(info.value) == (
        f"cannot commit dataset 'ds': failed on {str(folder)!r}: Is a directory (EISDIR); "
        "nothing of this commit is visible; no file of it was left behind; a folder stands "
        "where a data file belongs: move it away and retry"
    )
    assert info.value.errno == errno.EISDIR and info.value.path == str(folder)
    assert txn.state is TransactionState.ABORTED
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ds.mrecord-lock", folder.name])


def test_a_reindex_commit_replaces_only_the_db_files(tmp_path: Path) -> None:
    files = _create(tmp_path, "ds", 2)
    data = [f.read_bytes() for f in files]
    stamps = [f.stat().st_mtime_ns for f in files]
    db_path(files[1]).write_bytes(b"damaged")
    txn, shards = Transaction.begin_reindex(files[0])
    staged = []
    for shard in shards:
        ids = np.arange(shard.meta.num_rows)  # unused: labels read back below
        with DatasetReader([shard], columns=["label"]) as sub:
            values = dict(sub.read_rows(ids).columns)
        txn.stage_index(StagedShard(shard.path, shard.meta, 0, values, index_only=True))
        staged.append(StagedShard(shard.path, shard.meta, index_only=True))
    txn.commit(shards[0].meta.dataset_id, shards[0].meta.generation, staged)
    assert txn.state is TransactionState.COMMITTED
    assert [f.read_bytes() for f in files] == data
    assert [f.stat().st_mtime_ns for f in files] == stamps
    assert not journal_path(tmp_path, "ds").exists()
    assert verify_dataset(files[0]).ok
    page = MindPage(files[0])
    page.set_category_field("label")
    assert page.read_ids_at_page_by_name(1, 0, 100).tolist() == [1, 4, 7]


def test_abort_swallows_a_failed_clean_up_and_still_unlocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn, _files, _ = _staged_dataset(tmp_path)
    monkeypatch.setattr(commit_mod, "remove_partials", _failing)
    txn.abort()
    assert txn.state is TransactionState.ABORTED
    Transaction.begin(tmp_path, "ds").abort()  # the lock was released


# -- what an overwrite removes of the dataset it replaces -------------------------------------


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith("-lock"))


@pytest.mark.parametrize("first", ["missing", "not a shard"])
def test_an_overwrite_learns_the_old_siblings_past_a_first_file_it_cannot_read(
    tmp_path: Path, first: str
) -> None:
    _create(tmp_path, "old", 3)
    new = tmp_path / "new"
    if first == "not a shard":
        new.write_bytes(b"x" * 100)
    files = [new, tmp_path / "old0"]
    txn = Transaction.begin(tmp_path, "new")
    txn.claim(files, overwrite=True)
    dataset_id = uuid.uuid4().hex
    txn.commit(dataset_id, 1, _stage(files, 3, dataset_id))
    assert _names(tmp_path) == ["new", "new.db", "old0", "old0.db"]


def test_an_overwrite_removes_only_its_own_stale_shards_and_skips_what_it_cannot_read(
    tmp_path: Path,
) -> None:
    _create(tmp_path, "data", 5)
    (tmp_path / "data2").write_bytes(b"not a shard any more")  # never removed
    db_path(tmp_path / "data3").unlink()  # a stale shard without its .db: still removed
    for name in ("data4", "data4.db"):
        (tmp_path / name).unlink()
    _create(tmp_path, "data4", 1)  # another dataset now: never removed
    _create(tmp_path, "data", 2, overwrite=True)
    assert _names(tmp_path) == [
        "data0", "data0.db", "data1", "data1.db", "data2", "data2.db", "data4", "data4.db"
    ]
    with DatasetReader.open(tmp_path / "data4") as other:
        assert other.num_rows == 10


def test_a_damaged_sibling_list_never_makes_an_overwrite_remove_a_file_elsewhere(
    tmp_path: Path,
) -> None:
    from tests.reliability.test_verify_consistency import _rewrite_metadata

    folder = tmp_path / "a"
    folder.mkdir()
    files = _create(folder, "data", 2)
    _rewrite_metadata(files[0], shard_names=("data0", "data1", "../outside"))
    shutil.copyfile(files[1], tmp_path / "outside")  # a shard of the replaced dataset
    _create(folder, "data", 2, overwrite=True)
    assert (tmp_path / "outside").exists()


def test_an_overwrite_never_removes_a_file_of_the_dataset_it_commits(tmp_path: Path) -> None:
    """A converter re-run that keeps the dataset's id: the stale shard carries the id of
    the dataset just committed, and the clean-up never removes such a file."""
    dataset_id = uuid.uuid4().hex
    old = shard_file_names(tmp_path / "ds", 3)
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(old, overwrite=False)
    txn.commit(dataset_id, 1, _stage(old, 3, dataset_id))
    new = old[:2]
    txn = Transaction.begin(tmp_path, "ds")
    txn.claim(new, overwrite=True)
    txn.commit(dataset_id, 1, _stage(new, 3, dataset_id))
    assert _names(tmp_path) == ["ds0", "ds0.db", "ds1", "ds1.db", "ds2", "ds2.db"]
