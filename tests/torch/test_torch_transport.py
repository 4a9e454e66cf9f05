"""mrecord.torch's worker -> main transport: every byte arrives, with the same types for any
``num_workers``; the shared-memory ring frees, reuses and replaces its slots.

The loader tests use real DataLoader worker processes; the ring's own tests pack in this
process under a simulated worker (``get_worker_info`` patched) and unpickle here.
"""

from __future__ import annotations

import gc
import pickle
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import DatasetReader, FileWriter, Shuffle
from mrecord.block import BytesArray

torch = pytest.importorskip("torch")

from mrecord.torch import (  # noqa: E402
    MapDataset,
    StreamingDataLoader,
    StreamingDataset,
    collate,
    transport,
)

pytestmark = [pytest.mark.torch]

N = 45


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Blobs from empty to 200 KB (several per page and pages of one), strings, var arrays."""
    rng = np.random.default_rng(5)
    sizes = [0, 1, 200_000, *rng.integers(0, 60_000, N - 3).tolist()]
    folder = tmp_path_factory.mktemp("transport")
    with FileWriter(folder / "blobs.mrecord", shard_num=2) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "name": {"type": "string"},
                "vec": {"type": "float32", "shape": [3]},
                "var": {"type": "int16", "shape": [-1]},
            }
        )
        writer.write_raw_data(
            {
                "id": np.arange(N),
                "blob": [rng.bytes(s) for s in sizes],
                "name": [f"row {i} é" for i in range(N)],
                "vec": rng.normal(size=(N, 3)).astype(np.float32),
                "var": [np.arange(i % 5, dtype=np.int16) * i for i in range(N)],
            }
        )
    return str(writer.files[0])


def rows_by_id(files: str) -> dict[int, dict[str, Any]]:
    reader = DatasetReader.open(files)
    block = reader.read_rows(np.arange(reader.num_rows))
    return {int(row["id"]): row for row in (block.row(i) for i in range(len(block)))}


def describe(value: Any) -> Any:
    """Types and contents of a batch, comparable with ==."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.tolist())
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [describe(v) for v in value])
    return (type(value).__name__, value)


def check_rows(batches: list[dict[str, Any]], files: str, count: int) -> None:
    """Every sample of ``batches`` is its row, byte for byte, in the documented types."""
    rows = rows_by_id(files)
    seen = 0
    for b in batches:
        assert isinstance(b["id"], torch.Tensor) and isinstance(b["vec"], torch.Tensor)
        assert b["vec"].dtype == torch.float32 and b["vec"].shape[1:] == (3,)
        for j, i in enumerate(b["id"].tolist()):
            row = rows[i]
            assert type(b["blob"][j]) is bytes and b["blob"][j] == row["blob"]
            assert type(b["name"][j]) is str and b["name"][j] == row["name"]
            assert b["vec"][j].tolist() == row["vec"].tolist()
            var = b["var"][j]
            assert isinstance(var, torch.Tensor) and var.dtype == torch.int16
            assert var.tolist() == row["var"].tolist()
            seen += 1
    assert seen == count


# ------------------------------------------------------------------------------- real loaders


def test_stream_batches_have_every_byte_and_the_same_types_for_any_num_workers(
    files: str,
) -> None:
    def epoch(workers: int, **kw: Any) -> list[Any]:
        ds = StreamingDataset(files, shuffle=Shuffle.GLOBAL, batch_size=4, rank=0, world_size=1)
        return list(StreamingDataLoader(ds, num_workers=workers, **kw))

    reference = epoch(0)
    check_rows(reference, files, N)
    for workers in (1, 2):
        batches = epoch(workers)
        assert describe(batches) == describe(reference)


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true:UserWarning")
def test_persistent_workers_reuse_their_ring_over_epochs(files: str) -> None:
    ds = StreamingDataset(files, batch_size=5, rank=0, world_size=1, seed=2)
    loader = StreamingDataLoader(ds, num_workers=2, persistent_workers=True, pin_memory=True)
    plain = StreamingDataLoader(
        StreamingDataset(files, batch_size=5, rank=0, world_size=1, seed=2)
    )
    for epoch in range(3):
        ds.set_epoch(epoch)
        plain.user_dataset.set_epoch(epoch)
        got = list(loader)
        check_rows(got, files, N)
        assert describe(got) == describe(list(plain))


@pytest.mark.parametrize("kind", ["samples", "map"])
def test_collate_gives_default_collate_output_through_workers(files: str, kind: str) -> None:
    def epoch(workers: int, collate_fn: Any) -> list[Any]:
        ds: Any
        if kind == "samples":
            ds = StreamingDataset(files, batch_size=4, rank=0, world_size=1, columns=["id", "blob"])
        else:
            ds = MapDataset(files, columns=["id", "blob", "name", "vec"])
        loader = torch.utils.data.DataLoader(
            ds, batch_size=4, num_workers=workers, collate_fn=collate_fn
        )
        return list(loader)

    reference = epoch(0, torch.utils.data.default_collate)
    assert describe(epoch(0, collate)) == describe(reference)
    assert describe(epoch(2, collate)) == describe(reference)
    rows = rows_by_id(files)
    assert [x for b in reference for x in b["blob"]] == [
        rows[i]["blob"] for b in reference for i in b["id"].tolist()
    ]


def test_transformed_batches_go_through_the_ring_too(files: str) -> None:
    def crop(sample: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        data = np.frombuffer(sample["blob"][:8].ljust(8, b"\0"), dtype=np.uint8)
        return {"id": sample["id"], "crop": data ^ rng.integers(0, 255, 8, dtype=np.uint8)}

    def epoch(workers: int) -> list[Any]:
        ds = StreamingDataset(files, batch_size=6, rank=0, world_size=1, transform=crop)
        return list(StreamingDataLoader(ds, num_workers=workers))

    reference = epoch(0)
    assert sum(len(b["id"]) for b in reference) == N
    assert reference[0]["crop"].dtype == torch.uint8 and reference[0]["crop"].shape == (6, 8)
    assert describe(epoch(2)) == describe(reference)


def test_workers_freeze_what_they_inherit_and_the_main_process_is_untouched(files: str) -> None:
    def freeze_count(sample: dict[str, Any], rng: np.random.Generator) -> int:
        return gc.get_freeze_count()

    before = gc.get_freeze_count()
    ds = MapDataset(files, columns=["id"], transform=freeze_count)
    counts = [int(c) for b in torch.utils.data.DataLoader(ds, batch_size=9, num_workers=1)
              for c in b]
    assert all(c > 0 for c in counts)  # gc.freeze ran in the worker before any read
    assert gc.get_freeze_count() == before
    assert ds[0] == before  # no worker here: nothing frozen


# ------------------------------------------------------------------------------ the ring itself


@contextmanager
def as_worker() -> Iterator[None]:
    """Pack as if in a DataLoader worker, with a fresh ring; unpack here."""
    info = mock.Mock(id=0, num_workers=1)
    with mock.patch.object(torch.utils.data, "get_worker_info", return_value=info):
        saved = transport._RING
        transport._RING = None
        try:
            yield
        finally:
            transport._RING = saved


def send(packed: Any) -> Any:
    return pickle.loads(ForkingPickler.dumps(packed))


DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.complex64]


@st.composite
def tensors(draw: st.DrawFn) -> Any:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 5), max_size=3))
    t = torch.from_numpy(
        np.frombuffer(draw(st.binary(min_size=2048, max_size=2048)), dtype=np.uint8).copy()
    )
    n = int(np.prod(shape)) if shape else 1
    size = torch.empty(0, dtype=dtype).element_size()
    flat = t[: n * size].view(dtype) if dtype != torch.bool else t[:n].bool()
    out = flat.reshape(shape)
    return out.t() if out.dim() == 2 and draw(st.booleans()) else out  # non-contiguous too


class Pair(NamedTuple):
    a: Any
    b: Any


leaves = st.one_of(
    tensors(),
    st.binary(max_size=300),
    st.binary(max_size=300).map(lambda b: np.frombuffer(b, dtype=np.uint8).view(BytesArray)),
    st.text(max_size=5),
    st.integers(),
    st.none(),
)
batches = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
        st.tuples(inner, inner).map(lambda t: Pair(*t)),
    ),
    max_leaves=12,
)


def expected(value: Any) -> Any:
    if isinstance(value, BytesArray):
        return ("bytes", value.tobytes())
    if isinstance(value, torch.Tensor):  # NaN-safe: compare the raw bytes
        raw = value.contiguous().reshape(-1).view(torch.uint8).numpy() if value.numel() else b""
        return ("tensor", str(value.dtype), tuple(value.shape), bytes(raw))
    if isinstance(value, dict):  # the container's own type survives too
        return (type(value).__name__, {k: expected(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [expected(v) for v in value])
    return (type(value).__name__, value)


@given(batch=batches)
def test_pack_then_unpickle_gives_the_batch_back(batch: Any) -> None:
    with as_worker():
        packed = transport.pack(batch)
        got = send(packed)
    assert expected(got) == expected(batch)
    assert not isinstance(got, transport.Packed)
    if isinstance(packed, transport.Packed):
        assert not transport._ATTACHED[packed._token].state.any()  # its slot is free again


def test_a_full_ring_falls_back_and_a_freed_slot_is_reused() -> None:
    blob = b"x" * 10_000
    with as_worker():
        packed = [transport.pack({"b": [blob]}) for _ in range(transport._SLOTS)]
        assert all(isinstance(p, transport.Packed) for p in packed)
        extra = transport.pack({"b": [bytes_view(blob)]})
        assert extra == {"b": [blob]} and type(extra["b"][0]) is bytes  # torch's usual way
        ring = transport._RING
        assert ring is not None and ring.state.all()
        assert send(packed[0]) == {"b": [blob]}  # the first one carries the ring
        again = transport.pack({"b": [b"y" * 100]})
        assert isinstance(again, transport.Packed) and again._slot == packed[0]._slot
        assert [send(p) for p in packed[1:]] == [{"b": [blob]}] * (transport._SLOTS - 1)
        assert send(again) == {"b": [b"y" * 100]}
        assert not ring.state.any()


def test_a_batch_whose_ring_never_arrived_is_a_clear_error() -> None:
    with as_worker():
        first, second = transport.pack({"b": [b"1"]}), transport.pack({"b": [b"2"]})
    assert isinstance(first, transport.Packed)
    with pytest.raises(RuntimeError, match="never received"):
        send(second)
    assert send(first) == {"b": [b"1"]} and send(second) == {"b": [b"2"]}


def bytes_view(data: bytes) -> Any:
    return np.frombuffer(data, dtype=np.uint8).view(BytesArray)


def test_a_larger_batch_gets_a_new_ring_and_the_old_one_is_dropped() -> None:
    with as_worker():
        small = transport.pack({"b": [b"s" * 1000]})
        assert send(small) == {"b": [b"s" * 1000]}
        big = transport.pack({"b": [b"B" * 500_000]})
        assert isinstance(big, transport.Packed) and big._token != small._token
        assert small._token in transport._ATTACHED
        assert send(big) == {"b": [b"B" * 500_000]}
    assert small._token not in transport._ATTACHED  # same worker, new ring: old one dropped
    assert big._token in transport._ATTACHED


def test_outside_a_worker_pack_returns_plain_values() -> None:
    view = bytes_view(b"abc")
    assert transport.pack({"a": [view], "t": torch.ones(2)})["a"] == [b"abc"]
    samples = [{"a": b"x", "n": np.int32(3), "v": np.ones(2)}]
    assert describe(collate(samples)) == describe(torch.utils.data.default_collate(samples))
