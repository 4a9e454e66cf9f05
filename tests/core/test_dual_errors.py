"""Where MindSpore raises RuntimeError for a bad argument, mrecord's error is both an
``ArgumentError`` (mrecord's promise, a ValueError) and a ``RuntimeError`` (MindSpore's), so
``except RuntimeError`` written against MindSpore keeps working (issue 25 §3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter, MindDataset, SequentialSampler
from mrecord.errors import ArgumentError, MrecordError
from mrecord.reader.mindpage import MindPage
from mrecord.testing.mixed import write_mixed
from mrecord.transforms import OneHot


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mixed(tmp_path_factory.mktemp("dual") / "m.mrecord", 30, index_label=True)


def _page_size_too_big(tmp: Path) -> None:
    writer = FileWriter(tmp / "big.mrecord", 1, overwrite=True)
    writer.add_schema({"id": {"type": "int64"}})
    writer.set_page_size(1 << 40)


def _bad_category_id(mixed: Path) -> None:
    page = MindPage(str(mixed))
    page.set_category_field("label")
    page.read_at_page_by_id(99, 0, 1)  # 7 categories (labels 0..6)


CASES: dict[str, Callable[[Path, Path], object]] = {
    "page size too big": lambda tmp, mixed: _page_size_too_big(tmp),
    "missing file to append to": lambda tmp, mixed: FileWriter.open_for_append(
        tmp / "never-written.mrecord"
    ),
    "bad MindPage category id": lambda tmp, mixed: _bad_category_id(mixed),
    "OneHot label out of range": lambda tmp, mixed: OneHot(3)(np.array(5)),
    "sampler with shuffle": lambda tmp, mixed: MindDataset(
        str(mixed), sampler=SequentialSampler(), shuffle=True
    ),
    "shard_id without num_shards": lambda tmp, mixed: MindDataset(str(mixed), shard_id=0),
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_error_is_an_argument_error_and_a_runtime_error(
    what: str, tmp_path: Path, mixed: Path
) -> None:
    with pytest.raises(RuntimeError) as info:
        CASES[what](tmp_path, mixed)
    error = info.value
    assert isinstance(error, ArgumentError), type(error).__mro__
    assert isinstance(error, ValueError)
    assert isinstance(error, MrecordError)


def test_appending_to_a_missing_file_still_reads_as_file_not_found(tmp_path: Path) -> None:
    """The append error keeps its FileNotFoundError (code that catches OSError) and says
    what to do."""
    with pytest.raises(FileNotFoundError, match=r"write it with FileWriter\(\.\.\.\)\.commit"):
        FileWriter.open_for_append(tmp_path / "never-written.mrecord")
