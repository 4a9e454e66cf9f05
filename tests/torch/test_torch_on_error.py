"""``on_error`` for the torch datasets (issue 26 item 11): a damaged page raises by default
naming file and page; ``"skip"`` / ``"warn"`` leave its rows out, count and report them, the
audit says so, and the number of batches per rank never changes (DDP lockstep)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mrecord import FileWriter  # noqa: E402
from mrecord.errors import ChecksumError  # noqa: E402
from mrecord.storage.shard import ShardFile  # noqa: E402
from mrecord.torch import MapDataset, StreamingDataLoader, StreamingDataset, audit  # noqa: E402

ROWS = 64
WARNING = "skipped the rows of a damaged chunk"


def damaged_dataset(tmp_path: Path) -> tuple[str, list[int]]:
    """2 shards of 32 rows; one page of shard 1 damaged. Returns (shard 0, the lost ids)."""
    with FileWriter(tmp_path / "d.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(2048)
        writer.write_raw_data([{"id": i, "blob": bytes([i]) * 200} for i in range(ROWS)])
    files = writer.files
    with ShardFile(files[1]) as shard:
        at = int(shard.meta.chunks[1, 1]["offset"]) + 3
        starts = np.concatenate([[0], np.cumsum(shard.meta.page_rows)])
        base = ROWS - shard.meta.num_rows
        lost = list(range(base + int(starts[1]), base + int(starts[2])))
    data = bytearray(files[1].read_bytes())
    data[at] ^= 0xFF
    files[1].write_bytes(bytes(data))
    return str(files[0]), lost


def stream_ids(ds: StreamingDataset, workers: int, **kwargs: Any) -> list[list[int]]:
    return [b["id"].tolist() for b in StreamingDataLoader(ds, num_workers=workers, **kwargs)]


def map_ids(ds: MapDataset, workers: int, **kwargs: Any) -> list[list[int]]:
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=workers, **kwargs)
    return [b["id"].tolist() for b in loader]


def flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


@pytest.mark.parametrize("workers", [0, 2])
def test_default_raises_naming_the_file_and_page(tmp_path: Path, workers: int) -> None:
    first, _ = damaged_dataset(tmp_path)
    with pytest.raises(ChecksumError, match=r"d\.mrecord1'?: checksum mismatch in page 1"):
        stream_ids(StreamingDataset(first, shuffle=False, batch_size=8), workers)
    with pytest.raises(ChecksumError, match=r"d\.mrecord1'?: checksum mismatch in page 1"):
        map_ids(MapDataset(first), workers)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_skip_delivers_every_other_row_exactly_once(
    tmp_path: Path, workers: int, shuffle: bool
) -> None:
    first, lost = damaged_dataset(tmp_path)
    wanted = sorted(set(range(ROWS)) - set(lost))

    ds = StreamingDataset(first, shuffle=shuffle, batch_size=8, on_error="skip")
    batches = stream_ids(ds, workers)
    assert len(batches) == ROWS // 8  # the damaged batches come shorter, never fewer
    assert sorted(flat(batches)) == wanted
    assert ds.skipped_rows == lost
    assert f"skipped {len(lost)} row(s)" in ds.skip_report()
    assert "d.mrecord1" in ds.skip_report() and "page 1" in ds.skip_report()

    mds = MapDataset(first, on_error="skip")
    got = map_ids(mds, workers, shuffle=shuffle)
    assert len(got) == ROWS // 8
    assert sorted(flat(got)) == wanted
    assert mds.skipped_rows == lost and "page 1" in mds.skip_report()


def test_skip_records_travel_to_spawned_workers(tmp_path: Path) -> None:
    """Workers started by spawn (not fork) share the same skip record."""
    first, lost = damaged_dataset(tmp_path)
    ds = StreamingDataset(first, batch_size=8, on_error="skip")
    got = stream_ids(ds, 2, multiprocessing_context="spawn")
    assert sorted(flat(got)) == sorted(set(range(ROWS)) - set(lost))
    assert ds.skipped_rows == lost


def test_warn_warns_once_per_damaged_chunk_in_process(tmp_path: Path) -> None:
    first, lost = damaged_dataset(tmp_path)
    for ds in (StreamingDataset(first, batch_size=4, on_error="warn"),):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = flat(stream_ids(ds, 0))
        texts = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
        assert len(texts) == 1 and WARNING in texts[0] and "page 1" in texts[0]
        assert len(got) == ROWS - len(lost)
    mds = MapDataset(first, on_error="warn")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        map_ids(mds, 0, shuffle=True)
    assert [WARNING in str(w.message) for w in seen] == [True]


_WORKERS_SCRIPT = """
import sys
import torch
from mrecord.torch import MapDataset, StreamingDataLoader, StreamingDataset
first = sys.argv[1]
for _ in StreamingDataLoader(StreamingDataset(first, batch_size=2, on_error="warn"), num_workers=2):
    pass
loader = torch.utils.data.DataLoader(
    MapDataset(first, on_error="warn"), batch_size=8, shuffle=True, num_workers=2
)
for _ in loader:
    pass
"""


def test_warn_from_worker_processes_is_printed_once(tmp_path: Path) -> None:
    """As a user runs it (no pytest warning capture): the workers print the warning."""
    first, _ = damaged_dataset(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _WORKERS_SCRIPT, first], capture_output=True, text=True,
        timeout=300, check=True,
    )
    # The skip record is shared by the workers: the chunk is announced by the first only.
    assert done.stderr.count(WARNING) == 2, done.stderr


def test_bad_on_error_is_refused(tmp_path: Path) -> None:
    first, _ = damaged_dataset(tmp_path)
    bad: Any = "ignore"
    for make in (StreamingDataset, MapDataset):
        with pytest.raises(ValueError, match="on_error"):
            make(first, on_error=bad)


def test_audit_reports_the_skipped_rows_not_missing_nor_clean(tmp_path: Path) -> None:
    first, lost = damaged_dataset(tmp_path)
    ds = StreamingDataset(
        first, batch_size=8, audit_dir=str(tmp_path / "audit"), on_error="skip"
    )
    stream_ids(ds, 2)
    report = audit(tmp_path / "audit")
    (epoch,) = report.epochs
    assert epoch.skipped == lost and epoch.missing == [] and epoch.duplicates == {}
    assert not report.ok
    assert epoch.delivered == ROWS - len(lost)
    summary = report.summary()
    assert f"{len(lost)} rows skipped as damaged" in summary and "d.mrecord1" in summary
    assert "page 1" in summary and "exactly once" not in summary
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    result = CliRunner().invoke(cli, ["audit", str(tmp_path / "audit")])
    assert result.exit_code == 1 and f"{len(lost)} rows skipped as damaged" in result.output


def test_audit_counts_only_the_skips_of_delivered_batches_across_a_resume(
    tmp_path: Path,
) -> None:
    """A run killed after its checkpoint read (and skipped) batches it never delivered; the
    run resumed from the checkpoint delivers them: the audit counts each skip once."""
    first, lost = damaged_dataset(tmp_path)
    where = str(tmp_path / "audit")
    ds = StreamingDataset(first, shuffle=False, batch_size=8, audit_dir=where, on_error="skip")
    loader = StreamingDataLoader(ds)
    it = iter(loader)
    for _ in range(4):
        next(it)
    state = loader.state_dict()
    for _ in range(3):  # past the damaged page (rows 42..51), then "killed"
        next(it)
    again = StreamingDataset(first, shuffle=False, batch_size=8, audit_dir=where, on_error="skip")
    resumed = StreamingDataLoader(again)
    resumed.load_state_dict(state)
    list(resumed)
    (epoch,) = audit(where).epochs
    assert epoch.skipped == lost and epoch.missing == [] and epoch.duplicates == {}
    assert epoch.delivered == ROWS - len(lost) and epoch.replayed > 0


def test_ranks_keep_lockstep_when_one_loses_whole_batches(tmp_path: Path) -> None:
    """With batches of 2 over 2 ranks, rank 0's batches (44, 46), (48, 50) and rank 1's
    (45, 47), (49, 51) are wholly damaged; each is filled with its rank's own good rows, so
    both ranks yield every batch of the plan, and the audit counts the substitutes apart
    (not as duplicates)."""
    first, lost = damaged_dataset(tmp_path)
    where = str(tmp_path / "audit")
    per_rank = []
    for rank in (0, 1):
        ds = StreamingDataset(
            first, shuffle=False, batch_size=2, rank=rank, world_size=2,
            audit_dir=where, on_error="skip",
        )
        batches = stream_ids(ds, 2)
        assert len(batches) == len(StreamingDataLoader(ds)) == ROWS // 4
        assert all(batches)
        per_rank.append(flat(batches))
    delivered = set(per_rank[0]) | set(per_rank[1])
    assert delivered == set(range(ROWS)) - set(lost)
    (epoch,) = audit(where).epochs
    assert epoch.skipped == lost and epoch.missing == [] and epoch.duplicates == {}
    assert epoch.substituted == 8


def test_a_sample_stream_keeps_its_length(tmp_path: Path) -> None:
    """Samples batched by DataLoader (a collate_fn given): each damaged sample is replaced
    by a good one of its batch, so batch boundaries (and the resume positions) hold."""
    first, lost = damaged_dataset(tmp_path)
    ds = StreamingDataset(first, shuffle=False, batch_size=8, on_error="skip")
    loader = StreamingDataLoader(ds, collate_fn=torch.utils.data.default_collate)
    batches = [b["id"].tolist() for b in loader]
    assert [len(b) for b in batches] == [8] * (ROWS // 8)
    assert not set(flat(batches)) & set(lost)
    assert set(flat(batches)) == set(range(ROWS)) - set(lost)


def test_map_dataset_fills_a_wholly_damaged_batch_and_item(tmp_path: Path) -> None:
    first, lost = damaged_dataset(tmp_path)
    ds = MapDataset(first, on_error="skip")
    assert int(ds[lost[0]]["id"]) == lost[-1] + 1  # the next readable row
    batch = ds.__getitems__(lost[:4])
    assert [int(s["id"]) for s in batch] == [lost[-1] + 1 + k for k in range(4)]
    assert sorted(ds.skipped_rows) == sorted(lost[:1] + lost[:4])


def _ddp_rank(rank: int, first: str, out: str, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
        timeout=timedelta(seconds=60),
    )
    try:
        ds = StreamingDataset(first, shuffle=False, batch_size=2, on_error="skip")
        ids: list[int] = []
        steps = 0
        for batch in StreamingDataLoader(ds, num_workers=2):
            # A step's all_reduce: a rank with fewer batches would leave the other waiting.
            dist.all_reduce(torch.ones(1))
            ids.extend(batch["id"].tolist())
            steps += 1
        gathered: list[Any] = [None, None]
        dist.all_gather_object(gathered, {"steps": steps, "ids": ids})
        if rank == 0:
            Path(out).write_text(json.dumps(gathered))
    finally:
        dist.destroy_process_group()


def test_two_process_ddp_with_a_damaged_page_stays_in_lockstep(tmp_path: Path) -> None:
    import socket

    first, lost = damaged_dataset(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "ddp.json"
    torch.multiprocessing.spawn(_ddp_rank, args=(first, str(out), port), nprocs=2)
    a, b = json.loads(out.read_text())
    assert a["steps"] == b["steps"] == ROWS // 4
    assert set(a["ids"]) | set(b["ids"]) == set(range(ROWS)) - set(lost)


def test_a_read_with_no_good_row_takes_the_ranks_next_readable_samples(tmp_path: Path) -> None:
    """Resumed at stream position 42 with batches of 10, the first read (one batch) is the
    damaged page exactly: it is filled with the rank's next readable samples, 52..61."""
    first, lost = damaged_dataset(tmp_path)
    assert lost == list(range(42, 52))
    before = StreamingDataLoader(
        StreamingDataset(first, shuffle=False, batch_size=6, on_error="skip")
    )
    it = iter(before)
    for _ in range(7):
        next(it)
    state = before.state_dict()
    assert state["samples_consumed"] == 42
    ds = StreamingDataset(first, shuffle=False, batch_size=10, on_error="skip")
    loader = StreamingDataLoader(ds)
    loader.load_state_dict(state)
    batches = [b["id"].tolist() for b in loader]
    assert batches == [list(range(52, 62)), list(range(52, 62)), [62, 63]]
    assert ds.skipped_rows == lost
