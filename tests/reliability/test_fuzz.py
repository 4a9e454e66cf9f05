"""Fuzzing the readers of foreign files: every input ends in an mrecord error or a correct read.

The quick version of ``python -m reliability.fuzz_campaign`` (docs/RELIABILITY.md), and
the inputs it found that broke a reader, kept in tests/fixtures/fuzz/.
"""

from __future__ import annotations

import shutil
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrecord import DatasetReader, verify_dataset
from mrecord.convert.mindrecord import MindRecordDataset
from mrecord.errors import CorruptFileError, IndexMismatchError, MrecordError
from mrecord.storage.index_db import MAX_DB_VALUE
from reliability import fuzz
from reliability.corrupt import _time_limit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "fuzz"
MEMORY_BOUND = 256 << 20  # peak Python allocations of one case, bytes


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fuzz templates: MindSpore's samples and a committed mrecord dataset."""
    root = tmp_path_factory.mktemp("fuzz") / "templates"
    fuzz.build_templates(root)
    return root


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


@pytest.mark.parametrize("name", ["endless_view_metadata", "huge_view_rows", "trigger"])
def test_a_db_with_views_or_triggers_is_refused(tmp_path: Path, name: str) -> None:
    """Found by the fuzzer: a view in the .db ran inside our queries (an endless recursive
    view filled memory until MemoryError; a view of randomblob(400 MB) cells too). Now any
    view or trigger is refused before a query runs, naming the .db."""
    folder = _copy(name, tmp_path)
    with pytest.raises(CorruptFileError, match=r"data\.db.*(view|trigger)"):
        DatasetReader.open(folder / "data")
    with DatasetReader.open(folder / "data", check_index=False) as reader:
        ids = reader.read_rows([0, 9]).columns["id"]
        assert isinstance(ids, np.ndarray)
        assert ids.tolist() == [0, 9]
    try:
        report = verify_dataset(folder / "data")
    except MrecordError:
        pass
    else:
        assert not report.ok


def test_a_mindrecord_db_with_an_endless_view_is_refused(tmp_path: Path) -> None:
    """The importer's check of a MindSpore .db: the same hole, the same answer; the data
    file alone still imports."""
    folder = _copy("mindrecord_endless_view", tmp_path)
    with pytest.raises(IndexMismatchError, match=r"alltypes\.mindrecord\.db.*view"):
        MindRecordDataset.open(folder / "alltypes.mindrecord")
    with MindRecordDataset.open(folder / "alltypes.mindrecord", check_index=False) as ds:
        assert ds.num_rows == 30


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("mindrecord_index_fields_number", CorruptFileError),  # was TypeError: not iterable
        ("mindrecord_db_cell_blob", IndexMismatchError),  # was ValueError from numpy
    ],
)
def test_fuzzed_mindrecord_inputs_are_refused(tmp_path: Path, name: str, error: type) -> None:
    """Inputs found by the fuzzer that raised a bare exception in the importer."""
    folder = _copy(name, tmp_path)
    with (
        pytest.raises(error, match=r"images\.mindrecord"),
        MindRecordDataset.open(folder / "images.mindrecord") as ds,
    ):
        list(ds.iter_batches())


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("metadata_type_is_a_dict", "unknown type"),  # was TypeError: unhashable type
        ("metadata_minor_version_null", "format version"),  # was TypeError from int(None)
        ("metadata_long_sibling_name", "not a plain file name"),  # was OSError ENAMETOOLONG
        ("metadata_sibling_schema_differs", "another schema"),  # was KeyError on read
    ],
)
def test_fuzzed_metadata_with_valid_checksums_is_refused(
    tmp_path: Path, name: str, match: str
) -> None:
    """Metadata documents found by the fuzzer (checksums valid) that raised a bare
    exception (TypeError, OSError, or KeyError once rows were read)."""
    folder = _copy(name, tmp_path)
    first = next(p for p in (folder / "data", folder / "data0") if p.exists())
    with (
        pytest.raises(MrecordError, match=match),
        DatasetReader.open(first, check_index=False) as reader,
    ):
        list(reader.iter_rows())


def test_a_db_index_value_of_another_type_is_a_corrupt_file(tmp_path: Path) -> None:
    """Found by the fuzzer: a blob among the integers of an index column made MindPage's
    category listing raise TypeError while sorting."""
    from mrecord import MindPage

    folder = _copy("db_index_value_blob", tmp_path)
    page = MindPage(folder / "data")
    page.set_category_field("id")
    with pytest.raises(CorruptFileError, match=r"mixed types.*bytes.*int.*reindex"):
        page.read_category_info()
    page.close()


def test_a_schema_type_that_is_not_a_string_is_a_schema_error() -> None:
    """The same hole in the writer's API: add_schema with a dict as a type or compression."""
    from mrecord.errors import SchemaError
    from mrecord.format.schema import parse_schema

    with pytest.raises(SchemaError, match="unknown type"):
        parse_schema({"x": {"type": {"a": 1}}})
    with pytest.raises(SchemaError, match="unknown compression"):
        parse_schema({"x": {"type": "bytes", "compression": ["zstd"]}})


def test_a_huge_db_value_is_refused_not_loaded(tmp_path: Path) -> None:
    """Found by the fuzzer: an 80 MB cell in the .db's metadata was loaded whole (with the
    other copies, beyond the worker's memory). Values over MAX_DB_VALUE are now refused."""
    folder = _copy("trigger", tmp_path)
    conn = sqlite3.connect(folder / "data.db")
    conn.execute("DROP TRIGGER t")
    conn.execute(
        "UPDATE metadata SET value = zeroblob(?) WHERE key = 'schema'", (MAX_DB_VALUE + 1,)
    )
    conn.commit()
    conn.close()
    with pytest.raises(CorruptFileError, match=r"data\.db"):
        DatasetReader.open(folder / "data")


@pytest.mark.parametrize("target", fuzz.TARGETS)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(number=st.integers(0, 2**32))
def test_fuzzed_inputs_end_in_an_mrecord_error_or_a_correct_read(
    templates: Path, target: str, number: int
) -> None:
    """Hypothesis picks the mutation (see reliability/fuzz.py); the reads raise only
    MrecordError, return the right rows where the mutation cannot change them, stay
    under 256 MiB of Python allocations and answer within 20 s."""
    cache: dict[str, list[Any]] = {}
    tracemalloc.start()
    try:
        with _time_limit(20.0):
            result = fuzz.check_case(target, templates, 7, number, cache)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.passed, result
    assert peak < MEMORY_BOUND, (result, peak)


def test_bounded_campaign_in_a_memory_limited_subprocess(templates: Path) -> None:
    """The campaign's runner on 16 .db cases: a worker limited to 2 GiB of address
    space and killed when it stops answering, so a hang or a blow-up fails the case."""
    results = fuzz.run_fuzz("db", templates, seed=1, count=16, batch=16, timeout=20.0)
    assert len(results) == 16
    assert [r for r in results if not r.passed] == []
