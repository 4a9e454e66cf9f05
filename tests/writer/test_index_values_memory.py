"""A writer keeps its rows' index-field values on disk until the commit, not in memory.

The ``.db`` gets every row's index values at the commit, and the writer held them all
as Python objects until then: a string field indexed as MindSpore's docs do
(``add_index(["file_name", "label"])``) cost ~120 bytes a row, 537 MB of resident
memory for a writer of 4M rows (62 MB without the index), whatever the rows' own size.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from mrecord import FileWriter
from mrecord.reader.mindpage import MindPage
from tests.tracing import traced_peak

ROWS = 400_000
BATCH = 10_000


def _name(i: int) -> str:
    return f"train/n{i % 1000:08d}/n{i % 1000:08d}_{i:09d}.JPEG"


def _write(writer: FileWriter, start: int, stop: int) -> None:
    for lo in range(start, stop, BATCH):
        hi = min(stop, lo + BATCH)
        writer.write_raw_data(
            [{"file_name": _name(i), "label": i % 1000, "id": i} for i in range(lo, hi)]
        )


def _new_writer(path: Path, shards: int = 1) -> FileWriter:
    writer = FileWriter(path, shard_num=shards)
    writer.add_schema(
        {"file_name": {"type": "string"}, "label": {"type": "int32"}, "id": {"type": "int64"}}
    )
    writer.add_index(["file_name", "label"])
    return writer


def test_the_index_values_of_rows_written_are_not_held_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "names.mrecord"
    writer = _new_writer(path)
    _, peak = traced_peak(lambda: _write(writer, 0, ROWS))
    # held until the commit: 400K names of 47 characters, ~96 bytes each (38 MB)
    assert peak < 16 << 20, f"writing {ROWS} rows held {peak >> 20} MB"
    _, peak = traced_peak(writer.commit)
    assert peak < 24 << 20, f"the commit held {peak >> 20} MB"
    with closing(sqlite3.connect(f"{path}.db")) as conn:
        count, last = conn.execute("SELECT COUNT(*), MAX(row_id) FROM rows").fetchone()
        assert (count, last) == (ROWS, ROWS - 1)
        probes = (0, 1, 16_383, 16_384, 16_385, 65_536, 262_143, 300_001, ROWS - 1)
        for row_id, name, label in conn.execute(
            "SELECT row_id, f_file_name, f_label FROM rows WHERE row_id IN "
            f"({', '.join(map(str, probes))})"
        ):
            assert (name, label) == (_name(row_id), row_id % 1000)
    pager = MindPage(str(path))
    pager.set_category_field("file_name")
    (row,) = pager.read_at_page_by_name(_name(333_333), 0, 1)
    assert int(row["id"]) == 333_333


def test_index_values_of_many_shards_and_an_append_reach_their_db(tmp_path: Path) -> None:
    """Spilled values go to the right shard's ``.db`` at the right rows, also for the rows
    an append adds after the committed ones."""
    path = tmp_path / "names.mrecord"
    with _new_writer(path, shards=3) as writer:
        _write(writer, 0, 150_000)
    appender = FileWriter.open_for_append(f"{path}0")
    _write(appender, 150_000, 210_000)
    appender.commit()
    seen: dict[int, tuple[str, int]] = {}
    for shard in range(3):
        with closing(sqlite3.connect(f"{path}{shard}.db")) as conn:
            for ids, name, label in conn.execute("SELECT row_id, f_file_name, f_label FROM rows"):
                del ids  # the row's place in its shard; its id tells which row it is
                row_id = int(name.rsplit("_", 1)[1].split(".")[0])
                assert label == row_id % 1000
                seen[row_id] = (name, label)
    assert sorted(seen) == list(range(210_000))
    pager = MindPage(f"{path}0")
    pager.set_category_field("label")
    rows = pager.read_at_page_by_name("7", 0, 300)
    assert sorted(int(r["id"]) for r in rows) == list(range(7, 210_000, 1000))


def test_a_failed_writer_leaves_no_spilled_values_behind(tmp_path: Path) -> None:
    """The values wait in an unnamed file of the dataset's folder: nothing to clean up
    after a failure, nor after a kill."""
    path = tmp_path / "names.mrecord"
    writer = _new_writer(path)
    _write(writer, 0, 200_000)
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["names.mrecord.mrecord-lock"]


def test_reindexing_a_string_field_reads_its_values_a_block_at_a_time(tmp_path: Path) -> None:
    from mrecord.maintenance.reindex import reindex

    path = tmp_path / "names.mrecord"
    with _new_writer(path) as writer:
        _write(writer, 0, ROWS)
    Path(f"{path}.db").unlink()
    _, peak = traced_peak(lambda: reindex(path))
    assert peak < 24 << 20, f"the reindex held {peak >> 20} MB"
    with closing(sqlite3.connect(f"{path}.db")) as conn:
        count, names = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT f_file_name) FROM rows"
        ).fetchone()
        (name,) = conn.execute("SELECT f_file_name FROM rows WHERE row_id = 234567").fetchone()
    assert (count, names, name) == (ROWS, ROWS, _name(234_567))
    pager = MindPage(str(path))
    pager.set_category_field("file_name")
    (row,) = pager.read_at_page_by_name(_name(234_567), 0, 1)
    assert int(row["id"]) == 234_567


def test_a_writer_of_many_shards_spills_into_one_file(tmp_path: Path) -> None:
    """Every shard's index values wait in one unnamed file of the folder, not a file a
    shard and field: a conversion into 1,000 shards indexed by two fields failed with
    EMFILE under the usual soft limit of 1,024 descriptors (it ran before the values were
    spilled). Here 300 shards, two index fields, under a soft limit of 512."""
    import subprocess
    import sys

    script = f"""
import resource
from mrecord import FileWriter
from mrecord.storage import value_spill
value_spill.SPILL_ROWS = 64  # every shard's values reach the file
resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
writer = FileWriter({str(tmp_path / "many.mrecord")!r}, shard_num=300)
writer.add_schema({{"name": {{"type": "string"}}, "label": {{"type": "int32"}}}})
writer.add_index(["name", "label"])
for lo in range(0, 60_000, 3_000):
    writer.write_raw_data([{{"name": f"n{{i}}", "label": i % 7}} for i in range(lo, lo + 3_000)])
writer.commit()
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    with closing(sqlite3.connect(f"{tmp_path / 'many.mrecord'}123.db")) as conn:
        rows = conn.execute("SELECT f_name, f_label FROM rows").fetchall()
    assert len(rows) == 200 and all(int(n[1:]) % 7 == label for n, label in rows)
