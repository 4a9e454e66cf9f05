"""Shuffle.BLOCK: page-aligned blocks, stratified windows, ranks, resume, quality, planning."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter, MindDataset, Shuffle
from mrecord.cli.main import cli
from mrecord.errors import ArgumentError
from mrecord.maintenance.shuffle_report import shuffle_report
from mrecord.sampling import DistributedSampler, sampler_from_args, shuffle_order
from mrecord.sampling.order import PartitionedOrder, RangeOrder
from mrecord.sampling.quality import shuffle_quality
from mrecord.sampling.shuffle import BlockLayout
from mrecord.sampling.shuffle.block import (
    MIN_WINDOW_BLOCKS,
    BlockOrder,
    block_bounds,
    block_shuffle,
    plan_block_sizes,
    prefers_block,
)
from mrecord.storage.probe import StorageProfile, memory_budget, probe_storage
from mrecord.torch.plan import RankPlan, StreamSpec


@st.composite
def layouts(draw: Any) -> tuple[list[int], BlockLayout]:
    """File row counts, and a layout with pages of random sizes inside each file."""
    counts = draw(st.lists(st.integers(0, 300), min_size=1, max_size=5))
    starts: list[int] = []
    offset = 0
    for count in counts:
        row = 0
        while row < count:
            starts.append(offset + row)
            row += draw(st.integers(1, 40))
        offset += count
    layout = BlockLayout(
        page_starts=np.array(starts, dtype=np.int64),
        block_rows=draw(st.integers(1, 120)),
        window_blocks=draw(st.integers(1, 9)),
    )
    return counts, layout


seeds = st.integers(0, 2**32 - 1)
epochs = st.integers(0, 50)


def allowed_cuts(counts: list[int], layout: BlockLayout) -> set[int]:
    assert layout.page_starts is not None
    return {*layout.page_starts.tolist(), *np.cumsum([0, *counts]).tolist()}


# ------------------------------------------------------------------------ invariants


@given(spec=layouts(), seed=seeds, epoch=epochs)
def test_every_epoch_is_a_permutation_and_the_same_for_the_same_seed_and_epoch(
    spec: tuple[list[int], BlockLayout], seed: int, epoch: int
) -> None:
    counts, layout = spec
    order = shuffle_order(Shuffle.BLOCK, counts, seed, epoch, layout=layout)
    ids = order.to_array()
    assert np.array_equal(np.sort(ids), np.arange(sum(counts)))
    again = shuffle_order(Shuffle.BLOCK, counts, seed, epoch, layout=layout)
    assert np.array_equal(again.to_array(), ids)
    # take() of any positions agrees with iterating in chunks.
    positions = np.arange(len(order))[::-1]
    assert np.array_equal(order.take(positions), ids[positions])
    assert np.array_equal(np.concatenate([*order.iter_chunks(7), ids[:0]]), ids)


@given(spec=layouts())
def test_blocks_start_on_page_boundaries_and_never_cross_a_file(
    spec: tuple[list[int], BlockLayout],
) -> None:
    counts, layout = spec
    bounds = block_bounds(counts, layout.page_starts, layout.block_rows)
    assert bounds[0] == 0 and bounds[-1] == sum(counts)
    assert np.all(np.diff(bounds) > 0) or sum(counts) == 0
    assert set(bounds.tolist()) <= allowed_cuts(counts, layout)
    file_ends = np.cumsum(counts)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        file = int(np.searchsorted(file_ends, lo, side="right"))
        assert hi <= file_ends[file]  # the block ends inside (or at the end of) its file
    # A block is as short as block_rows allows: it ends at the first page boundary at or
    # after a cut, so no block holds a whole page more than it needs.
    assert len(bounds) - 1 >= sum(-(-c // (layout.block_rows + 40)) for c in counts if c)


@given(spec=layouts(), seed=seeds, epoch=epochs)
def test_a_window_reads_exactly_its_blocks_rows_mixed_one_block_per_stratum(
    spec: tuple[list[int], BlockLayout], seed: int, epoch: int
) -> None:
    counts, layout = spec
    order = block_shuffle(counts, seed, epoch, layout=layout)
    assert isinstance(order, BlockOrder)
    ids = order.to_array()
    if ids.size == 0:
        return
    windows = order.window_of_position(np.arange(len(order)))
    # Windows are visited one after another, each once.
    changes = np.flatnonzero(np.diff(windows)) + 1
    visited = windows[np.concatenate([[0], changes])]
    assert sorted(visited.tolist()) == list(range(order.num_windows))
    m = order.num_windows
    seen_blocks: list[int] = []
    for w in range(m):
        blocks = order.blocks_of_window(w)
        seen_blocks += blocks.tolist()
        strata = (blocks // m).tolist()
        assert len(set(strata)) == len(strata)  # at most one block of each stratum
        assert 1 <= len(blocks) <= order.window_blocks
        rows = np.concatenate(
            [np.arange(order.bounds[b], order.bounds[b + 1]) for b in blocks.tolist()]
        )
        assert np.array_equal(np.sort(ids[windows == w]), np.sort(rows))
    assert sorted(seen_blocks) == list(range(order.num_blocks))


def test_rows_of_a_window_are_mixed_not_read_block_by_block() -> None:
    counts = [20_000]
    layout = BlockLayout(page_starts=np.arange(0, 20_000, 500), block_rows=1000, window_blocks=8)
    order = block_shuffle(counts, 3, 0, layout=layout)
    assert isinstance(order, BlockOrder)
    ids = order.to_array()
    first = order.blocks_of_window(int(order.window_of_position(np.array([0]))[0]))
    block_of = np.searchsorted(order.bounds, ids[:256], side="right") - 1
    # A batch of the window's first 256 positions draws from all 8 of its blocks.
    assert set(block_of.tolist()) == set(first.tolist())
    # Adjacent positions rarely come from the same block (a run would be 1 in ~1).
    same = float(np.mean(block_of[1:] == block_of[:-1]))
    assert same < 0.3


def test_the_next_epoch_is_another_order() -> None:
    layout = BlockLayout(page_starts=None, block_rows=100, window_blocks=4)
    a = shuffle_order(Shuffle.BLOCK, [5000], 7, 0, layout=layout).to_array()
    b = shuffle_order(Shuffle.BLOCK, [5000], 7, 1, layout=layout).to_array()
    c = shuffle_order(Shuffle.BLOCK, [5000], 8, 0, layout=layout).to_array()
    assert not np.array_equal(a, b) and not np.array_equal(a, c)


def test_layout_checks_its_arguments() -> None:
    with pytest.raises(ArgumentError, match="block_rows must be >= 1"):
        BlockLayout(block_rows=0)
    with pytest.raises(ArgumentError, match="window_blocks must be >= 1"):
        BlockLayout(window_blocks=0)
    with pytest.raises(ArgumentError, match="increasing order"):
        BlockLayout(page_starts=np.array([0, 10, 5]))
    with pytest.raises(ArgumentError, match="page_starts must lie in"):
        block_bounds([10], np.array([0, 11]), 4)


# ------------------------------------------------------------------------------ ranks


@given(spec=layouts(), seed=seeds, k=st.integers(1, 5), pad=st.booleans())
@settings(max_examples=60)
def test_ranks_are_disjoint_covering_and_each_reads_one_run_of_windows(
    spec: tuple[list[int], BlockLayout], seed: int, k: int, pad: bool
) -> None:
    counts, layout = spec
    n = sum(counts)
    padded = (-n) % k if pad else 0
    orders = [
        sampler_from_args(
            shuffle=Shuffle.BLOCK, num_shards=k, shard_id=s, num_samples=None, num_padded=padded
        ).build_order(counts, seed=seed, epoch=1, layout=layout)
        for s in range(k)
    ]
    sizes = {len(o) for o in orders}
    assert len(sizes) == 1  # every rank the same count (MindSpore's rule)
    shards = [o.to_array() for o in orders]
    real = np.concatenate([s[s < n] for s in shards])
    if pad:  # with padding: every row exactly once, padded ids on top
        assert np.array_equal(np.sort(real), np.arange(n))
    else:  # wraparound: every row at least once, at most k - 1 repeats
        assert set(real.tolist()) == set(range(n))
        assert len(real) - n <= k - 1
    # Rank s reads partition s of the unsharded order: one contiguous run of it.
    whole = shuffle_order(Shuffle.BLOCK, counts, seed, 1, layout=layout).to_array()
    start = 0
    for s, ids in enumerate(shards):
        run = (n - s + k - 1) // k
        assert np.array_equal(ids[:run], whole[start : start + run])
        start += run


def test_sharded_ranks_read_a_share_of_the_blocks_not_a_share_of_every_block() -> None:
    counts = [64_000]
    layout = BlockLayout(page_starts=np.arange(0, 64_000, 1000), block_rows=1000, window_blocks=4)
    order = DistributedSampler(4, 1, shuffle=Shuffle.BLOCK).build_order(
        counts, seed=1, epoch=0, layout=layout
    )
    blocks = np.unique(order.to_array() // 1000)
    assert len(blocks) <= 64 // 4 + 4  # its windows' blocks, plus at most the seams


def test_partitioned_order_matches_the_torch_streams_canonical_partitions() -> None:
    base = RangeOrder(0, 37)
    spec = StreamSpec(file_row_counts=(37,), shuffle=None, seed=0, num_canonical_nodes=4)
    positions = np.arange(37)
    assert np.array_equal(PartitionedOrder(base, 4).take(positions), spec.ids(base, positions))


def test_adaptive_picks_block_only_when_asked_and_never_for_several_ranks() -> None:
    counts = [10_000]
    slow = BlockLayout(block_rows=500, window_blocks=4, adaptive=True)
    picked = shuffle_order(Shuffle.ADAPTIVE, counts, 1, 0, layout=slow)
    assert isinstance(picked, BlockOrder)
    plain = shuffle_order(Shuffle.ADAPTIVE, counts, 1, 0, layout=slow.without_adaptive())
    assert np.array_equal(
        plain.to_array(), shuffle_order(Shuffle.GLOBAL, counts, 1, 0).to_array()
    )
    sharded = DistributedSampler(2, 0, shuffle=Shuffle.ADAPTIVE).build_order(
        counts, seed=1, epoch=0, layout=slow
    )
    glob = DistributedSampler(2, 0, shuffle=Shuffle.GLOBAL).build_order(counts, seed=1, epoch=0)
    assert np.array_equal(sharded.to_array(), glob.to_array())


# ----------------------------------------------------------------------------- resume


@given(spec=layouts(), seed=seeds, world=st.integers(1, 4), new_world=st.integers(1, 5),
       batch=st.integers(1, 8), done=st.integers(0, 20))
@settings(max_examples=60)
def test_the_torch_stream_resumes_elastically_under_block(
    spec: tuple[list[int], BlockLayout], seed: int, world: int, new_world: int, batch: int,
    done: int,
) -> None:
    counts, _ = spec
    n = sum(counts)
    if n == 0:
        return
    stream = StreamSpec(file_row_counts=tuple(counts), shuffle=Shuffle.BLOCK, seed=seed)
    order = stream.order(0)
    first = RankPlan(n, 0, 0, world, batch)
    consumed = first.consumed_after(min(done, first.num_batches))
    delivered = [
        stream.ids(order, RankPlan(n, 0, r, world, batch).positions(0, consumed // world))
        for r in range(world)
    ] if consumed < n else []
    rest = [
        stream.ids(order, RankPlan(n, consumed, r, new_world, batch, tail="drop").positions(
            0, n))
        for r in range(new_world)
    ]
    seen = np.concatenate([*delivered, *rest, np.zeros(0, dtype=np.int64)])
    unread = (n - consumed) % new_world if consumed < n else 0
    assert len(np.unique(seen)) == len(seen)  # nothing twice
    assert len(seen) == (n if consumed < n else 0) - unread


@pytest.fixture(scope="module")
def sorted_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40,000 rows sorted by label (10 classes) in 4 shards, pages of 4 KiB (~200 rows)."""
    path = tmp_path_factory.mktemp("block") / "sorted.mrecord"
    n = 40_000
    with FileWriter(path, shard_num=4) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int64"}})
        writer.set_page_size(4096)
        ids = np.arange(n, dtype=np.int64)
        writer.write_raw_data({"id": ids, "label": ids * 10 // n})
    return path.with_name(path.name + "0")


def test_mind_dataset_reads_every_row_once_with_page_aligned_blocks(sorted_dataset: Path) -> None:
    ds = MindDataset(str(sorted_dataset), columns_list=["id"], shuffle=Shuffle.BLOCK,
                     block_rows=1000, window_blocks=8, num_parallel_workers=2)
    layout = ds.block_layout
    assert layout is not None and layout.page_starts is not None
    assert layout.block_rows == 1000 and layout.window_blocks == 8 and layout.why == "given"
    pages = set(layout.page_starts.tolist())
    assert len(pages) > 40  # 4 KiB pages
    counts = ds.reader.file_row_counts
    bounds = block_bounds(counts, layout.page_starts, 1000)
    assert set(bounds[:-1].tolist()) <= pages
    epochs = []
    it = ds.create_dict_iterator(num_epochs=2, output_numpy=True)
    for _ in range(2):
        got = [int(r["id"]) for r in it]
        assert sorted(got) == list(range(40_000))
        epochs.append(got)
    assert epochs[0] != epochs[1]
    with pytest.raises(ArgumentError, match="window_blocks must be >= 1"):
        MindDataset(str(sorted_dataset), shuffle=Shuffle.BLOCK, window_blocks=0)


@given(k=st.integers(0, 39_999))
@settings(max_examples=8, deadline=None)
def test_mind_dataset_resumes_exactly_under_block(sorted_dataset: Path, k: int) -> None:
    def make() -> Any:
        ds = MindDataset(str(sorted_dataset), columns_list=["id"], shuffle=Shuffle.BLOCK,
                         num_shards=3, shard_id=1, block_rows=1000, window_blocks=8)
        return ds.batch(100)

    full = [b["id"].tolist() for b in make().create_dict_iterator(num_epochs=1)]
    k = k % len(full)
    it = make().create_dict_iterator(num_epochs=1)
    head = [next(it)["id"].tolist() for _ in range(k)]
    state = json.loads(json.dumps(it.state_dict()))
    it.stop()
    resumed = make().create_dict_iterator(num_epochs=1)
    resumed.load_state_dict(state)
    assert head + [b["id"].tolist() for b in resumed] == full


# ---------------------------------------------------------------------------- quality


def test_batch_label_entropy_is_within_5_percent_of_global_on_label_sorted_data() -> None:
    n = 400_000
    counts = [n // 4] * 4
    labels = np.arange(n) * 10 // n
    page_rows = 13_797  # 1 MiB pages of 76-byte rows
    layout = BlockLayout(page_starts=np.arange(0, n, page_rows), block_rows=page_rows,
                         window_blocks=MIN_WINDOW_BLOCKS)
    report = shuffle_quality(counts, modes=["global", "block", "partial"], labels=labels,
                             batch_size=256, epochs=2, layout=layout, partial_window=100_000)
    glob, block, partial = (m.mean("label_entropy") for m in report.modes)
    assert block >= 0.95 * glob
    assert partial < 0.9 * glob  # the check can fail: a window of consecutive rows cannot pass


def test_shuffle_report_shows_block_next_to_global(sorted_dataset: Path) -> None:
    report = shuffle_report(sorted_dataset, modes=["global", "block"], label_column="label",
                            batch_size=64, epochs=2, block_rows=800, window_blocks=20)
    assert [m.mode for m in report.modes] == ["global", "block"]
    assert report.block is not None and "window_blocks=20" in report.block
    assert "page boundaries" in report.block
    glob, block = (m.mean("label_entropy") for m in report.modes)
    assert block >= 0.95 * glob
    result = CliRunner().invoke(
        cli, ["shuffle-report", str(sorted_dataset), "--mode", "global", "--mode", "block",
              "--label-column", "label", "--epochs", "1", "--block-rows", "800",
              "--window-blocks", "20"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "GLOBAL" in result.output and "BLOCK" in result.output
    assert "BLOCK: block_rows=800, window_blocks=20" in result.output


# --------------------------------------------------------------------------- planning


def test_plan_follows_the_device_and_the_memory_budget() -> None:
    mb = 1 << 20
    common = {"num_rows": 4_000_000, "data_bytes": 304 * mb, "page_bytes": mb}
    cloud = plan_block_sizes(iops=3000, bandwidth=250e6, memory_budget=300 * mb, **common)
    disk = plan_block_sizes(iops=200, bandwidth=150e6, memory_budget=300 * mb, **common)
    roomy = plan_block_sizes(iops=3000, bandwidth=250e6, memory_budget=4096 * mb, **common)
    unknown = plan_block_sizes(iops=None, bandwidth=None, memory_budget=None, **common)
    row_bytes = 304 * mb / 4_000_000
    for rows, window, why in (cloud, disk, roomy, unknown):
        assert rows * row_bytes >= mb * 0.999  # never below one page
        assert window >= 1 and rows * window * row_bytes <= 4096 * mb / 4 * 1.01
        assert why
    assert cloud[1] >= MIN_WINDOW_BLOCKS  # mixing kept: blocks shrink, the window does not
    assert disk[0] * disk[1] <= cloud[0] * cloud[1] * 1.01  # the same memory either way
    assert roomy[1] * roomy[0] > cloud[1] * cloud[0]  # more memory, bigger windows
    assert "3,000 IOPS" in cloud[2] and "not measured" in unknown[2]
    # Sizes are powers of two in bytes: a measurement 10% off gives the same plan.
    assert plan_block_sizes(iops=3300, bandwidth=240e6, memory_budget=300 * mb, **common) == (
        cloud[0], cloud[1], plan_block_sizes(
            iops=3300, bandwidth=240e6, memory_budget=300 * mb, **common)[2])


def test_adaptive_rule_picks_block_for_slow_storage_and_data_beyond_memory() -> None:
    mb = 1 << 20
    tabular = {"data_bytes": 356 * mb, "num_rows": 4_000_000}
    assert prefers_block(iops=3000, bandwidth=250e6, memory_budget=300 * mb, **tabular)
    assert not prefers_block(iops=3000, bandwidth=250e6, memory_budget=1024 * mb, **tabular)
    assert not prefers_block(iops=None, bandwidth=250e6, memory_budget=300 * mb, **tabular)
    images = {"data_bytes": 2400 * mb, "num_rows": 24_000}  # 100 KB rows: random is fine
    assert not prefers_block(iops=15_000, bandwidth=1.5e9, memory_budget=768 * mb, **images)


def test_probe_measures_the_device_once_and_memory_budget_is_positive(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(1 << 20))
    profile = probe_storage(path, seconds=0.05)
    if profile is not None:  # None only where the file system has no direct I/O
        assert isinstance(profile, StorageProfile)
        assert profile.iops > 0 and profile.bandwidth > 0
        assert probe_storage(path) is profile  # cached per device
    budget = memory_budget()
    assert budget is not None and budget > 0


def test_mind_dataset_adaptive_reads_block_only_when_it_measures_slow_storage(
    sorted_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mrecord.pipeline.sources.block_layout as wiring

    measured: list[int] = []

    def slow(reader: Any) -> tuple[float, float]:
        measured.append(1)
        return 3000.0, 250e6

    monkeypatch.setattr(wiring, "measured_numbers", slow)
    monkeypatch.setattr(wiring, "memory_budget", lambda: 1 << 40)  # the data fits: GLOBAL
    assert MindDataset(str(sorted_dataset), shuffle=None).block_layout is None
    assert measured == []  # nothing measured when the data fits in memory
    monkeypatch.setattr(wiring, "memory_budget", lambda: 100_000)  # smaller than the data
    ds = MindDataset(str(sorted_dataset), columns_list=["id"], shuffle=None)
    layout = ds.block_layout
    assert layout is not None and layout.adaptive and measured == [1]
    order = ds.sampler.build_order(ds.reader.file_row_counts, seed=0, epoch=0, layout=layout)
    assert type(order).__name__ == "BlockOrder"
    got = [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1, output_numpy=True)]
    assert sorted(got) == list(range(40_000))
    # Several ranks: ADAPTIVE never picks BLOCK, and nothing is measured.
    measured.clear()
    sharded = MindDataset(str(sorted_dataset), shuffle=None, num_shards=2, shard_id=0)
    assert sharded.block_layout is None and measured == []
    # BLOCK on several ranks: sizes from the dataset alone, the same on every rank.
    ranks = [
        MindDataset(str(sorted_dataset), shuffle=Shuffle.BLOCK, num_shards=2, shard_id=s)
        for s in range(2)
    ]
    layouts_ = [r.block_layout for r in ranks]
    assert measured == [] and all(lay is not None for lay in layouts_)
    assert {(lay.block_rows, lay.window_blocks) for lay in layouts_ if lay} == {
        (layouts_[0].block_rows, layouts_[0].window_blocks)  # type: ignore[union-attr]
    }
    assert "2 ranks: not measured" in layouts_[0].why  # type: ignore[union-attr]


def test_probe_gives_none_where_direct_io_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import mrecord.storage.probe as probe

    path = tmp_path / "data.bin"
    path.write_bytes(b"\0" * 65536)
    real_open = os.open

    def no_direct(file: Any, flags: int, *args: Any) -> int:
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "direct I/O not supported")
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", no_direct)  # the probe opens with os.open
    probe.clear_probe_cache()
    try:
        assert probe.probe_storage(path, seconds=0.01) is None
    finally:
        probe.clear_probe_cache()
