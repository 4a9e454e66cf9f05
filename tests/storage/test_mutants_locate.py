"""Tests written for mutants of ``mrecord/storage/locate.py`` that survived its tests
(docs/RELIABILITY.md, "Mutation testing"): which file a typed name or folder resolves to
when some files beside it are damaged, copies or partials, and every message whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mrecord import DatasetReader
from mrecord.errors import ArgumentError, DatasetNotFoundError, MrecordError
from mrecord.format.layout import HEADER_MAGIC
from mrecord.storage.locate import (
    base_name_shard,
    leftover_note,
    locate_dataset,
    missing_hint,
    partial_leftovers,
)
from mrecord.storage.shard import read_shard_metadata
from tests.factory import MakeDataset

HINT_TAIL = "is opened by naming any one of them)"


def test_the_base_name_resolves_to_the_first_shard_even_if_that_one_is_damaged(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """``x.mrecord`` names shard 0 whichever shard's metadata says so; a damaged shard 0
    is still the file the base name resolves to (its error is then about that file, not
    "does not exist")."""
    first = make_dataset(12, shards=3, folder=tmp_path, name="x.mrecord")
    assert first == tmp_path / "x.mrecord0"
    assert base_name_shard(tmp_path / "x.mrecord") == first
    assert locate_dataset(tmp_path / "x.mrecord") == first
    first.write_bytes(b"not a shard any more")
    assert base_name_shard(tmp_path / "x.mrecord") == first


def test_the_hint_for_unreadable_numbered_files_names_the_lowest_number(
    tmp_path: Path,
) -> None:
    """Numbers sort as numbers (2 before 10), and the count is the files seen when none of
    them can be read."""
    for n in (10, 2, 33):
        (tmp_path / f"x.mrecord{n}").write_bytes(b"garbage")
    path = tmp_path / "x.mrecord"
    hint = f"did you mean {str(tmp_path / 'x.mrecord2')!r}? (a dataset of 3 shards {HINT_TAIL}"
    assert missing_hint(path) == hint
    with pytest.raises(DatasetNotFoundError) as info:
        locate_dataset(path)
    assert str(info.value) == f"data file {str(path)!r} does not exist; {hint}"


def test_a_name_with_nothing_beside_it_says_only_that_it_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "nothing.mrecord"
    assert missing_hint(path) == ""
    with pytest.raises(DatasetNotFoundError) as info:
        locate_dataset(path)
    assert str(info.value) == f"data file {str(path)!r} does not exist"


def _partials(folder: Path, count: int) -> list[Path]:
    paths = [folder / f"w.mrecord{i}.mrecord-partial" for i in range(count)]
    for p in paths:
        p.write_bytes(b"")
    return paths


NOTE = (
    "are left by an interrupted write, or belong to one still running; they are not part "
    "of any committed dataset: delete them once no write is running"
)


def test_the_note_on_partial_files_names_three_and_counts_the_rest(tmp_path: Path) -> None:
    one = [tmp_path / "w.mrecord0.mrecord-partial"]
    assert leftover_note(one) == f"1 partial file(s) ('w.mrecord0.mrecord-partial') {NOTE}"
    names = [Path(f"w.mrecord{i}.mrecord-partial") for i in range(5)]
    listed = "'w.mrecord0.mrecord-partial', 'w.mrecord1.mrecord-partial', "
    listed += "'w.mrecord2.mrecord-partial'"
    assert leftover_note(names[:3]) == f"3 partial file(s) ({listed}) {NOTE}"
    assert leftover_note(names[:4]) == f"4 partial file(s) ({listed} and 1 more) {NOTE}"
    assert leftover_note(names) == f"5 partial file(s) ({listed} and 2 more) {NOTE}"


def test_a_missing_name_with_partials_of_its_write_says_so(tmp_path: Path) -> None:
    """``w.mrecord`` was being written when the writer died: only its partial files are
    there; the message says the name does not exist and what the partials are."""
    leftovers = _partials(tmp_path, 2)
    assert partial_leftovers(tmp_path, "w.mrecord") == leftovers
    path = tmp_path / "w.mrecord"
    with pytest.raises(DatasetNotFoundError) as info:
        locate_dataset(path)
    assert str(info.value) == (
        f"data file {str(path)!r} does not exist; {leftover_note(leftovers)}"
    )


def test_a_missing_name_with_shards_and_partials_gets_both_hints(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """``w.mrecord`` is no dataset's name, but the shards ``w.mrecord10``, ``w.mrecord11``
    (of ``w.mrecord1``) start with it, and so does a partial file."""
    make_dataset(4, shards=2, folder=tmp_path, name="w.mrecord1")
    leftover = tmp_path / "w.mrecord5.mrecord-partial"
    leftover.write_bytes(b"")
    path = tmp_path / "w.mrecord"
    hint = missing_hint(path)
    shard = tmp_path / "w.mrecord10"
    assert hint == f"did you mean {str(shard)!r}? (a dataset of 2 shards {HINT_TAIL}"
    with pytest.raises(DatasetNotFoundError) as info:
        locate_dataset(path)
    assert str(info.value) == (
        f"data file {str(path)!r} does not exist; {hint}; {leftover_note([leftover])}"
    )


def test_a_folder_finds_its_dataset_past_damaged_files_copies_and_partials(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """In the folder: a file with the header magic and nothing else (sorts first), a
    copy of shard 0 under another name, a finished shard of another write still under
    its partial name, and the ``.db`` files: the folder holds one dataset, whose shard 0
    is opened under its own name."""
    first = make_dataset(12, shards=3, folder=tmp_path / "d", name="b.mrecord")
    folder = first.parent
    (folder / "a.mrecord").write_bytes(HEADER_MAGIC + b"\0" * 100)
    shutil.copy(first, folder / "b.mrecord0.copy")
    other = make_dataset(5, shards=1, folder=tmp_path / "other", name="c.mrecord")
    shutil.copy(other, folder / "c.mrecord.mrecord-partial")
    (folder / "sub.mrecord").mkdir()
    assert locate_dataset(folder) == first
    with DatasetReader.open(folder) as reader:
        assert reader.num_rows == 12


def test_a_folder_with_no_dataset_or_two_is_refused_by_name(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(DatasetNotFoundError) as info:
        locate_dataset(empty)
    assert str(info.value) == f"folder {str(empty)!r} holds no mrecord data file"
    two = tmp_path / "two"
    make_dataset(4, shards=2, folder=two, name="p.mrecord")
    make_dataset(4, shards=2, folder=two, name="q.mrecord")
    with pytest.raises(ArgumentError) as caught:
        locate_dataset(two)
    assert str(caught.value) == (
        f"folder {str(two)!r} holds 2 datasets (p.mrecord0, q.mrecord0); name one of their files"
    )


def test_a_file_that_cannot_be_opened_is_an_mrecord_error(tmp_path: Path) -> None:
    """What lets the folder scan skip a file it cannot open (gone, a folder) like a
    damaged one."""
    for path in (tmp_path / "gone.mrecord", tmp_path):
        with pytest.raises(MrecordError):
            read_shard_metadata(path)
