"""Append in place (format 1.1): cost of the new rows only, still atomic, old files readable.

The fixtures in ``tests/fixtures/v1/`` were written by the format 1.0 writer (which
copied every file on append); they must stay readable and appendable.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, verify_dataset
from mrecord.format.layout import FORMAT_MINOR, HEADER_SIZE, parse_header
from mrecord.storage import commit as commit_mod
from mrecord.storage.naming import db_path, journal_path

FIXTURES = Path(__file__).parents[1] / "fixtures" / "v1"
_spec = importlib.util.spec_from_file_location("make_v1", FIXTURES / "make_fixtures.py")
assert _spec is not None and _spec.loader is not None
make_v1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_v1)


def _check_rows(reader: DatasetReader, n: int) -> None:
    """Every row 0..n-1 of the fixture schema, whole (values derived from the id)."""
    assert reader.num_rows == n
    block = reader.read_rows(np.arange(n))
    ids = np.asarray(block.columns["id"]).tolist()
    assert sorted(ids) == list(range(n))
    for k, i in enumerate(ids):
        want = make_v1.row(i)
        assert block.columns["name"][k] == want["name"]
        assert np.array_equal(block.columns["img"][k], want["img"])
        assert np.array_equal(block.columns["vec"][k], want["vec"])
        assert block.columns["blob"][k] == want["blob"]


def _copy_fixtures(tmp_path: Path) -> Path:
    out = tmp_path / "v1"
    shutil.copytree(FIXTURES, out, ignore=shutil.ignore_patterns("*.py"))
    return out


@pytest.mark.parametrize(("first", "rows"), [("single", 30), ("sharded0", 36)])
def test_format_1_0_fixtures_read_and_verify(first: str, rows: int) -> None:
    with DatasetReader.open(FIXTURES / first) as reader:
        assert reader.shards[0].meta.format_version == (1, 0)
        _check_rows(reader, rows)
    assert verify_dataset(FIXTURES / first).ok
    page = MindPage(str(FIXTURES / first))
    page.set_category_field("id")
    assert [r["id"] for r in page.read_at_page_by_name(7, 0, 5)] == [7]
    page.close()


@pytest.mark.parametrize(("first", "rows"), [("single", 30), ("sharded0", 36)])
def test_append_to_format_1_0_files(tmp_path: Path, first: str, rows: int) -> None:
    folder = _copy_fixtures(tmp_path)
    path = folder / first
    for start in (rows, rows + 9):
        with FileWriter.open_for_append(path) as writer:
            writer.write_raw_data([make_v1.row(i) for i in range(start, start + 9)])
    with DatasetReader.open(path) as reader:
        _check_rows(reader, rows + 18)
        for shard in reader.shards:
            assert shard.meta.format_version == (1, FORMAT_MINOR)
            assert len(shard.meta.previous_ends) == 2
            assert parse_header(shard.mm[:HEADER_SIZE]) == (1, 0)  # headers are never rewritten
    assert verify_dataset(path).ok
    page = MindPage(str(path))
    page.set_category_field("name")
    assert [r["id"] for r in page.read_at_page_by_name(f"row-{rows + 3}", 0, 5)] == [rows + 3]
    page.close()


def _dataset(tmp_path: Path, rows: int, shards: int = 2) -> Path:
    path = tmp_path / "d"
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema(make_v1.SCHEMA)
        writer.add_index(["id"])
        writer.set_page_size(4096)
        writer.write_raw_data([make_v1.row(i) for i in range(rows)])
    return tmp_path / "d0" if shards > 1 else path


def _digest(path: Path, length: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read(length)).hexdigest()


def test_append_never_changes_committed_bytes_or_replaces_files(tmp_path: Path) -> None:
    first = _dataset(tmp_path, 200)
    files = [tmp_path / "d0", tmp_path / "d1"]
    before = {f: (f.stat().st_size, _digest(f, f.stat().st_size)) for f in files}
    inodes = {f: (f.stat().st_ino, db_path(f).stat().st_ino) for f in files}
    with FileWriter.open_for_append(first) as writer:
        writer.write_raw_data([make_v1.row(i) for i in range(200, 230)])
    for f in files:
        size, digest = before[f]
        assert f.stat().st_size > size
        assert _digest(f, size) == digest  # the previous generation is a prefix of the file
        assert (f.stat().st_ino, db_path(f).stat().st_ino) == inodes[f]  # grown, not copied
    with DatasetReader.open(first) as reader:
        _check_rows(reader, 230)
        assert [s.meta.previous_ends for s in reader.shards] == [(before[f][0],) for f in files]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d.mrecord-lock", "d0", "d0.db", "d1", "d1.db"
    ]


def _proc_wchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_append_writes_bytes_of_the_new_rows_only(tmp_path: Path) -> None:
    """Bytes passed to write() by an append of 20 rows do not grow with the dataset."""
    written = []
    for rows in (500, 8000):
        folder = tmp_path / str(rows)
        folder.mkdir()
        path = folder / "big"
        with FileWriter(path) as writer:
            writer.add_schema({"id": {"type": "int64"}, "x": {"type": "bytes"}})
            writer.add_index(["id"])
            writer.write_raw_data({"id": np.arange(rows), "x": [bytes(1000)] * rows})
        start = _proc_wchar()
        with FileWriter.open_for_append(path) as writer:
            writer.write_raw_data({"id": np.arange(rows, rows + 20), "x": [bytes(1000)] * 20})
        written.append(_proc_wchar() - start)
    assert path.stat().st_size > 8_000_000
    # The bigger dataset is 16x larger; its append writes a few more KiB of page
    # directory and .db pages at most, never a copy of the 8 MB.
    assert written[1] < written[0] + 200_000, written


def test_a_reader_keeps_its_snapshot_while_appends_commit(tmp_path: Path) -> None:
    first = _dataset(tmp_path, 100)
    old = DatasetReader.open(first)
    page = MindPage(str(first))
    page.set_category_field("id")
    assert json.loads(page.read_category_info())["categories"][-1]["name"] == 99
    for start in (100, 150):
        with FileWriter.open_for_append(first) as writer:
            writer.write_raw_data([make_v1.row(i) for i in range(start, start + 50)])
    _check_rows(old, 100)  # its map ends where its snapshot ended
    assert page.read_at_page_by_name(120, 0, 5) == []  # new .db rows are not in its snapshot
    assert len(json.loads(page.read_category_info())["categories"]) == 100
    old.close()
    page.close()
    with DatasetReader.open(first) as new:
        _check_rows(new, 200)


def test_abort_leaves_the_files_byte_identical(tmp_path: Path) -> None:
    first = _dataset(tmp_path, 60)
    files = sorted(tmp_path.iterdir())
    before = {f: f.read_bytes() for f in files}
    writer = FileWriter.open_for_append(first)
    writer.write_raw_data([make_v1.row(i) for i in range(60, 2000)])
    writer.abort()
    assert sorted(tmp_path.iterdir()) == files
    assert {f: f.read_bytes() for f in files} == before


class _Stop(Exception):
    """Raised by the crash hook to stop a commit at a chosen step."""


def _stop_at(step: str, nth: int = 1) -> Any:
    seen = []

    def hook(reached: str) -> None:
        if reached == step:
            seen.append(reached)
            if len(seen) == nth:
                raise _Stop(step)

    return hook


@pytest.mark.parametrize(
    ("step", "nth"),
    [("journal", 1), ("tail_part", 1), ("renamed_one", 1), ("renamed_one", 2),
     ("renamed_one", 3), ("renamed_all", 1)],
)
def test_an_append_stopped_after_its_journal_is_rolled_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, nth: int
) -> None:
    """Stopped with half a tail written, or data published but a .db not yet merged:
    the next reader finishes it (the journal records every file's committed length)."""
    first = _dataset(tmp_path, 80)
    writer = FileWriter.open_for_append(first)
    writer.write_raw_data([make_v1.row(i) for i in range(80, 120)])
    monkeypatch.setattr(commit_mod, "crash_hook", _stop_at(step, nth))
    with pytest.raises(_Stop):
        writer.commit()
    monkeypatch.setattr(commit_mod, "crash_hook", commit_mod._no_crash)
    assert journal_path(tmp_path, "d").exists()
    with DatasetReader.open(tmp_path / "d1") as reader:
        _check_rows(reader, 120)
    assert not journal_path(tmp_path, "d").exists()
    assert verify_dataset(first).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d.mrecord-lock", "d0", "d0.db", "d1", "d1.db"
    ]
    with FileWriter.open_for_append(first) as again:  # and the dataset appends on
        again.write_raw_data([make_v1.row(i) for i in range(120, 125)])
    with DatasetReader.open(first) as reader:
        _check_rows(reader, 125)


def test_an_append_stopped_before_its_journal_leaves_the_previous_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _dataset(tmp_path, 80)
    sizes = {f: f.stat().st_size for f in (tmp_path / "d0", tmp_path / "d1")}
    writer = FileWriter.open_for_append(first)
    writer.write_raw_data([make_v1.row(i) for i in range(80, 120)])

    def no_journal(*args: object, **kwargs: object) -> None:
        raise _Stop("before the journal")

    monkeypatch.setattr(commit_mod, "write_journal_and_publish", no_journal)
    with pytest.raises(_Stop):
        writer.commit()
    assert {f: f.stat().st_size for f in sizes} == sizes
    assert not any(p.name.endswith(".mrecord-partial") for p in tmp_path.iterdir())
    with DatasetReader.open(first) as reader:
        _check_rows(reader, 80)


def test_a_damaged_tail_journal_is_refused(tmp_path: Path) -> None:
    """A journal naming a tail that is gone cannot be finished: said, not guessed."""
    first = _dataset(tmp_path, 10)
    size = first.stat().st_size
    with DatasetReader.open(first) as reader:
        reader_id = reader.shards[0].meta.dataset_id
    journal = journal_path(tmp_path, "d")
    import msgpack

    journal.write_bytes(
        msgpack.packb(
            {"dataset_id": reader_id, "generation": 2, "files": [],
             "appends": [["d0", size, 500]], "db_appends": []}
        )
    )
    from mrecord.errors import CorruptFileError

    with pytest.raises(CorruptFileError, match="missing"):
        DatasetReader.open(first)
    assert first.stat().st_size == size
    os.unlink(journal)


def test_a_reader_opening_while_a_tail_is_half_written_waits_for_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process opens the dataset while shard 0 ends in half a tail (no trailer at its
    end yet): it waits for the publisher and reads the new generation whole, never an error.

    The writer holds still at ``tail_part`` until the reader reports that it met the half
    tail (its open of the shards failed and it went to wait), so the case is exercised
    every time, not only when a sleep happens to be long enough."""
    import select
    import subprocess
    import sys

    first = _dataset(tmp_path, 80)
    script = (
        "import sys\n"
        "from mrecord import DatasetReader\n"
        "from mrecord.errors import CorruptFileError\n"
        "from mrecord.storage import committed\n"
        "open_shards = committed._open_shards\n"
        "def reporting(*args, **kwargs):\n"
        "    try:\n"
        "        return open_shards(*args, **kwargs)\n"
        "    except CorruptFileError:\n"
        "        print('met half a tail', flush=True)\n"
        "        raise\n"
        "committed._open_shards = reporting\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        f"with DatasetReader.open({str(first)!r}) as r:\n"
        "    r.read_rows(range(r.num_rows))\n"
        "    print(r.num_rows, flush=True)\n"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert reader.stdin is not None and reader.stdout is not None
    assert reader.stdout.readline().strip() == "ready"
    calls: list[str] = []
    met: list[str] = []

    def hook(step: str) -> None:
        if step == "tail_part" and not calls:
            calls.append(step)
            assert first.stat().st_size > 0
            reader.stdin.write("go\n")  # type: ignore[union-attr]
            reader.stdin.flush()  # type: ignore[union-attr]
            # Hold the half-written tail until the reader has met it (it then waits on
            # the journal and the lock this commit holds).
            assert reader.stdout is not None
            ready, _, _ = select.select([reader.stdout], [], [], 60)
            assert ready, "the reader never met the half-written tail"
            met.append(reader.stdout.readline().strip())

    writer = FileWriter.open_for_append(first)
    writer.write_raw_data([make_v1.row(i) for i in range(80, 120)])
    monkeypatch.setattr(commit_mod, "crash_hook", hook)
    writer.commit()
    out, _ = reader.communicate(timeout=60)
    assert met == ["met half a tail"]
    assert reader.returncode == 0 and out.strip().splitlines()[-1] == "120"
    assert calls == ["tail_part"]
