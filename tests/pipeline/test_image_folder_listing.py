"""The listing of an image folder holds many files in little memory, and gives back
exactly the paths the walk found (names pathlib and the file system agree on, including
names that are not valid UTF-8)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord.rawdata import walk_image_folder
from mrecord.rawdata.path_list import PathList
from tests.tracing import traced_peak


def test_a_listing_holds_a_file_in_a_few_dozen_bytes(tmp_path: Path) -> None:
    """20,000 files named as ImageNet's (``n01440764_10026.JPEG``) in 20 class folders.
    A ``str`` per path and an ``int`` per label held ~110 bytes a file: a million-file
    conversion's listing was 129 MB of its 334 MB peak; each folder's text once and each
    name's bytes in one buffer hold the name and ~12 bytes."""
    for c in range(20):
        folder = tmp_path / f"n{c:08d}"
        folder.mkdir()
        for i in range(1_000):
            (folder / f"n{c:08d}_{i:05d}.JPEG").touch()
    listing, peak = traced_peak(lambda: walk_image_folder(tmp_path, extensions={".JPEG"}))
    assert len(listing.paths) == 20_000
    assert listing.paths[1_234] == str(tmp_path / "n00000001" / "n00000001_00234.JPEG")
    assert listing.label_array()[1_234] == 1
    held = sum(len(p) for p in listing.paths[:10]) / 10  # bytes of a path's text
    assert held > 50
    # os.walk's own lists of a folder's names are freed as the walk goes on
    assert peak / 20_000 < 64, peak / 20_000


_PARTS = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\0/"),
    min_size=1,
    max_size=6,
)


@settings(max_examples=50, deadline=None)
@given(folders=st.lists(st.tuples(_PARTS, st.lists(_PARTS, max_size=5)), max_size=6))
def test_a_path_list_gives_back_what_was_added(folders: list[tuple[str, list[str]]]) -> None:
    paths = PathList()
    expected: list[str] = []
    for folder, names in folders:
        prefix = os.path.join("/root", folder, "")
        paths.extend(prefix, names)
        expected += [prefix + name for name in names]
    assert len(paths) == len(expected)
    assert list(paths) == expected
    assert [paths[i] for i in range(len(expected))] == expected
    assert paths[1:4] == expected[1:4]
    if expected:
        assert paths[-1] == expected[-1]
    with pytest.raises(IndexError):
        paths[len(expected)]


def test_undecodable_names_round_trip(tmp_path: Path) -> None:
    """A name that is not UTF-8 comes back from the walk as Python's surrogate escapes;
    the listing keeps it so: the path opens the same file."""
    folder = tmp_path / "cls"
    folder.mkdir()
    raw = os.fsencode(str(folder)) + b"/caf\xe9.JPEG"  # Latin-1, not UTF-8
    with open(raw, "wb") as fh:
        fh.write(b"x")
    listing = walk_image_folder(tmp_path, extensions={".JPEG"})
    (path,) = list(listing.paths)
    assert os.fsencode(path) == raw
    assert Path(path).read_bytes() == b"x"
    assert np.array_equal(listing.label_array(), [0])
