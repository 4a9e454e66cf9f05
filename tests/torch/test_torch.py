"""mrecord.torch: splits over ranks x DataLoader workers, exact and elastic resume, audit.

Ranks are simulated with ``rank=`` / ``world_size=`` in one process (plus one real
two-process gloo run); DataLoader workers are real processes, so counts stay small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import FileWriter, Shuffle
from mrecord.errors import ArgumentError, CheckpointError

torch = pytest.importorskip("torch")

from mrecord.torch import (  # noqa: E402
    MapDataset,
    StreamingDataLoader,
    StreamingDataset,
    audit,
)

pytestmark = [
    pytest.mark.torch,
    # 3 workers on a 2-core CI machine: torch warns; the test wants exactly that count.
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

MODES: list[Shuffle | bool] = [False, *Shuffle]


@pytest.fixture(scope="module")
def make_files(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    made: dict[tuple[int, int], str] = {}

    def make(n: int = 37, shards: int = 3) -> str:
        if (n, shards) not in made:
            folder = tmp_path_factory.mktemp(f"t{n}_{shards}")
            with FileWriter(folder / "rows.mrecord", shard_num=shards) as writer:
                writer.add_schema(
                    {
                        "id": {"type": "int64"},
                        "vec": {"type": "float32", "shape": [2]},
                        "raw": {"type": "bytes"},
                    }
                )
                writer.write_raw_data(
                    {
                        "id": np.arange(n),
                        "vec": np.stack([np.arange(n), -np.arange(n)], axis=1).astype(np.float32),
                        "raw": [b"r%d" % i for i in range(n)],
                    }
                )
            made[(n, shards)] = str(writer.files[0])
        return made[(n, shards)]

    return make


def batches_of(
    files: str,
    world: int,
    rank: int,
    *,
    workers: int = 0,
    batch: int = 4,
    limit: int | None = None,
    state: dict[str, Any] | None = None,
    epoch: int = 0,
    **kw: Any,
) -> tuple[list[list[int]], dict[str, Any]]:
    """One rank's batches of ids (at most ``limit``) and the loader's state after them."""
    ds = StreamingDataset(files, batch_size=batch, rank=rank, world_size=world, **kw)
    ds.set_epoch(epoch)
    loader = StreamingDataLoader(ds, num_workers=workers)
    if state is not None:
        loader.load_state_dict(state)
    out: list[list[int]] = []
    if limit != 0:
        for b in loader:
            out.append(b["id"].tolist())
            if limit is not None and len(out) == limit:
                break
    return out, loader.state_dict()


def run_all(files: str, world: int, **kw: Any) -> list[list[list[int]]]:
    return [batches_of(files, world, r, **kw)[0] for r in range(world)]


def flat(per_rank: list[list[list[int]]]) -> list[int]:
    return [i for rank in per_rank for b in rank for i in b]


# ---------------------------------------------------------------- split over ranks x workers


def test_ranks_are_disjoint_covering_and_independent_of_num_workers(make_files: Any) -> None:
    files = make_files()
    n = 37
    for world in (1, 2, 4):
        reference = run_all(files, world, workers=0, shuffle=Shuffle.GLOBAL)
        per_rank = -(-n // world)
        for rank_batches in reference:
            assert sum(map(len, rank_batches)) == per_rank  # pad: ceil(N / W) each
        ids = flat(reference)
        assert set(ids) == set(range(n))
        assert len(ids) - n == per_rank * world - n  # only the wrap-around pad repeats
        for workers in (1, 2, 3):
            assert run_all(files, world, workers=workers, shuffle=Shuffle.GLOBAL) == reference


def test_plain_dataloader_sees_the_same_stream(make_files: Any) -> None:
    files = make_files()
    ds = StreamingDataset(files, batch_size=4, rank=1, world_size=2)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
    plain = [b["id"].tolist() for b in loader]
    assert plain == batches_of(files, 2, 1)[0]
    assert plain != batches_of(files, 2, 0)[0]


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true:UserWarning")
def test_persistent_workers_and_pin_memory_change_nothing(make_files: Any) -> None:
    files = make_files()
    streams = []
    options: list[dict[str, Any]] = [{}, {"persistent_workers": True, "pin_memory": True}]
    for kwargs in options:
        ds = StreamingDataset(files, batch_size=3, rank=0, world_size=2, seed=4)
        loader = StreamingDataLoader(ds, num_workers=2, **kwargs)
        epochs = []
        for epoch in range(2):
            ds.set_epoch(epoch)
            epochs.append([b["id"].tolist() for b in loader])
        streams.append(epochs)
    assert streams[0] == streams[1]
    assert streams[0][0] != streams[0][1]  # set_epoch reshuffles, persistent workers too


def test_tail_drop_and_drop_last_counts(make_files: Any) -> None:
    files = make_files()
    dropped = run_all(files, 4, tail="drop", batch=4)
    assert [sum(map(len, r)) for r in dropped] == [9] * 4  # floor(37 / 4)
    assert len(set(flat(dropped))) == 36
    whole = run_all(files, 4, drop_last=True, batch=4)
    assert [[len(b) for b in r] for r in whole] == [[4, 4]] * 4  # ceil(37/4)=10 -> 8


def test_canonical_nodes_keep_ranks_on_contiguous_runs(make_files: Any) -> None:
    files = make_files(40, 4)
    per_rank = run_all(files, 4, shuffle=Shuffle.FILES, num_canonical_nodes=4, batch=5)
    for rank in per_rank:
        ids = [i for b in rank for i in b]
        assert ids == list(range(ids[0], ids[0] + 10))  # one file, read in order
    assert sorted(flat(per_rank)) == list(range(40))


# ------------------------------------------------------------------------------------ resume


@given(
    mode=st.sampled_from(MODES),
    worlds=st.tuples(st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2, 3, 4])),
    batch=st.sampled_from([1, 3, 4]),
    k=st.integers(0, 14),
    seed=st.integers(0, 3),
    epoch=st.integers(0, 2),
    nodes=st.sampled_from([None, 2, 4]),
)
def test_resume_after_k_batches_exact_and_elastic(
    make_files: Any,
    mode: Shuffle | bool,
    worlds: tuple[int, int],
    batch: int,
    k: int,
    seed: int,
    epoch: int,
    nodes: int | None,
) -> None:
    files = make_files()
    n = 37
    before, after = worlds
    kw: dict[str, Any] = {"shuffle": mode, "seed": seed, "batch": batch, "epoch": epoch}
    kw["num_canonical_nodes"] = nodes
    full = [batches_of(files, before, r, **kw)[0] for r in range(before)]
    first = []
    states = []
    for r in range(before):
        part, state = batches_of(files, before, r, limit=k, **kw)
        assert part == full[r][:k]
        first.append(part)
        states.append(state)
    assert all(s == states[0] for s in states)  # every rank's checkpoint is the same dict
    state = json.loads(json.dumps(states[0]))
    kw.pop("epoch")
    rest = [batches_of(files, after, r, state=state, **kw)[0] for r in range(after)]
    if len(first[0]) == len(full[0]):
        assert (state["epoch"], state["samples_consumed"]) == (epoch + 1, 0)
        return  # the epoch was over; the resumed run reads the next one
    assert state["epoch"] == epoch
    if after == before:  # exact: the resumed run is the rest of the uninterrupted one
        assert [f + r for f, r in zip(first, rest, strict=True)] == full
    delivered = Counter(flat(first) + flat(rest))
    assert set(delivered) == set(range(n))  # nothing skipped
    remaining = n - k * batch * before
    repeats = sum(delivered.values()) - n
    assert repeats == -(-remaining // after) * after - remaining  # the new run's tail pad only


@pytest.mark.parametrize(
    ("before", "after", "mode"),
    [
        ((2, 0), (4, 0), Shuffle.GLOBAL),
        ((4, 2), (2, 0), Shuffle.FILES),
        ((2, 2), (2, 3), Shuffle.INFILE),
        *(((1, 3), (1, 1), mode) for mode in MODES),  # 3 workers -> 1, every mode
    ],
)
def test_elastic_resume_with_workers(make_files: Any, before: Any, after: Any, mode: Any) -> None:
    files = make_files()
    (w1, nw1), (w2, nw2) = before, after
    kw = {"batch": 3, "shuffle": mode}
    first = [batches_of(files, w1, r, workers=nw1, limit=2, **kw) for r in range(w1)]
    state = first[-1][1]
    assert all(s == state for _, s in first)
    rest = [batches_of(files, w2, r, workers=nw2, state=state, **kw)[0] for r in range(w2)]
    if w1 == w2:
        assert rest == run_all(files, w2, workers=0, state=state, **kw)
        full = run_all(files, w1, **kw)
        assert [b for b, _ in first] == [r[:2] for r in full]
        assert rest == [r[2:] for r in full]
    ids = Counter(flat([b for b, _ in first]) + flat(rest))
    assert set(ids) == set(range(37))
    assert sum(ids.values()) - 37 < w2


def test_resume_across_epochs_and_after_an_epoch_end(make_files: Any) -> None:
    files = make_files()
    ds = StreamingDataset(files, batch_size=5, rank=0, world_size=1)
    loader = StreamingDataLoader(ds)
    epoch0 = [b["id"].tolist() for b in loader]
    state = loader.state_dict()
    assert (state["epoch"], state["samples_consumed"]) == (1, 0)  # the epoch ended
    ds2 = StreamingDataset(files, batch_size=5, rank=0, world_size=1)
    ds2.set_epoch(1)
    expected = [b["id"].tolist() for b in StreamingDataLoader(ds2)]
    resumed, _ = batches_of(files, 1, 0, batch=5, state=state)
    assert resumed == expected and resumed != epoch0


def test_transform_values_do_not_depend_on_topology_or_resume(make_files: Any) -> None:
    files = make_files(36, 2)

    def jitter(sample: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        return {"id": sample["id"], "aug": sample["vec"] + rng.normal(size=2).astype(np.float32)}

    def values(world: int, workers: int, state: dict[str, Any] | None = None) -> dict[int, Any]:
        got: dict[int, Any] = {}
        for r in range(world):
            ds = StreamingDataset(files, batch_size=3, rank=r, world_size=world, transform=jitter)
            loader = StreamingDataLoader(ds, num_workers=workers)
            if state is not None:
                loader.load_state_dict(state)
            for b in loader:
                for i, a in zip(b["id"].tolist(), b["aug"].numpy(), strict=True):
                    assert i not in got
                    got[i] = a.tolist()
        return got

    reference = values(1, 0)
    assert len(reference) == 36
    assert values(2, 2) == reference
    assert values(4, 1) == reference
    _, state = batches_of(files, 2, 0, limit=2, batch=3, transform=jitter)
    resumed = values(4, 0, state)  # elastic 2 -> 4 ranks
    assert all(reference[i] == v for i, v in resumed.items())
    assert len(resumed) == 36 - 2 * 3 * 2


# --------------------------------------------------------------------------------- checkpoint


def test_checkpoint_is_small_json_and_checks_the_dataset(make_files: Any) -> None:
    files = make_files()
    _, state = batches_of(files, 2, 0, limit=1, batch=4, seed=3)
    assert json.loads(json.dumps(state)) == state
    assert state["samples_consumed"] == 8 and state["global_batch"] == 8
    names = sorted(Path(f).name for f in StreamingDataset(files).fingerprint["files"])
    assert sorted(state["fingerprint"]["files"]) == names and len(names) == 3
    assert sum(state["fingerprint"]["rows"]) == 37
    other = make_files(30, 2)
    with pytest.raises(CheckpointError, match="another dataset"):
        batches_of(other, 2, 0, state=state, seed=3)
    with pytest.raises(CheckpointError, match="seed"):
        batches_of(files, 2, 0, state=state, seed=4)
    with pytest.raises(CheckpointError, match="missing"):
        batches_of(files, 2, 0, state={"epoch": 0}, seed=3)
    with pytest.raises(CheckpointError, match="num_canonical_nodes"):
        batches_of(files, 2, 0, state=state, seed=3, num_canonical_nodes=2)


def test_topology_comes_from_env_unless_arguments_are_given(
    make_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    ds = StreamingDataset(make_files())
    assert (ds.rank, ds.world_size) == (1, 3)
    ds = StreamingDataset(make_files(), rank=0, world_size=2)
    assert (ds.rank, ds.world_size) == (0, 2)
    with pytest.raises(ArgumentError, match="rank"):
        StreamingDataset(make_files(), rank=3, world_size=2)
    with pytest.raises(ArgumentError, match="batch_size"):
        StreamingDataLoader(StreamingDataset(make_files(), batch_size=2), batch_size=3)


# -------------------------------------------------------------------------------------- audit


def test_audit_proves_exactly_once_across_a_resume(make_files: Any, tmp_path: Path) -> None:
    files = make_files(36, 3)
    log = tmp_path / "audit"
    first = [
        batches_of(files, 2, r, limit=2, batch=3, audit_dir=str(log))[1] for r in range(2)
    ]
    for r in range(3):  # resume on 3 ranks
        batches_of(files, 3, r, batch=3, state=first[0], audit_dir=str(log))
    report = audit(log)
    assert report.ok, report.summary()
    assert [(e.epoch, e.delivered, e.padded) for e in report.epochs] == [(0, 36, 0)]
    # resuming rank 0 from the start again delivers its samples twice: the audit says so
    batches_of(files, 2, 0, limit=1, batch=3, audit_dir=str(log))
    bad = audit(log).epochs[0]
    assert not bad.ok and len(bad.duplicates) == 3 and not bad.missing
    cli = subprocess.run(
        [sys.executable, "-m", "mrecord.cli.main", "audit", str(log)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1 and "more than once" in cli.stdout


# ------------------------------------------------------------------------------- map style


def test_map_dataset_batches_with_one_read_and_distributed_sampler(
    make_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = make_files()
    ds = MapDataset(files)
    assert len(ds) == 37
    assert ds[5]["id"] == 5 and ds[-1]["raw"] == b"r36"
    reads: list[int] = []
    reader = ds._handle.reader
    original = reader.read_rows
    def counting_read_rows(ids: Any, *a: Any, **k: Any) -> Any:
        reads.append(len(ids))
        return original(ids, *a, **k)

    monkeypatch.setattr(reader, "read_rows", counting_read_rows)
    seen = []
    for rank in range(3):
        sampler = torch.utils.data.DistributedSampler(ds, num_replicas=3, rank=rank, seed=1)
        for b in torch.utils.data.DataLoader(ds, batch_size=5, sampler=sampler):
            seen.extend(b["id"].tolist())
            assert b["vec"].shape[1:] == (2,)
    assert set(seen) == set(range(37)) and len(seen) == 39
    assert reads == [5, 5, 3] * 3  # one read per batch
    with pytest.raises(IndexError):
        ds[37]


# ------------------------------------------------------------------------------ torchdata


@pytest.mark.filterwarnings("ignore:.set_vital. is deprecated:UserWarning")  # torchdata 0.11
def test_torchdata_stateful_dataloader_resumes_exactly(make_files: Any) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    files = make_files()

    def loader() -> Any:
        ds = StreamingDataset(files, batch_size=3, rank=1, world_size=2, seed=2)
        return stateful.StatefulDataLoader(ds, batch_size=3, num_workers=2)

    full = [b["id"].tolist() for b in loader()]
    first = loader()
    head = []
    for b in first:
        head.append(b["id"].tolist())
        if len(head) == 3:
            break
    state = first.state_dict()
    second = loader()
    second.load_state_dict(state)
    assert head + [b["id"].tolist() for b in second] == full


# ------------------------------------------------------------------------------ DDP (gloo)


def _ddp_worker(rank: int, files: str, out: str, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        ds = StreamingDataset(files, batch_size=4)
        ids = [i for b in StreamingDataLoader(ds) for i in b["id"].tolist()]
        gathered: list[Any] = [None, None]
        dist.all_gather_object(gathered, ids)
        if rank == 0:
            Path(out).write_text(json.dumps({"ranks": [ds.rank, ds.world_size], "ids": gathered}))
    finally:
        dist.destroy_process_group()


def test_two_process_ddp_with_gloo_covers_the_dataset(make_files: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "ddp.json"
    files = make_files(36, 3)
    torch.multiprocessing.spawn(_ddp_worker, args=(files, str(out), port), nprocs=2)
    result = json.loads(out.read_text())
    a, b = result["ids"]
    assert len(a) == len(b) == 18 and not set(a) & set(b)
    assert sorted(a + b) == list(range(36))


def test_missing_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("mrecord.torch.")]:
        if name not in ("mrecord.torch.audit", "mrecord.torch.plan", "mrecord.torch.checkpoint"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)
    import mrecord.torch

    assert callable(mrecord.torch.audit)  # needs no torch
    with pytest.raises(ImportError, match=r"mrecord\[torch\]"):
        mrecord.torch.StreamingDataset  # noqa: B018


def test_core_packages_never_import_the_torch_adapter() -> None:
    root = Path(__file__).resolve().parents[2] / "mrecord"
    offenders = [
        str(p.relative_to(root))
        for pkg in ("format", "reader", "writer", "pipeline", "storage", "sampling")
        for p in (root / pkg).rglob("*.py")
        if "mrecord.torch" in p.read_text()
    ]
    assert offenders == []
    assert os.path.isdir(root / "torch")
