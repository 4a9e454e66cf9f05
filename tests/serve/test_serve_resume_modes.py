"""A checkpoint of a ``RemoteDataset`` run resumes in a fresh reader exactly as
``MindDataset``'s does: every shuffle mode (BLOCK included), two ranks, both transports.

The user's flow: read ``k`` rows through an iterator, save ``state_dict()`` (through
JSON, as a checkpoint file would), start a new process's reader, ``load_state_dict``
and read on. The rows that follow are those ``MindDataset`` gives after the same
resume from the files, and with the ``k`` rows before them make the uninterrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import MindDataset, Shuffle, config
from mrecord.pipeline.dataset import Dataset
from mrecord.serve.client.dataset import RemoteDataset
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 120
EPOCHS = 2
MODES: list[Any] = [
    Shuffle.GLOBAL,
    Shuffle.PARTIAL,
    Shuffle.FILES,
    Shuffle.INFILE,
    Shuffle.ADAPTIVE,
    Shuffle.BLOCK,
    False,
]
TRANSPORTS = ["local", "http"] if local_protocol.available() else ["http"]
ORDER_ARGS: dict[str, Any] = {"partial_window": 40, "adaptive_threshold": 100}
BLOCK_SIZES: dict[str, Any] = {"block_rows": 7, "window_blocks": 3}
"""Small blocks cut on the files' 4 KiB pages, a few per window: the order depends on
the page boundaries the server sends."""


@pytest.fixture(scope="module")
def mixed(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=9)


@pytest.fixture(scope="module")
def server(mixed: Path) -> Iterator[ServerThread]:
    # Small requests: a checkpoint falls inside a block request, not on its edge.
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        yield srv


@pytest.fixture(autouse=True, scope="module")
def _seed() -> Iterator[None]:
    old = config.get_seed()
    config.set_seed(77)
    yield
    config.set_seed(old)


def _row(row: list[Any]) -> tuple[Any, ...]:
    return tuple(
        (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v for v in row
    )


def _read(it: Any, limit: int | None = None) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for _ in range(EPOCHS):
        for row in it:
            out.append(_row(row))
            if len(out) == limit:
                return out
    return out


def _checkpointed(make: Callable[[], Dataset], k: int) -> tuple[list[Any], list[Any]]:
    """(the ``k`` rows before a checkpoint, the rows a fresh reader reads after it)."""
    it = make().create_tuple_iterator(num_epochs=EPOCHS, output_numpy=True)
    head = _read(it, k)
    state = json.loads(json.dumps(it.state_dict()))
    it.stop()
    resumed = make().create_tuple_iterator(num_epochs=EPOCHS, output_numpy=True)
    resumed.load_state_dict(state)
    rest: list[Any] = []
    for _ in range(EPOCHS - int(state["epoch"])):
        rest += [_row(row) for row in resumed]
    resumed.stop()
    return head, rest


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shard_id", [0, 1])
@pytest.mark.parametrize("shuffle", MODES, ids=str)
def test_a_fresh_remote_reader_resumes_a_checkpoint_as_mind_dataset(
    server: ServerThread, mixed: Path, shuffle: Any, shard_id: int, transport: str
) -> None:
    args: dict[str, Any] = {"shuffle": shuffle, "num_shards": 2, "shard_id": shard_id}
    args.update(ORDER_ARGS)
    if shuffle is Shuffle.BLOCK:
        args.update(BLOCK_SIZES)

    def local() -> Dataset:
        ds: Dataset = MindDataset(mixed, **args)
        return ds

    def remote() -> Dataset:
        ds = RemoteDataset(server.url, "mixed", transport=transport, **args)
        assert ds.transport == transport
        return ds

    full = _read(local().create_tuple_iterator(num_epochs=EPOCHS, output_numpy=True))
    per_epoch = len(full) // EPOCHS
    assert per_epoch == ROWS // 2
    for k in (23, per_epoch + 5):  # in the first epoch, and in the second
        want_head, want_rest = _checkpointed(local, k)
        assert want_head + want_rest == full  # the reference resumes where it should
        head, rest = _checkpointed(remote, k)
        assert head == want_head
        assert rest == want_rest, (k, len(rest), len(want_rest))
