"""Tests written for mutants of mrecord/storage/ that survived the storage tests
(docs/RELIABILITY.md, "Mutation testing"): what a dataset_files argument may be."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from mrecord.errors import ArgumentError
from mrecord.storage.naming import resolve_files


def test_one_path_opens_its_siblings_a_list_opens_just_those_files() -> None:
    assert resolve_files("a/train.mrec") == ([Path("a/train.mrec")], True)
    assert resolve_files(Path("b")) == ([Path("b")], True)
    assert resolve_files(["x0", PurePosixPath("x1")]) == ([Path("x0"), Path("x1")], False)
    assert resolve_files(("x0",)) == ([Path("x0")], False)


def test_a_file_listed_twice_is_refused_naming_the_list() -> None:
    with pytest.raises(ArgumentError) as info:
        resolve_files(["x0", "x1", Path("x0")])
    assert str(info.value) == "dataset_files lists a file twice: ['x0', 'x1', 'x0']"


@pytest.mark.parametrize("bad", [[], (), ["x0", 3], [None], 7, None, {"x0": 1}])
def test_anything_but_a_path_or_a_non_empty_list_of_paths_is_refused(bad: object) -> None:
    with pytest.raises(ArgumentError) as info:
        resolve_files(bad)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"dataset_files must be a file path or a non-empty list of paths, got {bad!r}"
    )
