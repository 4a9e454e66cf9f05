"""Trainers read through the service: ``mrecord.torch`` datasets and Ray read tasks take a
served dataset (``http://HOST:PORT/api/datasets/NAME`` or a ``RemoteDataset``) where they
take files, with the same rows, order, sharding and resume (issue 28).

The server is a ``ServerThread`` on loopback here; tests/serve/test_serve_hosts_torch.py runs a
two-host torchrun job against a server on another emulated host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import RemoteDataset, Shuffle
from mrecord.errors import ArgumentError
from mrecord.serve.server.run import ServerThread
from mrecord.testing.mixed import write_mixed

torch = pytest.importorskip("torch")

from mrecord.torch import MapDataset, StreamingDataLoader, StreamingDataset  # noqa: E402

ROWS = 150
TOKEN = "trainers-token"
HTTP = {"token": TOKEN, "transport": "http"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mixed(tmp_path_factory.mktemp("trainers") / "mixed.mrecord", ROWS, seed=11)


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerThread]:
    with ServerThread({"mixed": data}, token=TOKEN) as s:
        yield s


def _url(server: ServerThread) -> str:
    return f"{server.url}/api/datasets/mixed"


def _same(a: Any, b: Any) -> None:
    """Two samples (or batches) hold the same values of the same types."""
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        assert type(x) is type(y), (key, type(x), type(y))
        if isinstance(x, list):
            assert len(x) == len(y)
            for u, v in zip(x, y, strict=True):
                assert type(u) is type(v), (key, type(u), type(v))
                np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
        elif isinstance(x, torch.Tensor):
            assert torch.equal(x, y), key
        elif isinstance(x, (bytes, str)):
            assert x == y, key
        else:
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("shuffle", [Shuffle.GLOBAL, Shuffle.INFILE, Shuffle.FILES, False])
def test_streaming_dataset_from_the_service_equals_the_files_on_every_rank(
    data: Path, server: ServerThread, shuffle: Any
) -> None:
    for rank in range(3):
        args = {"shuffle": shuffle, "seed": 5, "rank": rank, "world_size": 3}
        files = list(StreamingDataset(data, **args))
        served = list(StreamingDataset(_url(server), storage_options=HTTP, **args))
        assert len(served) == len(files) == -(-ROWS // 3)
        for a, b in zip(files, served, strict=True):
            _same(a, b)


def test_loader_with_workers_from_a_remote_dataset_equals_the_files(
    data: Path, server: ServerThread
) -> None:
    # Each DataLoader worker opens its own connections (the dataset is sent to it).
    remote = RemoteDataset(server.url, "mixed", token=TOKEN, transport="http")
    got = []
    for source in (data, remote):
        ds = StreamingDataset(source, seed=2, batch_size=8, rank=1, world_size=2)
        ds.set_epoch(1)
        got.append(list(StreamingDataLoader(ds, num_workers=2)))
    assert len(got[0]) == len(got[1]) > 1
    for a, b in zip(*got, strict=True):
        _same(a, b)


def test_a_checkpoint_of_the_files_resumes_through_the_service_and_back(
    data: Path, server: ServerThread
) -> None:
    def make(source: Any) -> Any:
        options = HTTP if isinstance(source, str) else None
        ds = StreamingDataset(
            source, seed=9, batch_size=4, rank=0, world_size=1, storage_options=options
        )
        return ds, StreamingDataLoader(ds, num_workers=0)

    ds, loader = make(data)
    assert make(_url(server))[0].fingerprint == ds.fingerprint  # same files, same checkpoint
    whole = [b["id"].tolist() for b in loader]
    for first_source, then_source, taken in ((data, _url(server), 10), (_url(server), data, 3)):
        first = make(first_source)[1]
        it = iter(first)
        head = [next(it)["id"].tolist() for _ in range(taken)]
        then = make(then_source)[1]
        then.load_state_dict(first.state_dict())
        assert head + [b["id"].tolist() for b in then] == whole  # no repeat, no miss


def test_map_dataset_from_the_service_with_a_distributed_sampler(
    data: Path, server: ServerThread
) -> None:
    files, served = MapDataset(data), MapDataset(_url(server), storage_options=HTTP)
    assert len(files) == len(served) == ROWS
    _same(files[-1], served[-1])
    sampler = torch.utils.data.DistributedSampler(files, num_replicas=2, rank=1, seed=3)
    batches = []
    for ds in (files, served):
        loader = torch.utils.data.DataLoader(
            ds, batch_size=16, sampler=sampler, num_workers=2, collate_fn=list
        )
        batches.append([s for batch in loader for s in batch])
    assert len(batches[1]) == ROWS // 2
    for a, b in zip(*batches, strict=True):
        _same(a, b)
    with pytest.raises(IndexError, match="out of range"):
        served[ROWS]


def test_reads_larger_than_the_servers_block_limit_are_cut(data: Path) -> None:
    from mrecord.serve.protocol.limits import Limits

    with ServerThread({"mixed": data}, limits=Limits(max_block_rows=7)) as small:
        url = f"{small.url}/api/datasets/mixed"
        ds = StreamingDataset(url, seed=1, batch_size=32, storage_options={"transport": "http"})
        ids = [int(i) for b in StreamingDataLoader(ds) for i in b["id"]]
    assert sorted(ids) == list(range(ROWS))


def test_bad_served_arguments_are_refused_with_what_to_do(server: ServerThread) -> None:
    other = f"{server.url}/api/datasets/other"
    with pytest.raises(ArgumentError, match="one dataset on several servers"):
        StreamingDataset([_url(server), other])
    with pytest.raises(ArgumentError, match="may hold"):
        MapDataset(_url(server), storage_options={"key": "x"})


@pytest.mark.usefixtures("ray_cluster")
def test_ray_read_tasks_from_the_service_equal_the_files(data: Path, server: ServerThread) -> None:
    ray = pytest.importorskip("ray")
    from mrecord.ray import read_mrecord

    ctx = ray.data.DataContext.get_current()
    before = ctx.execution_options.preserve_order
    try:
        ctx.execution_options.preserve_order = True
        got = []
        for source, options in ((str(data), None), (_url(server), HTTP)):
            ds = read_mrecord(
                source,
                columns=["id", "blob", "points"],
                shuffle=Shuffle.GLOBAL,
                seed=4,
                epoch=1,
                override_num_blocks=3,
                storage_options=options,
            )
            got.append(ds.take_all())
        assert [r["id"] for r in got[1]] == [r["id"] for r in got[0]]
        assert sorted(r["id"] for r in got[1]) == list(range(ROWS))
        for a, b in zip(*got, strict=True):
            assert a["blob"] == b["blob"]
            np.testing.assert_array_equal(a["points"], b["points"])
    finally:
        ctx.execution_options.preserve_order = before
