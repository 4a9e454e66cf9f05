"""A stateful test of write / commit / open_for_append / abort against a plain list model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from mrecord.errors import DatasetNotFoundError, RowValidationError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.testing import strategies as mst
from mrecord.testing.model import assert_rows_equal, expected_order
from mrecord.writer.file_writer import FileWriter

SCHEMA: dict[str, dict[str, Any]] = {
    "id": {"type": "int64"},
    "tag": {"type": "string", "compression": "zstd"},
    "v": {"type": "float16", "shape": [-1]},
}


class WriterMachine(RuleBasedStateMachine):
    """The model: the rows of each committed call, and the calls of the open writer."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mrecord-stateful-"))
        self.committed: list[list[dict[str, Any]]] = []
        self.pending: list[list[dict[str, Any]]] = []
        self.writer: FileWriter | None = None
        self.exists = False
        self.shard_num = 1

    @initialize(shard_num=mst.shard_counts(4))
    def choose_shards(self, shard_num: int) -> None:
        self.shard_num = shard_num

    @property
    def first(self) -> Path:
        name = "data" if self.shard_num == 1 else "data0"
        return self.dir / name

    @precondition(lambda self: self.writer is None and not self.exists)
    @rule(page_size=mst.page_sizes())
    def create(self, page_size: int) -> None:
        self.writer = FileWriter(self.dir / "data", shard_num=self.shard_num)
        self.writer.add_schema(SCHEMA)
        self.writer.add_index(["id", "tag"])
        self.writer.set_page_size(page_size)

    @precondition(lambda self: self.writer is None and self.exists)
    @rule(which=st.integers(0, 3))
    def open_for_append(self, which: int) -> None:
        name = "data" if self.shard_num == 1 else f"data{which % self.shard_num}"
        self.writer = FileWriter.open_for_append(self.dir / name)

    @precondition(lambda self: self.writer is not None)
    @rule(rows=mst.rows_for(SCHEMA, 0, 8))
    def write(self, rows: list[dict[str, Any]]) -> None:
        assert self.writer is not None
        self.writer.write_raw_data(rows)
        self.pending.append(rows)

    @precondition(lambda self: self.writer is not None)
    @rule(rows=mst.rows_for(SCHEMA, 1, 4), at=st.integers(0, 3))
    def write_bad(self, rows: list[dict[str, Any]], at: int) -> None:
        assert self.writer is not None
        at %= len(rows)
        rows[at] = {**rows[at], "id": "not a number"}
        with pytest.raises(RowValidationError) as info:
            self.writer.write_raw_data(rows)
        assert (info.value.row, info.value.field) == (at, "id")

    @precondition(lambda self: self.writer is not None)
    @rule()
    def commit(self) -> None:
        assert self.writer is not None
        self.writer.commit()
        self.writer = None
        self.committed += self.pending
        self.pending = []
        self.exists = True

    @precondition(lambda self: self.writer is not None)
    @rule()
    def abort(self) -> None:
        assert self.writer is not None
        self.writer.abort()
        self.writer = None
        self.pending = []

    @invariant()
    def readers_see_the_committed_rows(self) -> None:
        if not self.exists:
            with pytest.raises(DatasetNotFoundError):
                DatasetReader.open(self.first)
            return
        written = [row for call in self.committed for row in call]
        order = expected_order([len(c) for c in self.committed], self.shard_num)
        with DatasetReader.open(self.first, verify="always") as reader:
            got = list(reader.iter_rows(chunk_size=5))
        assert_rows_equal(SCHEMA, got, [written[p] for p in order])

    def teardown(self) -> None:
        if self.writer is not None:
            self.writer.abort()
        shutil.rmtree(self.dir, ignore_errors=True)


TestWriterMachine = WriterMachine.TestCase
