"""``StreamingDataset`` reads a random order over small rows beyond memory a window at a
time, each window in one pass over the files (``DatasetReader.sweep_rows``), and yields
exactly the batches it yields reading them as they come; file order never sweeps."""

from __future__ import annotations

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
from mrecord import FileWriter, Shuffle
from tests.sweeping import sweeping

torch = pytest.importorskip("torch")

from mrecord.torch import StreamingDataLoader, StreamingDataset  # noqa: E402

pytestmark = [pytest.mark.torch]

ROWS = 500


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("sweep")
    with FileWriter(folder / "t.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "vec": {"type": "float32", "shape": [3]}})
        writer.set_page_size(1 << 10)  # many chunks a shard
        writer.write_raw_data(
            [{"id": i, "vec": np.full(3, i, dtype=np.float32)} for i in range(ROWS)]
        )
    return str(writer.files[0])


def _batches(files: str, shuffle: Shuffle | bool, rank: int = 0) -> list[list[int]]:
    ds = StreamingDataset(files, shuffle=shuffle, batch_size=8, rank=rank, world_size=2)
    out = []
    for batch in StreamingDataLoader(ds, num_workers=0):
        assert torch.equal(batch["vec"][:, 0].long(), batch["id"])  # each row's own values
        out.append(batch["id"].tolist())
    return out


# a window of 100 rows: (8 + 12 bytes of values + 64 a row) x 8 windows in the budget
BUDGET = 100 * dataset_reader._SWEEP_WINDOWS * (8 + 12 + dataset_reader._SWEEP_ROW_BYTES)


@pytest.mark.parametrize("rank", [0, 1])
def test_a_random_order_is_swept_and_yields_the_same_batches(files: str, rank: int) -> None:
    plain = _batches(files, Shuffle.GLOBAL, rank)
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = sweeping(monkeypatch, BUDGET)
        swept = _batches(files, Shuffle.GLOBAL, rank)
    assert swept == plain
    assert (
        sorted(i for b in swept for i in b) == sorted(i for b in plain for i in b)
        and len({i for b in swept for i in b}) == ROWS // 2
    )
    assert any(sweep and rows >= 96 for rows, sweep in calls)  # whole windows of ~100 rows


def test_file_order_is_not_swept(files: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = sweeping(monkeypatch, BUDGET)
        got = _batches(files, False)
    assert [i for b in got for i in b] == sorted(i for b in got for i in b)
    assert calls and not any(sweep for _, sweep in calls)
