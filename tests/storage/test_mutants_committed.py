"""Tests written for mutants of mrecord/storage/committed.py that survived the reader and
recovery tests (docs/RELIABILITY.md, "Mutation testing"): every reason files do not belong
together, with its message whole; the order and checks of what ``open_committed`` returns;
how a journal is found for a file that cannot be read yet; and the waits for a commit that
is publishing."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    ForeignShardError,
    IndexMismatchError,
    MissingIndexError,
    SchemaError,
)
from mrecord.storage import commit as commit_mod
from mrecord.storage.committed import (
    check_consistent,
    dataset_name_of,
    journal_names_for,
    open_committed,
    sibling_problems,
)
from mrecord.storage.naming import db_path, journal_path, shard_file_names
from mrecord.storage.shard import ShardFile, read_shard_metadata
from tests.reliability.test_recovery import _stopped_append, _stopped_create
from tests.reliability.test_verify_consistency import _rewrite_metadata


def _create(
    folder: Path, name: str = "ds", shards: int = 3, schema: dict[str, object] | None = None
) -> list[Path]:
    with FileWriter(folder / name, shard_num=shards) as writer:
        writer.add_schema(schema or {"id": {"type": "int64"}})
        writer.add_index(["id"])
        columns: dict[str, object] = {"id": np.arange(12, dtype=np.int64)}
        if "b" in (schema or {}):
            columns["b"] = [b"%d" % i for i in range(12)]
        writer.write_raw_data(columns)
    return shard_file_names(folder / name, shards)


def _open(paths: list[Path]) -> list[ShardFile]:
    return [ShardFile(p, verify="never") for p in paths]


def _problems(paths: list[Path], expand: bool) -> list[tuple[type[Exception], str]]:
    shards = _open(paths)
    try:
        return list(sibling_problems(shards, expand))
    finally:
        for shard in shards:
            shard.close()


def _meta(path: Path) -> tuple[str, dict[str, Any]]:
    with ShardFile(path, verify="never") as shard:
        return shard.meta.dataset_id, shard.meta.schema.to_dict()


_real_read_journal = commit_mod.read_journal


def _patch_sleep(monkeypatch: pytest.MonkeyPatch, sleep: Callable[[float], object]) -> None:
    """``committed``'s own ``time.sleep`` only (threads elsewhere keep theirs)."""
    monkeypatch.setattr("mrecord.storage.committed.time", SimpleNamespace(sleep=sleep))


# -- sibling_problems: each reason, its message whole -----------------------------------------


def test_siblings_that_belong_together_have_no_problems(tmp_path: Path) -> None:
    files = _create(tmp_path)
    assert _problems(files, expand=True) == []
    assert _problems(files, expand=False) == []


def test_a_shard_copied_over_its_sibling_is_named_twice(tmp_path: Path) -> None:
    files = _create(tmp_path)
    shutil.copyfile(files[0], files[1])
    dataset_id, _ = _meta(files[0])
    ds0, ds1 = str(files[0]), str(files[1])
    assert _problems(files, expand=True) == [
        (ForeignShardError, (
            f"{ds1!r} is shard 0 of dataset {dataset_id} again (so is {ds0!r}): a shard file "
            "was copied over another; restore it from a backup or rewrite the dataset"
        )),
        (ForeignShardError, (
            f"{ds1!r} holds shard 0 of its dataset ('ds0'), not shard 1: a shard file was "
            "copied or renamed over its sibling; restore it from a backup or rewrite the dataset"
        )),
    ]
    # A list given by the caller: the same shard twice, nothing about sibling positions.
    assert _problems([files[0], files[1]], expand=False) == [
        (ForeignShardError, (
            f"{ds1!r} is shard 0 of dataset {dataset_id} again (so is {ds0!r}): a shard file "
            "was copied over another; restore it from a backup or rewrite the dataset"
        )),
    ]


def test_a_sibling_of_another_dataset_is_named_with_both_ids(tmp_path: Path) -> None:
    files = _create(tmp_path)
    dataset_id, _ = _meta(files[0])
    _rewrite_metadata(files[2], dataset_id="f" * 32, generation=5)
    assert _problems(files, expand=True) == [
        (ForeignShardError, (
            f"{str(files[2])!r} belongs to another dataset (id {'f' * 32}, expected "
            f"{dataset_id}); a stray file replaced a sibling"
        )),
    ]  # only that: its generation says nothing more


def test_a_sibling_of_another_generation_says_an_append_did_not_finish(tmp_path: Path) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[1], generation=2)
    assert _problems(files, expand=True) == [
        (ForeignShardError, (
            f"{str(files[1])!r} is from commit generation 2, its siblings from 1: an append "
            "did not finish; run `mrecord verify`"
        )),
    ]


def test_a_sibling_naming_other_siblings_is_named(tmp_path: Path) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[2], shard_names=("ds0", "ds1", "dsX"))
    assert _problems(files, expand=True) == [
        (ForeignShardError, f"{str(files[2])!r} names other siblings than {str(files[0])!r}"),
    ]


def test_a_sibling_at_another_position_of_its_own_list_is_named(tmp_path: Path) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[2], shard_index=1)  # its list says ds2 is shard 2
    dataset_id, _ = _meta(files[0])
    assert _problems(files, expand=True) == [
        (ForeignShardError, (
            f"{str(files[2])!r} is shard 1 of dataset {dataset_id} again (so is "
            f"{str(files[1])!r}): a shard file was copied over another; restore it from a "
            "backup or rewrite the dataset"
        )),
        (ForeignShardError, (
            f"{str(files[2])!r} holds shard 1 of its dataset ('ds1'), not shard 2: a shard "
            "file was copied or renamed over its sibling; restore it from a backup or rewrite "
            "the dataset"
        )),
    ]


def test_a_sibling_with_another_schema_is_named_with_both(tmp_path: Path) -> None:
    files = _create(tmp_path, schema={"id": {"type": "int64"}, "b": {"type": "bytes"}})
    with ShardFile(files[1], verify="never") as shard:
        schema = shard.meta.schema
    _rewrite_metadata(files[1], schema=schema.with_compression("zstd", ["b"]))
    _, theirs = _meta(files[1])
    _, ours = _meta(files[0])
    assert _problems(files, expand=True) == [
        (ForeignShardError, (
            f"{str(files[1])!r} has another schema than {str(files[0])!r} ({theirs!r} vs "
            f"{ours!r}); one writer gives every shard the same schema: the file was changed"
        )),
    ]
    # Read as a list, files may differ in compression only.
    assert _problems([files[0], files[1]], expand=False) == []


def test_files_read_together_must_share_their_fields(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _create(tmp_path / "a", shards=1)
    b = _create(tmp_path / "b", shards=1, schema={"id": {"type": "int32"}})
    _, ours = _meta(a[0])
    _, theirs = _meta(b[0])
    message = (
        f"{str(b[0])!r} has schema {theirs!r}, but {str(a[0])!r} has {ours!r}; files read "
        "together must share a schema"
    )
    assert _problems([a[0], b[0]], expand=False) == [(SchemaError, message)]
    shards = _open([a[0], b[0]])
    try:
        with pytest.raises(SchemaError) as info:
            check_consistent(shards, expand=False)
        assert str(info.value) == message
        check_consistent(shards[:1], expand=False)
    finally:
        for shard in shards:
            shard.close()


# -- open_committed ----------------------------------------------------------------------------


def test_siblings_come_in_shard_order_and_a_list_in_its_own(tmp_path: Path) -> None:
    files = _create(tmp_path)
    for given in files:
        shards = open_committed(given)
        assert [s.path for s in shards] == files
        for shard in shards:
            shard.close()
    shards = open_committed([files[2], files[0]])
    assert [s.path for s in shards] == [files[2], files[0]]
    for shard in shards:
        shard.close()


def test_the_db_files_are_checked_only_when_asked(tmp_path: Path) -> None:
    files = _create(tmp_path)
    db_path(files[1]).unlink()
    with pytest.raises(MissingIndexError):
        open_committed(files[0])
    shards = open_committed(files[0], check_index=False)
    assert len(shards) == 3
    for shard in shards:
        shard.close()
    shutil.copyfile(db_path(files[0]), db_path(files[1]))
    with pytest.raises(IndexMismatchError):
        open_committed(files[0])


def test_mismatched_files_are_refused_once_no_commit_is_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[1], generation=2)
    sleeps: list[float] = []
    _patch_sleep(monkeypatch, sleeps.append)
    with pytest.raises(ForeignShardError, match="generation 2"):
        open_committed(files[0])
    assert sleeps == [0.01] * 3  # looked again a few times in case a commit just finished


def test_a_commit_publishing_meanwhile_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that look mismatched while a journal exists are looked at again until the
    commit is done: here it finishes during the fifth wait."""
    files = _create(tmp_path)
    good = files[1].read_bytes()
    _rewrite_metadata(files[1], generation=2)
    journal = journal_path(tmp_path, "ds")
    journal.write_bytes(b"")  # a commit in progress (never read on this path)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 5:
            files[1].write_bytes(good)
            journal.unlink()

    _patch_sleep(monkeypatch, sleep)
    monkeypatch.setattr(commit_mod, "recover", lambda d, n: False)
    shards = open_committed(files[0])
    assert [s.meta.generation for s in shards] == [1, 1, 1] and len(sleeps) == 5
    for shard in shards:
        shard.close()


def test_a_commit_that_never_settles_is_refused_after_a_hundred_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path)
    # Whatever a mismatched sibling says its dataset is called: the journal looked for is
    # that of the dataset being opened.
    _rewrite_metadata(files[1], generation=2, dataset_name="other")
    journal_path(tmp_path, "ds").write_bytes(b"")
    sleeps: list[float] = []
    _patch_sleep(monkeypatch, sleeps.append)
    monkeypatch.setattr(commit_mod, "recover", lambda d, n: False)
    with pytest.raises(ForeignShardError, match="generation 2"):
        open_committed(files[0])
    assert sleeps == [0.01] * 99


def test_a_folder_or_a_base_name_opens_the_whole_dataset(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    files = _create(tmp_path / "d")
    for given in (tmp_path / "d", tmp_path / "d" / "ds"):
        shards = open_committed(given)
        assert [s.path for s in shards] == files
        for shard in shards:
            shard.close()


def test_a_missing_file_names_the_one_meant(tmp_path: Path) -> None:
    files = _create(tmp_path, name="ds1", shards=2)
    missing = tmp_path / "ds"
    message = (
        f"data file {str(missing)!r} does not exist; did you mean {str(files[0])!r}? (a "
        "dataset of 2 shards is opened by naming any one of them)"
    )
    for call in (open_committed, dataset_name_of):
        with pytest.raises(DatasetNotFoundError) as info:
            call(missing)
        assert str(info.value) == message
        assert info.value.__suppress_context__
    for call in (open_committed, dataset_name_of):
        with pytest.raises(DatasetNotFoundError) as info:
            call(tmp_path / "other")
        assert str(info.value) == f"data file {str(tmp_path / 'other')!r} does not exist"


def test_a_writer_holding_the_lock_never_recovers_while_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lock_held``: the writer rolled the journal forward itself; finding one here means
    something is wrong, and recovering would take the lock it holds."""
    first = _stopped_create(monkeypatch, tmp_path, "ds", 2, 30, "journal")
    with pytest.raises(DatasetNotFoundError):
        open_committed(first[0], lock_held=True)
    assert journal_path(tmp_path, "ds").exists()
    shards = open_committed(first[0])  # a reader finishes the first commit
    assert sum(s.meta.num_rows for s in shards) == 30
    for shard in shards:
        shard.close()
    assert not journal_path(tmp_path, "ds").exists()


def test_a_tail_half_copied_is_finished_by_a_reader_not_by_a_lock_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reliability.test_recovery import _create as create_recovery

    files = create_recovery(tmp_path, "ds1", 2)
    _stopped_append(monkeypatch, files, 40, 60, "tail_part")
    half = []
    for path in files:
        try:
            read_shard_metadata(path)
        except CorruptFileError:
            half.append(path)
    assert len(half) == 1  # stopped in its first tail
    with pytest.raises(CorruptFileError):
        open_committed(half[0], lock_held=True)
    assert dataset_name_of(half[0]) == "ds1"  # read from the journal naming it
    assert journal_names_for(half[0]) == ["ds1"]
    shards = open_committed(half[0])  # finishes the append, then reads it
    assert sum(s.meta.num_rows for s in shards) == 100
    for shard in shards:
        shard.close()
    assert journal_names_for(half[0]) == []


# -- journal_names_for: which journals may commit a file that cannot be read -------------------


def test_the_journal_of_each_name_less_its_digits_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds1 = _stopped_create(monkeypatch, tmp_path, "ds1", 2, 30, "journal")  # ds10, ds11
    assert journal_names_for(ds1[0]) == ["ds1"]
    assert journal_names_for(tmp_path / "ds12") == []  # "ds1"'s journal does not name it
    assert journal_names_for(tmp_path / "other") == []
    # A damaged journal counts (recovering it says it is damaged): "ds" and "ds1" both may
    # commit "ds10", nearest name first.
    journal_path(tmp_path, "ds").write_bytes(b"\xc1")
    assert journal_names_for(ds1[0]) == ["ds1", "ds"]
    journal_path(tmp_path, "d").write_bytes(b"\xc1")  # "ds7" less digits is never "d"
    assert journal_names_for(tmp_path / "ds7") == ["ds"]
    with pytest.raises(DatasetNotFoundError) as info:  # two candidates: no name guessed
        dataset_name_of(tmp_path / "ds10")
    assert str(info.value) == f"data file {str(ds1[0])!r} does not exist"


def test_a_journal_that_is_gone_meanwhile_or_named_by_no_dataset_does_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal_path(tmp_path, "").write_bytes(b"\xc1")  # "" is no dataset's name
    assert journal_names_for(tmp_path / "12") == []
    journal_path(tmp_path, "ds").write_bytes(b"\xc1")

    def gone(journal: Path) -> None:
        raise FileNotFoundError(journal)

    monkeypatch.setattr(commit_mod, "read_journal", gone)
    assert journal_names_for(tmp_path / "ds3") == []
    read = _real_read_journal
    journal_path(tmp_path, "ds1").write_bytes(b"\xc1")

    def ds1_gone(journal: Path) -> object:
        if journal.name.startswith("ds1"):
            raise FileNotFoundError(journal)
        return read(journal)

    monkeypatch.setattr(commit_mod, "read_journal", ds1_gone)
    assert journal_names_for(tmp_path / "ds10") == ["ds"]  # looked on past the one gone
    monkeypatch.setattr(commit_mod, "read_journal", read)
    assert journal_names_for(tmp_path / "ds10") == ["ds1", "ds"]  # past a damaged one too


def test_an_append_journal_names_the_shards_it_appends_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reliability.test_recovery import _create as create_recovery

    files = create_recovery(tmp_path, "ds", 3)
    _stopped_append(monkeypatch, files, 40, 10, "journal")
    assert [journal_names_for(f) for f in files] == [["ds"], ["ds"], ["ds"]]
    assert journal_names_for(tmp_path / "ds5") == []  # a shard it does not append to
    assert [dataset_name_of(f) for f in files] == ["ds", "ds", "ds"]


# -- added for the survivors of the first run ---------------------------------------------------


def test_a_two_shard_dataset_checks_positions_too(tmp_path: Path) -> None:
    files = _create(tmp_path, shards=2)
    shutil.copyfile(files[0], files[1])
    problems = _problems(files, expand=True)
    assert [m for _, m in problems][1] == (
        f"{str(files[1])!r} holds shard 0 of its dataset ('ds0'), not shard 1: a shard file was "
        "copied or renamed over its sibling; restore it from a backup or rewrite the dataset"
    )


def test_a_shard_copied_under_another_name_meets_its_original(tmp_path: Path) -> None:
    """Opened by a name its dataset does not list, the copy's siblings include the shard it
    copies: one twin problem, and no position to check for the unlisted name."""
    files = _create(tmp_path)
    copy = tmp_path / "copy"
    shutil.copyfile(files[1], copy)
    dataset_id, _ = _meta(files[0])
    with pytest.raises(ForeignShardError) as info:
        open_committed(copy, check_index=False)
    assert str(info.value) == (
        f"{str(files[1])!r} is shard 1 of dataset {dataset_id} again (so is {str(copy)!r}): a "
        "shard file was copied over another; restore it from a backup or rewrite the dataset"
    )


@pytest.mark.parametrize("verify", ["never", "always"])
def test_every_way_of_opening_keeps_the_verify_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verify: str
) -> None:
    (tmp_path / "d").mkdir()
    files = _create(tmp_path / "d")
    given: list[Path | list[Path]] = [files[1], tmp_path / "d", tmp_path / "d" / "ds", files]
    for arg in given:
        shards = open_committed(arg, verify=verify)
        assert [s.verify for s in shards] == [verify] * 3
        for shard in shards:
            shard.close()
    recovered = _stopped_create(monkeypatch, tmp_path, "new", 2, 30, "journal")
    shards = open_committed(recovered[0], verify=verify)  # its first commit finished here
    assert [s.verify for s in shards] == [verify] * 2
    for shard in shards:
        shard.close()


def test_an_append_whose_journal_is_durable_is_read_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reliability.test_recovery import _create as create_recovery

    files = create_recovery(tmp_path, "ds", 2)
    _stopped_append(monkeypatch, files, 40, 10, "journal")  # every file still readable
    shards = open_committed(files[0], verify="always")
    assert [s.meta.generation for s in shards] == [2, 2]
    assert [s.verify for s in shards] == ["always", "always"]
    assert sum(s.meta.num_rows for s in shards) == 50
    for shard in shards:
        shard.close()


def test_a_damaged_file_is_waited_for_only_while_a_journal_may_finish_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path)
    with open(files[1], "r+b") as fh:  # its trailer gone: not readable
        fh.truncate(files[1].stat().st_size - 8)
    sleeps: list[float] = []
    _patch_sleep(monkeypatch, sleeps.append)
    with pytest.raises(CorruptFileError):
        open_committed(files[1])
    assert sleeps == []  # no journal: damaged, not in the middle of a commit
    journal_path(tmp_path, "ds").write_bytes(b"\xc1")  # counts: it may commit ds1
    recovered: list[str] = []
    monkeypatch.setattr(commit_mod, "recover", lambda d, n: recovered.append(n))
    with pytest.raises(CorruptFileError):
        open_committed(files[1])
    assert sleeps == [0.01] * 99 and recovered == ["ds"] * 99


def test_a_damaged_file_is_named_as_damaged_even_beside_numbered_names(tmp_path: Path) -> None:
    _create(tmp_path, name="ds1", shards=2)  # ds10, ds11
    (tmp_path / "ds1").write_bytes(b"not a shard at all, though ds10 is one" * 4)
    with pytest.raises(CorruptFileError):
        dataset_name_of(tmp_path / "ds1")


def _track_closes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[ShardFile], list[ShardFile]]:
    """Every ShardFile opened, and every one closed, from now on."""
    opened: list[ShardFile] = []
    closed: list[ShardFile] = []
    init, close = ShardFile.__init__, ShardFile.close

    def tracked_init(self: ShardFile, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    def tracked_close(self: ShardFile) -> None:
        closed.append(self)
        close(self)

    monkeypatch.setattr(ShardFile, "__init__", tracked_init)
    monkeypatch.setattr(ShardFile, "close", tracked_close)
    return opened, closed


def test_every_shard_opened_for_a_refusal_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _create(tmp_path)
    _rewrite_metadata(files[1], generation=2)
    _patch_sleep(monkeypatch, lambda seconds: None)
    opened, closed = _track_closes(monkeypatch)
    with pytest.raises(ForeignShardError):
        open_committed(files[0])
    assert len(opened) == 4 * 3 and {id(s) for s in closed} == {id(s) for s in opened}
    files[2].unlink()  # a sibling missing: the ones opened before it are closed
    opened.clear()
    closed.clear()
    with pytest.raises(DatasetNotFoundError):
        open_committed(files[0])
    assert len(opened) == 2 and {id(s) for s in closed} == {id(s) for s in opened}
    (tmp_path / "b").mkdir()
    other = _create(tmp_path / "b")
    db_path(other[2]).unlink()  # a check after the files were found consistent fails
    opened.clear()
    closed.clear()
    with pytest.raises(MissingIndexError):
        open_committed(other[0])
    assert len(opened) == 3 and {id(s) for s in closed} == {id(s) for s in opened}
