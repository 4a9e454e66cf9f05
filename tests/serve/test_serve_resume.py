"""``RemoteDataset`` resumes mid-epoch exactly as ``MindDataset`` does.

Both are random-access sources: ``set_state(get_state(epoch, rows))`` makes the next run
start after ``rows`` rows of ``epoch``, in every shuffle mode, sharded or not, through
either transport; the rows that follow are the very rows ``MindDataset`` gives, read
from the files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord import MindDataset, Shuffle, config
from mrecord.errors import ArgumentError
from mrecord.pipeline.dataset import Dataset
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 120
MODES = [Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.FILES, Shuffle.INFILE, Shuffle.ADAPTIVE, False]
ORDER_ARGS = {"partial_window": 40, "adaptive_threshold": 100}
TRANSPORTS = ["local", "http"] if local_protocol.available() else ["http"]


@pytest.fixture(scope="module")
def mixed(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=5)


@pytest.fixture(scope="module")
def server(mixed: Path) -> Iterator[ServerThread]:
    # Small blocks: a resume position falls inside a block, not on its edge.
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        yield srv


@pytest.fixture(autouse=True, scope="module")
def _seed() -> Iterator[None]:
    old = config.get_seed()
    config.set_seed(2024)
    yield
    config.set_seed(old)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _ids(ds: Dataset, epochs: int) -> list[tuple[Any, ...]]:
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [tuple(_plain(v) for v in row) for _ in range(epochs) for row in it]


def _resumed(ds: Dataset, epoch: int, rows: int, epochs: int) -> list[tuple[Any, ...]]:
    ds.set_state(ds.get_state(epoch, rows))
    return _ids(ds, epochs)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("sharded", [False, True], ids=["whole", "shard1of3"])
@pytest.mark.parametrize("shuffle", MODES, ids=str)
def test_remote_resumes_mid_epoch_as_mind_dataset(
    server: ServerThread, mixed: Path, transport: str, sharded: bool, shuffle: Any
) -> None:
    shards: dict[str, Any] = {"num_shards": 3, "shard_id": 1} if sharded else {}
    args: dict[str, Any] = {"shuffle": shuffle, **shards, **ORDER_ARGS}
    full = _ids(MindDataset(mixed, **args), 2)
    per_epoch = len(full) // 2
    for rows in (1, 23, per_epoch - 1):
        local = _resumed(MindDataset(mixed, **args), 0, rows, 2)
        assert local == full[rows:]  # the reference itself resumes where it should
        remote_ds = mrecord.RemoteDataset(server.url, "mixed", transport=transport, **args)
        assert remote_ds.transport == transport
        assert _resumed(remote_ds, 0, rows, 2) == local


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_resumes_in_a_later_epoch_through_a_pipeline(
    server: ServerThread, mixed: Path, transport: str
) -> None:
    """``get_state`` of a batched pipeline, in its second epoch: both sources skip the
    same rows, so the batches that follow are the same."""

    def pipeline(source: Dataset) -> Dataset:
        return source.project(["id", "label"]).batch(8)

    args: dict[str, Any] = {"shuffle": Shuffle.GLOBAL, "num_shards": 2, "shard_id": 0}
    local = pipeline(MindDataset(mixed, **args))
    remote = pipeline(mrecord.RemoteDataset(server.url, "mixed", transport=transport, **args))
    got = _resumed(remote, 1, 3, 3)
    assert got == _resumed(local, 1, 3, 3)
    assert got != _ids(pipeline(MindDataset(mixed, **args)), 3)  # something was skipped


PAD = {"id": np.int64(-1), "label": np.int32(-7), "text": "padding", "vec": np.zeros(4, np.float32)}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shuffle", [Shuffle.GLOBAL, Shuffle.INFILE, False], ids=str)
def test_padded_rows_are_mind_datasets_and_resume_too(
    server: ServerThread, mixed: Path, transport: str, shuffle: Any
) -> None:
    """``padded_sample`` / ``num_padded`` as MindDataset's: 120 rows + 2 padded over 2
    shards; a rank sees the padded rows where MindDataset puts them, and resumes too."""
    args: dict[str, Any] = {
        "columns_list": sorted(PAD),
        "shuffle": shuffle,
        "num_shards": 2,
        "shard_id": 1,
        "padded_sample": PAD,
        "num_padded": 2,
    }
    want = _ids(MindDataset(mixed, **args), 2)
    assert any(row[0] == (np.dtype(np.int64).str, (), np.int64(-1).tobytes()) for row in want)
    remote = mrecord.RemoteDataset(server.url, "mixed", transport=transport, **args)
    assert _ids(remote, 2) == want
    again = mrecord.RemoteDataset(server.url, "mixed", transport=transport, **args)
    assert _resumed(again, 0, 17, 2) == want[17:]


def test_padding_arguments_follow_mind_datasets_rules(server: ServerThread) -> None:
    with pytest.raises(RuntimeError, match="requires num_padded"):
        mrecord.RemoteDataset(server.url, "mixed", columns_list=["id"], padded_sample={"id": 1})
    with pytest.raises(RuntimeError, match="requires columns_list"):
        mrecord.RemoteDataset(server.url, "mixed", padded_sample={"id": 1}, num_padded=1)
    with pytest.raises(ArgumentError, match="padded_sample"):
        mrecord.RemoteDataset(
            server.url,
            "mixed",
            columns_list=["id"],
            padded_sample={"nope": 1},
            num_padded=2,
            num_shards=2,
            shard_id=0,
        )
