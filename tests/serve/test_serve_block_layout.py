"""``Shuffle.BLOCK`` through ``RemoteDataset``: the server sends the block layout.

MindDataset cuts BLOCK's blocks on its files' page boundaries and sizes them from the
storage and memory; a RemoteDataset gets those facts from the server
(``GET /api/datasets/{name}/layout`` and ``/storage``) and reads the same order, through
either transport. A server that predates the layout answer makes BLOCK fail with an
error that says so, never read another order; ADAPTIVE still reads from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import MindDataset, Shuffle, config
from mrecord.errors import DatasetServerError
from mrecord.sampling import shuffle_order
from mrecord.sampling.shuffle import BlockLayout
from mrecord.serve.client.dataset import RemoteDataset
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.layout import LayoutAnswer, storage_from_json
from mrecord.serve.server.answers import ApiError
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread
from tests.factory import MakeDataset

ROWS = 300
SEED = 31
TRANSPORTS = ["local", "http"] if local_protocol.available() else ["http"]


@pytest.fixture(scope="module")
def mixed(make_dataset: MakeDataset) -> Path:
    return make_dataset(ROWS, seed=4)


@pytest.fixture(scope="module")
def server(mixed: Path) -> Iterator[ServerThread]:
    with ServerThread({"mixed": mixed}) as srv:
        yield srv


def _ids(ds: Any, epochs: int = 2) -> list[int]:
    config.set_seed(SEED)
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True, columns=["id"])
    return [int(row[0]) for _ in range(epochs) for row in it]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    "sizes", [{}, {"block_rows": 9, "window_blocks": 4}], ids=["planned", "given"]
)
def test_block_order_on_one_rank_is_mind_datasets(
    server: ServerThread, mixed: Path, transport: str, sizes: dict[str, Any]
) -> None:
    """One rank, sizes planned (from the server's storage and memory budget) or given:
    the layout and the rows of two epochs are MindDataset's."""
    local = MindDataset(mixed, shuffle=Shuffle.BLOCK, **sizes)
    remote = RemoteDataset(
        server.url, "mixed", shuffle=Shuffle.BLOCK, transport=transport, **sizes
    )
    want, got = local.block_layout, remote.block_layout
    assert want is not None and got is not None
    assert want.page_starts is not None and got.page_starts is not None
    np.testing.assert_array_equal(got.page_starts, want.page_starts)
    assert (got.block_rows, got.window_blocks) == (want.block_rows, want.window_blocks)
    assert _ids(remote) == _ids(local)


def test_the_page_boundaries_decide_the_order(server: ServerThread, mixed: Path) -> None:
    """The layout is not decoration: cut at any row instead of on pages, the same sizes
    give another order (what a reader without the server's layout would read)."""
    remote = RemoteDataset(
        server.url, "mixed", shuffle=Shuffle.BLOCK, block_rows=9, window_blocks=4
    )
    counts = remote.file_row_counts
    without_pages = BlockLayout(None, block_rows=9, window_blocks=4)
    for epoch in range(2):
        blind = shuffle_order(
            Shuffle.BLOCK, counts, SEED, epoch, layout=without_pages
        ).to_array()
        planned = shuffle_order(
            Shuffle.BLOCK, counts, SEED, epoch, layout=remote.block_layout
        ).to_array()
        assert blind.tolist() != planned.tolist()
    per_epoch = _ids(remote, 1)
    assert per_epoch == shuffle_order(
        Shuffle.BLOCK, counts, SEED, 0, layout=remote.block_layout
    ).to_array().tolist()


def test_a_server_without_the_layout_refuses_block_and_still_serves_adaptive(
    server: ServerThread, mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older server answers ``not_found`` for ``/layout`` (Starlette's 404 for a
    route it does not have): BLOCK is a DatasetServerError saying what to do; ADAPTIVE
    (the default mode) reads as before, without BLOCK."""

    def old_server(self: ServedDataset) -> dict[str, Any]:
        raise ApiError("not_found", "GET /api/datasets/mixed/layout: Not Found")

    monkeypatch.setattr(ServedDataset, "layout", old_server)
    block = RemoteDataset(server.url, "mixed", shuffle=Shuffle.BLOCK, transport="http")
    with pytest.raises(DatasetServerError, match=r"sends no block layout.*Upgrade"):
        _ids(block, 1)
    adaptive = RemoteDataset(server.url, "mixed", transport="http")  # shuffle=None
    assert adaptive.block_layout is None
    assert _ids(adaptive, 1) == _ids(MindDataset(mixed), 1)


def test_a_malformed_layout_answer_names_the_server() -> None:
    good = {"num_rows": 10, "data_bytes": 100, "page_starts": [0, 4, 8], "memory_budget": None}
    parsed = LayoutAnswer.from_json(good, "http://h:1 ('d')")
    assert parsed.page_starts.tolist() == [0, 4, 8] and parsed.memory_budget is None
    assert LayoutAnswer.from_json(parsed.to_json(), "x").to_json() == good
    bad: Any
    for bad in (
        [],
        {**good, "num_rows": -1},
        {**good, "page_starts": [0, 8, 4]},
        {**good, "page_starts": [0, 11]},
        {**good, "page_starts": "0,4"},
        {**good, "memory_budget": 1.5},
    ):
        with pytest.raises(DatasetServerError, match=r"http://h:1 \('d'\): malformed"):
            LayoutAnswer.from_json(bad, "http://h:1 ('d')")
    assert storage_from_json({"iops": None, "bandwidth": None}, "x") is None
    assert storage_from_json({"iops": 3000, "bandwidth": 2.5e8}, "x") == (3000.0, 2.5e8)
    with pytest.raises(DatasetServerError, match="must be numbers"):
        storage_from_json({"iops": "fast", "bandwidth": 1.0}, "x")
