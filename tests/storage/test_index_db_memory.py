"""The ``.db`` of an indexed shard is written in bulk without every row's values in
memory at once: the converter of 8M tabular rows with ``--index label`` peaked at 2.4 GB
resident (each row's id, page, slot and label as Python objects for one
``executemany``) and was OOM-killed in a 200 MB memory group."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np

from mrecord import FileWriter
from mrecord.reader.mindpage import MindPage
from tests.tracing import traced_peak

ROWS = 1_000_000


def test_committing_an_index_of_a_million_rows_holds_a_few_mb(tmp_path: Path) -> None:
    path = tmp_path / "indexed.mrecord"
    writer = FileWriter(path)
    writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
    writer.add_index(["label"])
    writer.set_page_size(1 << 14)  # many pages: page numbers past the cached small ints
    ids = np.arange(ROWS, dtype=np.int64)
    writer.write_raw_data({"id": ids, "label": (ids * 7 % 1000).astype(np.int32)})
    _, peak = traced_peak(writer.commit)
    # all at once: three lists of a million ints (~36 bytes each), 108 MB and more
    assert peak < 24 << 20, f"the commit held {peak >> 20} MB"
    with closing(sqlite3.connect(f"{path}.db")) as conn, conn:
        count, pages, last = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT page), MAX(row_id) FROM rows"
        ).fetchone()
        assert (count, last) == (ROWS, ROWS - 1) and pages > 256
        for row_id, page, slot, label in conn.execute(
            "SELECT row_id, page, slot, f_label FROM rows "
            "WHERE row_id IN (0, 1, 4095, 4096, 523457, 999999)"
        ):
            assert label == row_id * 7 % 1000
            assert (page, slot) == _place(path, row_id)
    pager = MindPage(str(path))
    pager.set_category_field("label")
    first = pager.read_at_page_by_name("457", 0, 3)
    assert [int(r["id"]) for r in first] == [i for i in range(ROWS) if i * 7 % 1000 == 457][:3]


def _place(path: Path, row_id: int) -> tuple[int, int]:
    """(page, slot) of ``row_id`` from the data file's own page directory."""
    from mrecord.storage.shard import read_shard_metadata

    page_rows = read_shard_metadata(path).page_rows.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(page_rows)])
    page = int(np.searchsorted(starts, row_id, side="right") - 1)
    return page, row_id - int(starts[page])


def test_reindexing_a_million_rows_reads_their_index_values_a_block_at_a_time(
    tmp_path: Path,
) -> None:
    """``mrecord reindex`` of a 10M-row shard indexed by an int32 label was killed in a
    200 MB memory group: its values were read in one call, with the read's own ids,
    pages and slots (24 bytes a row) on top."""
    from mrecord.maintenance.reindex import reindex

    path = tmp_path / "indexed.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        ids = np.arange(ROWS, dtype=np.int64)
        writer.write_raw_data({"id": ids, "label": (ids * 7 % 1000).astype(np.int32)})
    Path(f"{path}.db").unlink()
    _, peak = traced_peak(lambda: reindex(path))
    # the values (4 MB) stay; a read of every row at once held 24 MB more
    assert peak < 16 << 20, f"the reindex held {peak >> 20} MB"
    with closing(sqlite3.connect(f"{path}.db")) as conn, conn:
        count, total = conn.execute("SELECT COUNT(*), SUM(f_label) FROM rows").fetchone()
    assert (count, total) == (ROWS, int((np.arange(ROWS) * 7 % 1000).sum()))


def test_verifying_an_index_of_a_million_rows_holds_a_few_mb(tmp_path: Path) -> None:
    """``mrecord verify`` of the 10M-row indexed shard was killed in a 200 MB memory group:
    it fetched every row of the ``.db`` at once (~1.5 GB of Python tuples)."""
    from mrecord.maintenance.verify import verify_dataset

    path = tmp_path / "indexed.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        writer.set_page_size(1 << 16)
        ids = np.arange(ROWS, dtype=np.int64)
        writer.write_raw_data({"id": ids, "label": (ids * 7 % 1000).astype(np.int32)})
    report, peak = traced_peak(lambda: verify_dataset(path))
    assert report.ok, report.problems
    assert peak < 24 << 20, f"verify held {peak >> 20} MB"


def test_verify_finds_a_stale_value_and_missing_rows_past_its_first_blocks(
    tmp_path: Path,
) -> None:
    """The ``.db`` read a block at a time: what is wrong deep in it is still reported,
    naming the row."""
    from mrecord.maintenance.verify import verify_dataset

    path = tmp_path / "indexed.mrecord"
    rows = 40_000  # three blocks of the .db's rows and a part
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        writer.set_page_size(1 << 12)
        ids = np.arange(rows, dtype=np.int64)
        writer.write_raw_data({"id": ids, "label": (ids % 10).astype(np.int32)})
    assert verify_dataset(path).ok
    with closing(sqlite3.connect(f"{path}.db")) as conn, conn:
        conn.execute("UPDATE rows SET f_label = 99 WHERE row_id = 35000")
    problems = verify_dataset(path).problems
    assert len(problems) == 1 and "index field 'label' of row 35000 is stale" in problems[0]
    with closing(sqlite3.connect(f"{path}.db")) as conn, conn:
        conn.execute("UPDATE rows SET f_label = 0 WHERE row_id = 35000")
        conn.execute("UPDATE rows SET slot = slot + 1 WHERE row_id = 20001")
    problems = verify_dataset(path).problems
    assert len(problems) == 1 and "row 20001 points at the wrong page or slot" in problems[0]
    with closing(sqlite3.connect(f"{path}.db")) as conn, conn:
        conn.execute("UPDATE rows SET slot = slot - 1 WHERE row_id = 20001")
        conn.execute("DELETE FROM rows WHERE row_id >= 39000")
    problems = verify_dataset(path).problems
    assert problems == [f"index of {str(path)!r} has 39000 rows, the data file 40000"]
