"""A block shuffle beyond memory reads its next window's chunks into the reader's buffers
while this window is handed out (``DatasetReader.will_read_window``, announced a window
ahead by ``MindDataset``):

- the hint reads every chunk the window's reads take, once, and those reads then read
  nothing more; another hint of the same window reads nothing;
- the buffers grow to hold two windows, up to a third of the memory budget, and no
  further: a window too large for that is not read ahead;
- a damaged chunk raises ``ChecksumError`` where the read is, never wrong values;
- a ``Shuffle.BLOCK`` epoch announces its windows and yields exactly the rows, in the
  order, of an epoch that does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord.storage.readahead as readahead
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle, config
from mrecord.errors import ChecksumError
from mrecord.pipeline.sources.mind_dataset import MindDataset as MindSource
from mrecord.storage.verified import clear_verified
from tests.sweeping import chunk_preads

ROWS = 600
SCHEMA = {
    "id": {"type": "int64"},
    "label": {"type": "int32"},
    "pts": {"type": "float32", "shape": [-1, 2]},
}


def _pts(i: int) -> np.ndarray:
    return np.arange(2 * (i % 5), dtype=np.float32).reshape(-1, 2) + i


def _write(path: Path) -> str:
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(1 << 10)  # many small pages
        writer.write_raw_data([{"id": i, "label": i % 10, "pts": _pts(i)} for i in range(ROWS)])
    return str(writer.files[0])


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(tmp_path_factory.mktemp("hints") / "t.mrecord")


def _budget(monkeypatch: pytest.MonkeyPatch, budget: int) -> None:
    """Every reader beyond its memory (``budget`` bytes), every block cold."""
    clear_verified()
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_memory_budget", lambda self: budget)


def _window(reader: DatasetReader, first_page: int, pages: int) -> np.ndarray:
    """Every row of ``pages`` pages from ``first_page``, in a mixed order."""
    starts = reader.shards[0].page_starts_list
    ids = np.arange(starts[first_page], starts[first_page + pages])
    return np.random.default_rng(first_page).permutation(ids)


def _size(dataset: str) -> int:
    return Path(dataset).stat().st_size


def test_a_window_hint_reads_its_chunks_once_and_its_reads_read_nothing(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _budget(monkeypatch, _size(dataset) - 1)
    preads = chunk_preads(monkeypatch)
    with DatasetReader.open(dataset) as reader:
        ids = _window(reader, 3, 4)
        reader.will_read_window(ids[: len(ids) // 2])
        hinted = len(preads)
        assert hinted > 0  # the window's chunks came in with the hint
        shard = reader.shards[0]
        window_bytes = int(shard.meta.chunks["length"][3:7].sum())
        assert reader._buffers().kept_bytes == window_bytes  # all of them, nothing else
        reader.will_read_window(ids[len(ids) // 2 :])  # the same window: nothing more
        block = reader.read_rows(ids, window=True)
        assert len(preads) == hinted  # the read found every chunk held
    assert np.asarray(block.columns["id"]).tolist() == ids.tolist()
    assert np.asarray(block.columns["label"]).tolist() == (ids % 10).tolist()
    for value, i in zip(block.columns["pts"], ids.tolist(), strict=True):
        assert np.array_equal(value, _pts(i)) and value.flags.writeable


def test_the_buffers_grow_to_two_windows_within_a_third_of_the_budget(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Capacity at its floor (16 MiB) would hold these windows anyway; a smaller one is
    set by hand to see the growth, and its bound."""
    budget = _size(dataset) - 1
    _budget(monkeypatch, budget)
    preads = chunk_preads(monkeypatch)
    with DatasetReader.open(dataset) as reader:
        buffers = reader._buffers()
        buffers.capacity = 1 << 10
        shard = reader.shards[0]
        pages = 4
        window_bytes = int(shard.meta.chunks["length"][3 : 3 + pages].sum())
        reader.will_read_window(_window(reader, 3, pages))
        assert preads and buffers.capacity >= 2 * window_bytes
        assert buffers.capacity <= budget // 3
        # a window whose two copies pass a third of the budget is left to its reads
        big = int(budget // 3 / 2 / (window_bytes / pages)) + 8
        fresh = DatasetReader.open(dataset)
        with fresh:
            fresh._buffers().capacity = 1 << 10
            count = len(preads)
            fresh.will_read_window(_window(fresh, 0, min(big, len(shard.page_starts) - 2)))
            assert len(preads) == count
            assert fresh._buffers().kept_bytes == 0


def test_nothing_is_read_ahead_when_the_data_fits_in_memory(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _budget(monkeypatch, 1 << 40)
    preads = chunk_preads(monkeypatch)
    with DatasetReader.open(dataset) as reader:
        reader.will_read_window(_window(reader, 3, 4))
    assert preads == []


def test_a_damaged_chunk_read_ahead_raises_where_the_read_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "t.mrecord")
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        offset, length, _ = shard.chunk_place(4, shard.field_index("pts"))
    data = bytearray(Path(path).read_bytes())
    data[offset + length // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    _budget(monkeypatch, _size(path) - 1)
    with DatasetReader.open(path) as reader:
        ids = _window(reader, 3, 4)
        with pytest.raises(ChecksumError, match="page 4, field 'pts'"):
            reader.will_read_window(ids)
        with pytest.raises(ChecksumError, match="page 4, field 'pts'"):
            reader.read_rows(ids, window=True)


def _epoch(dataset: str, announce: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[int] = []
    real = DatasetReader.will_read_window

    def spy(self: DatasetReader, ids: Any, columns: Any = None) -> None:
        calls.append(len(ids))
        real(self, ids, columns)

    with monkeypatch.context() as patch:
        patch.setattr(DatasetReader, "will_read_window", spy)
        if not announce:
            patch.setattr(MindSource, "_hint_window", lambda self, ids: None)
        config.set_seed(5)
        ds = MindDataset(
            dataset,
            shuffle=Shuffle.BLOCK,
            num_parallel_workers=2,
            block_rows=40,
            window_blocks=4,
        )
        ds._block_rows = 20  # reads of 20 rows: windows of 160 are 8 reads
        rows = [
            (int(r[0]), r[2].tolist())
            for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
        ]
    assert bool(calls) == announce
    return rows


def test_a_block_epoch_announces_its_windows_and_yields_the_same_rows(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _budget(monkeypatch, _size(dataset) - 1)
    announced = _epoch(dataset, True, monkeypatch)
    assert sorted(i for i, _ in announced) == list(range(ROWS))
    assert announced == _epoch(dataset, False, monkeypatch)
