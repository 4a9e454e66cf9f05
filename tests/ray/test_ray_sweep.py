"""A Ray read task over a random order of small rows beyond memory reads a window at a
time, each window in one pass (``DatasetReader.sweep_rows``; a served dataset's window
asked for in ascending order), and yields exactly the rows, in the order, it yields
reading ``rows_per_block`` at a time. The task's body runs here, in this process, so
that the reads can be watched (Ray runs the same function in its workers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.serve.client.dataset as client_dataset
from mrecord import DatasetReader
from mrecord.ray.datasource import _read_range, _read_served_range
from mrecord.serve.client.served import ServedSpec
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.sweeping import (
    SMALL_ROWS,
    SMALL_WINDOW_BUDGET,
    read_ids,
    sweeping,
    write_small_rows,
)

ROWS = SMALL_ROWS
COLUMNS = ("id", "vec")
BUDGET = SMALL_WINDOW_BUDGET  # a memory that holds windows of 100 rows
BLOCK = 16  # rows_per_block of the read task


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_small_rows(tmp_path_factory.mktemp("raysweep"))


@pytest.fixture(scope="module")
def server(files: list[str]) -> Iterator[ServerThread]:
    with ServerThread({"t": Path(files[0])}, limits=Limits(max_block_rows=BLOCK)) as srv:
        yield srv


def _ids(tables: Iterator[Any]) -> list[int]:
    out: list[int] = []
    for table in tables:
        ids = table.column("id").to_numpy()
        vec = np.stack(table.column("vec").to_numpy(zero_copy_only=False))
        assert np.all(vec[:, 0] == ids)  # each row's own values
        assert table.num_rows <= BLOCK
        out.extend(int(i) for i in ids)
    return out


def _counts(files: list[str]) -> tuple[int, ...]:
    with DatasetReader.open(files[0]) as reader:
        assert len(reader.shards) == len(files)
        return tuple(int(n) for n in np.diff(reader.file_starts))


def _local_task(files: list[str], mode: str | None) -> list[int]:
    counts = _counts(files)
    return _ids(
        _read_range(
            tuple(files), counts, COLUMNS, "once", mode, 5, 1, 40, ROWS - 30, BLOCK, 1 << 20
        )
    )


@pytest.mark.parametrize("mode", ["global", None])
def test_a_read_task_over_files_sweeps_a_random_order_only(
    files: list[str], mode: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _local_task(files, mode)
    calls = sweeping(monkeypatch, BUDGET)
    assert _local_task(files, mode) == plain
    assert len(plain) == ROWS - 70
    swept = [rows for rows, sweep in calls if sweep]
    if mode is None:  # file order streams block by block
        assert not swept and all(rows <= BLOCK for rows, _ in calls)
    else:  # windows of 100 rows, each read at once
        assert swept and max(swept) == 100


def test_a_read_task_over_a_served_dataset_asks_for_windows_in_ascending_order(
    files: list[str], server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _counts(files)
    spec = ServedSpec((server.url,), "t")
    described = client_dataset.RemoteDataset(server.url, "t")
    schema = described.schema
    described.close()

    def task() -> list[int]:
        tables = _read_served_range(
            spec, schema, counts, COLUMNS, "global", 5, 1, 40, ROWS - 30, BLOCK, 1 << 20
        )
        return _ids(tables)

    plain = task()
    sweeping(monkeypatch, BUDGET)  # the server's files beyond its memory
    monkeypatch.setattr(client_dataset, "memory_budget", lambda: BUDGET)
    reads = read_ids(monkeypatch)
    assert task() == plain
    assert len(reads) >= (ROWS - 70) // BLOCK
    assert all(bool(np.all(np.diff(ids) > 0)) for ids in reads)  # ascending, every one
