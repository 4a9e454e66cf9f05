"""``batch`` hands on every batch an input block completes together (one block of several
batches where the columns are arrays): the batches, their order, their values and where
an interrupted epoch resumes are exactly those of one batch at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import Block, FileWriter, MindDataset, SourceDataset
from mrecord.pipeline.engine.context import ExecContext


class CutBlocks(SourceDataset):
    """Rows 0..n-1 (``id``, ``vec = [id, -id]``, and ``name`` when asked), cut into
    blocks of the given sizes."""

    def __init__(self, sizes: list[int], with_names: bool = False) -> None:
        super().__init__()
        self.sizes = sizes
        self.with_names = with_names

    def _source_num_rows(self) -> int:
        return sum(self.sizes)

    def _source_column_names(self) -> list[str]:
        return ["id", "vec", "name"] if self.with_names else ["id", "vec"]

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        start = 0
        for size in self.sizes:
            ids = np.arange(start, start + size, dtype=np.int64)
            columns: dict[str, Any] = {"id": ids, "vec": np.stack([ids, -ids], axis=1)}
            if self.with_names:
                columns["name"] = [f"r{i}" for i in ids.tolist()]
            yield Block(columns, ids)
            start += size


def _expected(rows: int, size: int, drop: bool) -> list[list[int]]:
    batches = [list(range(i, min(rows, i + size))) for i in range(0, rows, size)]
    if drop and batches and len(batches[-1]) < size:
        batches.pop()
    return batches


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), max_size=10),
    size=st.integers(1, 17),
    drop=st.booleans(),
    names=st.booleans(),
)
def test_batches_are_those_of_one_batch_at_a_time(
    sizes: list[int], size: int, drop: bool, names: bool
) -> None:
    ds = CutBlocks(sizes, with_names=names).batch(size, drop_remainder=drop)
    got = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
    expected = _expected(sum(sizes), size, drop)
    assert [b["id"].tolist() for b in got] == expected
    for batch, ids in zip(got, expected, strict=True):
        assert batch["vec"].shape == (len(ids), 2)
        assert batch["vec"].tolist() == [[i, -i] for i in ids]
        if names:
            assert batch["name"].tolist() == [f"r{i}" for i in ids]
    assert ds.get_dataset_size() == len(expected)


def test_a_batch_written_to_leaves_the_others_as_they_were() -> None:
    """Batches of one input block share its memory; each is its own rows only."""
    ds = CutBlocks([64]).batch(8)
    batches = [b["vec"] for b in ds.create_dict_iterator(num_epochs=1, output_numpy=True)]
    if batches[0].flags.writeable:
        batches[0][:] = 0
    assert [b[:, 0].tolist() for b in batches[1:]] == [
        list(range(i, i + 8)) for i in range(8, 64, 8)
    ]


def _stop_and_resume(make: Any, k: int) -> tuple[list[list[int]], list[list[int]]]:
    """Batches' ids of a whole epoch, and of one stopped after ``k`` batches then
    resumed from its ``state_dict`` in a new iterator."""
    full = [b[0].tolist() for b in make()]
    it = make()
    head = [next(it)[0].tolist() for _ in range(k)]
    state = it.state_dict()
    it.stop()
    resumed = make()
    resumed.load_state_dict(state)
    return full, head + [b[0].tolist() for b in resumed]


ROWS = 20_000


@pytest.fixture(scope="module")
def ids_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """20,000 small rows: MindDataset reads blocks of thousands of them."""
    path = tmp_path_factory.mktemp("batch_runs") / "ids.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "vec": {"type": "float32", "shape": [4]}})
        ids = np.arange(ROWS)
        writer.write_raw_data({"id": ids, "vec": np.repeat(ids[:, None], 4, 1).astype(np.float32)})
    return str(path)


@settings(max_examples=15, deadline=None)
@given(size=st.integers(1, 3000), data=st.data())
def test_an_epoch_resumes_at_the_batch_it_stopped_after(
    ids_file: str, size: int, data: st.DataObject
) -> None:
    """Batches of one MindDataset block, across two, the last shorter; stopped anywhere."""

    def make() -> Any:
        ds = MindDataset(ids_file, ["id", "vec"], shuffle=False).batch(size)
        return ds.create_tuple_iterator(num_epochs=1, output_numpy=True)

    k = data.draw(st.integers(0, -(-ROWS // size)), label="batches before the stop")
    full, resumed = _stop_and_resume(make, k)
    assert full == _expected(ROWS, size, drop=False)
    assert resumed == full


def test_minddataset_batches_carry_their_rows_values(ids_file: str) -> None:
    ds = MindDataset(ids_file, ["id", "vec"], shuffle=False).batch(300)
    batches = list(ds.create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert [b[1].shape for b in batches] == [(300, 4)] * 66 + [(200, 4)]
    assert np.concatenate([b[1][:, 3] for b in batches]).tolist() == list(range(ROWS))


def test_batches_of_a_repeated_and_skipped_pipeline() -> None:
    ds = CutBlocks([10, 30, 5]).batch(4, drop_remainder=True).repeat(2).skip(3).take(15)
    got = [b[0].tolist() for b in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    epoch = _expected(45, 4, drop=True)  # 11 batches an epoch
    assert got == (epoch + epoch)[3:18]
