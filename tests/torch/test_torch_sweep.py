"""``StreamingDataset`` reads a random order over small rows beyond memory a window at a
time, each window in one pass over the files (``DatasetReader.sweep_rows``), and yields
exactly the batches it yields reading them as they come; file order never sweeps."""

from __future__ import annotations

import pytest

from mrecord import Shuffle
from tests.sweeping import SMALL_ROWS, SMALL_WINDOW_BUDGET, sweeping, write_small_rows

torch = pytest.importorskip("torch")

from mrecord.torch import StreamingDataLoader, StreamingDataset  # noqa: E402

pytestmark = [pytest.mark.torch]

ROWS = SMALL_ROWS


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_small_rows(tmp_path_factory.mktemp("sweep"))[0]


def _batches(files: str, shuffle: Shuffle | bool, rank: int = 0) -> list[list[int]]:
    ds = StreamingDataset(files, shuffle=shuffle, batch_size=8, rank=rank, world_size=2)
    out = []
    for batch in StreamingDataLoader(ds, num_workers=0):
        assert torch.equal(batch["vec"][:, 0].long(), batch["id"])  # each row's own values
        out.append(batch["id"].tolist())
    return out


BUDGET = SMALL_WINDOW_BUDGET  # windows of 100 rows


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
