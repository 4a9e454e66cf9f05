"""mrecord.torch.plan: the rank / worker split as pure functions (no torch needed)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.sampling import Shuffle
from mrecord.torch.plan import RankPlan, StreamSpec, sample_rng


@st.composite
def plans(draw: st.DrawFn) -> tuple[int, int, int, int, str, bool]:
    n = draw(st.integers(1, 120))
    world = draw(st.integers(1, 8))
    batch = draw(st.integers(1, 6))
    start = draw(st.integers(0, n))
    tail = draw(st.sampled_from(["pad", "drop"]))
    return n, world, batch, start, tail, draw(st.booleans())


@given(plans())
def test_ranks_split_the_rest_of_the_stream_per_the_tail_policy(
    args: tuple[int, int, int, int, str, bool],
) -> None:
    n, world, batch, start, tail, drop_last = args
    ranks = [RankPlan(n, start, r, world, batch, tail, drop_last) for r in range(world)]  # type: ignore[arg-type]
    counts = {p.count for p in ranks}
    assert len(counts) == 1  # lockstep: every rank the same number of samples
    count = counts.pop()
    remaining = n - start
    expected = -(-remaining // world) if tail == "pad" else remaining // world
    if drop_last:
        expected -= expected % batch
    assert count == expected
    # The documented split (plan.py's module doc): rank r of W, resumed at stream
    # position c, delivers c + r, c + r + W, c + r + 2W, ... -- strided, MindSpore's
    # shard rule. Written out here, not taken from RankPlan, so a contiguous split fails.
    for r, plan in enumerate(ranks):
        expected_positions = [start + r + world * k for k in range(count)]
        assert plan.positions(0, plan.count).tolist() == expected_positions
    positions = np.concatenate([p.positions(0, p.count) for p in ranks])
    assert sorted(positions.tolist()) == list(range(start, start + count * world))
    if tail == "drop":
        assert positions.max(initial=-1) < n  # only "pad" wraps around past N


@given(plans(), st.integers(1, 5))
def test_workers_deal_whole_batches_round_robin(
    args: tuple[int, int, int, int, str, bool], workers: int
) -> None:
    n, world, batch, start, tail, drop_last = args
    plan = RankPlan(n, start, 0, world, batch, tail, drop_last)  # type: ignore[arg-type]
    per_worker = [list(plan.worker_batches(w, workers)) for w in range(workers)]
    collected = []  # DataLoader's order: one batch from each worker in turn
    for i in range(max(map(len, per_worker), default=0)):
        collected += [ws[i] for ws in per_worker if i < len(ws)]
    assert collected == list(range(plan.num_batches))
    assert sum(len(plan.batch_positions(b)) for b in collected) == plan.count


@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=4).filter(lambda c: sum(c) > 0),
    st.sampled_from([None, *Shuffle]),
    st.integers(1, 7),
)
def test_stream_is_a_permutation_for_any_canonical_node_count(
    counts: list[int], mode: Shuffle | None, nodes: int
) -> None:
    spec = StreamSpec(tuple(counts), mode, seed=3, num_canonical_nodes=nodes)
    n = spec.num_rows
    ids = spec.ids(spec.order(1), np.arange(2 * n, dtype=np.int64))
    assert sorted(ids[:n].tolist()) == list(range(n))
    assert ids[n:].tolist() == ids[:n].tolist()  # positions past N wrap around
    assert Counter(ids.tolist()) == Counter(list(range(n)) * 2)


def test_sample_rng_depends_only_on_seed_epoch_and_position() -> None:
    a = sample_rng(1, 2, 3).random(4)
    assert np.array_equal(a, sample_rng(1, 2, 3).random(4))
    for other in (sample_rng(1, 2, 4), sample_rng(1, 3, 3), sample_rng(2, 2, 3)):
        assert not np.array_equal(a, other.random(4))
