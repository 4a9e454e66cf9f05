"""DataLoader workers within the memory of their group (issue 23's "never OOM-killed").

Each worker sends its batches through one shared-memory ring (``mrecord.torch.transport``),
and torch allocates shared memory whole: every slot of a ring is charged to the memory
group when the ring is made, used or not. Rings of four slots of 1.5 batches each held six
batches per worker, three times torch's own ``prefetch_factor`` (2) batches in flight:
8 workers streaming 2.4 GB of images (6.4 MB batches) were OOM-killed in a 600 MB group
(2026-11-29), and 2 workers of 16 MB batches stalled at the limit of a 450 MB group (the
kernel reclaiming the interpreter's own code pages over and over; shared memory 192 MB).
A ring now has the loader's ``prefetch_factor`` slots of an eighth more than a batch.

Each worker also sized its read-ahead, sweep windows and free buffers from the whole of
the memory budget; it now sizes them from its share (``share_memory_budget``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from mrecord import FileWriter

torch = pytest.importorskip("torch")

from mrecord.torch import transport  # noqa: E402
from tests.memory_groups import need_memory_groups, run_in_memory_group  # noqa: E402


def _ring_after_one_batch(nbytes: int, slots: int | None = None) -> transport._Ring:
    info = mock.Mock(id=0, num_workers=1)
    saved = transport._RING
    transport._RING = None
    try:
        with mock.patch.object(torch.utils.data, "get_worker_info", return_value=info):
            batch = {"b": [b"x" * nbytes]}
            packed = transport.pack(batch) if slots is None else transport.pack(batch, slots)
        assert isinstance(packed, transport.Packed)
        ring = transport._RING
        assert ring is not None
        return ring
    finally:
        transport._RING = saved


def test_a_ring_holds_prefetch_factor_slots_of_a_little_more_than_a_batch() -> None:
    n = 16 << 20
    ring = _ring_after_one_batch(n)  # torch's default prefetch_factor: 2
    assert ring.slots == 2
    assert n < ring.slot_bytes <= n + n // 8 + 64
    assert ring.tensor.numel() <= 2 * (n + n // 8 + 64) + 4096  # what the group is charged
    assert _ring_after_one_batch(n, slots=5).slots == 5
    assert _ring_after_one_batch(n, slots=100).slots == 16  # the state area's room


def test_a_ring_made_again_for_a_larger_batch_leaves_more_room() -> None:
    info = mock.Mock(id=0, num_workers=1)
    saved = transport._RING
    transport._RING = None
    try:
        with mock.patch.object(torch.utils.data, "get_worker_info", return_value=info):
            transport.pack({"b": [b"s" * 100_000]})
            first = transport._RING
            transport.pack({"b": [b"B" * 200_000]})
            again = transport._RING
        assert first is not None and again is not None and again is not first
        assert again.slot_bytes >= 300_000  # batches that vary this much get half more
    finally:
        transport._RING = saved


def test_the_loaders_prefetch_factor_sizes_its_workers_rings(tmp_path: Path) -> None:
    from mrecord.torch import StreamingDataLoader, StreamingDataset

    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data([{"id": i} for i in range(8)])
    ds = StreamingDataset(str(path), batch_size=2)
    loader = StreamingDataLoader(ds, num_workers=1, prefetch_factor=5)
    assert loader._stream._ring_slots == 5
    assert StreamingDataLoader(ds, num_workers=1)._stream._ring_slots == 2


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from mrecord.torch import StreamingDataLoader, StreamingDataset
    path, batch_size, workers, most, step = sys.argv[1:6]
    dataset = StreamingDataset(path, batch_size=int(batch_size), seed=0)
    bad = batches = 0
    seen = set()
    for batch in StreamingDataLoader(dataset, num_workers=int(workers)):
        ids = batch["id"].numpy()
        seen.update(ids.tolist())
        if "blob" in batch:  # row i: 1 MB of bytes i % 251
            bad += sum(len(b) != 1 << 20 or b[0] != i % 251 or b[-1] != i % 251
                       for i, b in zip(ids.tolist(), batch["blob"]))
        else:  # row i: 16 floats i % 1000
            bad += not np.array_equal(batch["x"].numpy()[:, 3], (ids % 1000).astype(np.float32))
        batches += 1
        time.sleep(float(step))  # a training step
        if batches == int(most):
            break
    print(json.dumps({"bad": int(bad), "batches": batches, "rows": len(seen)}))
    """
)


def _run_loader(
    limit: int, path: Path, batch_size: int, workers: int, most: int, step: float
) -> Any:
    """The child above in a memory group of ``limit`` bytes: what it printed."""
    args = (str(path), str(batch_size), str(workers), str(most), str(step))
    return run_in_memory_group(limit, _CHILD, *args, timeout=90)


def test_two_workers_of_big_batches_fit_a_small_memory_group(tmp_path: Path) -> None:
    """2 workers, 16 MB batches (16 values of 1 MB), in a 450 MB group: their rings were
    192 MB of shared memory and the loader stalled at the limit; 72 MB now. Every row
    arrives once, right."""
    need_memory_groups("a DataLoader in 450 MB")
    rows = 192
    path = tmp_path / "big.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        for start in range(0, rows, 16):
            writer.write_raw_data(
                [{"id": i, "blob": bytes([i % 251]) * (1 << 20)} for i in range(start, start + 16)]
            )
    result = _run_loader(450 << 20, path, batch_size=16, workers=2, most=-1, step=0.05)
    assert result == {"bad": 0, "batches": 12, "rows": rows}


def _iter_sharers(self: Any) -> Any:
    """What the memory budget of the process iterating is divided by."""
    from mrecord.storage.probe import budget_sharers
    from mrecord.torch._common import in_worker

    in_worker()
    yield budget_sharers()


_Sharers = type("_Sharers", (torch.utils.data.IterableDataset,), {"__iter__": _iter_sharers})


def test_each_dataloader_worker_sizes_its_reads_from_its_share_of_the_memory() -> None:
    loader = torch.utils.data.DataLoader(_Sharers(), batch_size=None, num_workers=2)
    assert sorted(int(n) for n in loader) == [2, 2]
    from mrecord.storage.probe import budget_sharers

    assert budget_sharers() == 1  # the main process keeps the whole


def test_four_workers_of_small_rows_beyond_memory_share_a_small_memory_group(
    tmp_path: Path,
) -> None:
    """3M rows of 72 bytes (216 MB), a random order, 4 workers in a 300 MB group, the first
    200 batches: each worker sized its sweep windows and buffers from the whole group's
    room, and together they stalled at its limit (2026-11-29; nothing in 100 s). Each sizes
    from its quarter now: the batches come in a few seconds, right and all distinct."""
    need_memory_groups("a DataLoader in 300 MB")
    rows = 3_000_000
    path = tmp_path / "small.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "x": {"type": "float32", "shape": [16]}})
        for start in range(0, rows, 200_000):
            ids = np.arange(start, start + 200_000, dtype=np.int64)
            x = np.repeat((ids % 1000).astype(np.float32)[:, None], 16, axis=1)
            writer.write_raw_data({"id": ids, "x": x})
    result = _run_loader(300 << 20, path, batch_size=256, workers=4, most=200, step=0)
    assert result == {"bad": 0, "batches": 200, "rows": 200 * 256}
