"""Shuffle-quality metrics checked exactly: every metric against a plain-Python count over
the order, every uniform value against the average over all permutations of a small
dataset, the report's fields, JSON and text table whole, every argument's message whole
(docs/RELIABILITY.md, "Mutation testing", sampling/quality.py).

The expected values never come from ``mrecord.sampling.quality``: they are written out by
hand (the arithmetic in comments) or computed here by brute force.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from mrecord.errors import ArgumentError
from mrecord.sampling.quality import (
    DEFAULT_MODES,
    METRICS,
    ModeQuality,
    ShuffleReport,
    format_shuffle_report,
    inversions,
    order_metrics,
    shuffle_quality,
    uniform_metrics,
)
from mrecord.sampling.samplers import DistributedSampler
from mrecord.sampling.shuffle import BlockLayout, Shuffle, shuffle_order

NAN = math.nan


@pytest.fixture(autouse=True)
def _warnings_are_errors() -> Iterator[None]:
    """As pyproject's ``filterwarnings = error``, also under tools/mutation_quick.py: an
    edge case (one row, no full batch) gives nan without a numpy RuntimeWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ------------------------------------------------------------------- brute-force metrics


def _file_of(row: int, counts: Sequence[int]) -> int:
    end = 0
    for f, c in enumerate(counts):
        end += c
        if row < end:
            return f
    raise AssertionError(row)


def _entropy(values: Sequence[Any]) -> float:
    b = len(values)
    return -sum(c / b * math.log(c / b) for c in Counter(values).values())


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return NAN
    return sxy / math.sqrt(sxx * syy)


def brute_metrics(
    order: Sequence[int], counts: Sequence[int], batch: int, labels: Sequence[Any] | None = None
) -> dict[str, float]:
    """The module docstring's definitions, one Python loop each."""
    total = sum(counts)
    pi = [int(r) for r in order if r < total]
    n = len(pi)
    out = dict.fromkeys(METRICS, NAN)
    if n == 0:
        return out
    out["displacement"] = sum(abs(pi[i] / total - i / n) for i in range(n)) / n
    if n > 1:
        out["adjacent_gap"] = sum(abs(pi[i + 1] - pi[i]) for i in range(n - 1)) / (n - 1)
        inv = sum(pi[i] > pi[j] for i in range(n) for j in range(i + 1, n))
        out["kendall_tau"] = 1 - 2 * inv / (n * (n - 1) / 2)
    batches = [pi[i : i + batch] for i in range(0, n - batch + 1, batch)]
    if batches:
        out["files_per_batch"] = sum(
            len({_file_of(r, counts) for r in b}) for b in batches
        ) / len(batches)
    if labels is not None:
        q = sum((c / total) ** 2 for c in Counter(labels).values())
        row_labels = [labels[r] for r in pi]
        if batches:
            out["label_entropy"] = sum(_entropy([labels[r] for r in b]) for b in batches) / len(
                batches
            )
        if n > 1 and q < 1:
            agree = sum(row_labels[i] == row_labels[i + 1] for i in range(n - 1)) / (n - 1)
            out["label_autocorr"] = (agree - q) / (1 - q)
    return out


def brute_epoch_corr(a: Sequence[int], b: Sequence[int], total: int) -> float:
    pos_a = {int(r): i for i, r in enumerate(r for r in a if r < total)}
    pos_b = {int(r): i for i, r in enumerate(r for r in b if r < total)}
    both = [r for r in pos_a if r in pos_b]
    if len(both) < 2:
        return NAN
    return _pearson([pos_a[r] for r in both], [pos_b[r] for r in both])


def assert_same(got: dict[str, float], want: dict[str, float], keys: Sequence[str]) -> None:
    for key in keys:
        if math.isnan(want[key]):
            assert math.isnan(got[key]), (key, got[key])
        else:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), key


PER_EPOCH = [k for k in METRICS if k != "epoch_corr"]


def _codes(labels: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    classes = sorted(set(labels))
    codes = np.array([classes.index(x) for x in labels], dtype=np.int64)
    return codes, np.array([labels.count(c) for c in classes], dtype=np.int64)


# ----------------------------------------------------------------------------- inversions


def test_inversions_by_hand() -> None:
    assert inversions([]) == 0
    assert inversions([7]) == 0
    assert inversions([1, 2]) == 0
    assert inversions([2, 1]) == 1
    assert inversions([2, 2]) == 0  # ties are not inversions
    assert inversions([3, 1, 2]) == 2  # (3,1), (3,2)
    assert inversions([4, 0, 3, 1, 2]) == 6  # 4 before 0,3,1,2; 3 before 1,2
    assert inversions([[2, 1], [0, 3]]) == 3  # flattened: (2,1), (2,0), (1,0)
    assert inversions([0.5, -1.5, 0.25]) == 2
    for n in (2, 3, 4, 5, 8, 9, 16, 17, 100):
        assert inversions(np.arange(n)[::-1]) == n * (n - 1) // 2
        assert inversions(np.arange(n)) == 0
        assert inversions(np.zeros(n)) == 0


@pytest.mark.parametrize("n", [31, 32, 33, 64, 65, 200])
def test_inversions_against_pairs(n: int) -> None:
    rng = np.random.default_rng(n)
    for values in (rng.permutation(n), rng.integers(0, 5, n), -rng.random(n)):
        x = np.asarray(values)
        brute = int(np.triu(x[:, None] > x[None, :], 1).sum())
        assert inversions(values) == brute


# -------------------------------------------------------------------------- order_metrics


def test_order_metrics_by_hand() -> None:
    # Files of 3 and 2 rows: ids 0-2 in file 0, 3-4 in file 1. Order 4 0 3 1 2.
    got = order_metrics([4, 0, 3, 1, 2], [3, 2], batch_size=2)
    # |4-0| + |0-1| + |3-2| + |1-3| + |2-4| = 10, over N = 5 and n = 5 positions.
    assert got["displacement"] == pytest.approx(10 / 25)
    assert got["adjacent_gap"] == pytest.approx((4 + 3 + 2 + 1) / 4)
    assert got["kendall_tau"] == pytest.approx(1 - 2 * 6 / 10)
    # Full batches (4 0) and (3 1): files {1, 0} and {1, 0}; the lone 2 is left out.
    assert got["files_per_batch"] == 2.0
    assert math.isnan(got["label_entropy"]) and math.isnan(got["label_autocorr"])
    assert math.isnan(got["epoch_corr"])
    assert list(got) == list(METRICS)


def test_files_per_batch_boundary_rows_and_batch_sizes() -> None:
    counts = [3, 2, 4]  # files: 0-2, 3-4, 5-8
    # Batches (2 3) (4 5) (8 0): files {0,1} {1,2} {2,0}: row 3 starts file 1, row 5 file 2.
    got = order_metrics([2, 3, 4, 5, 8, 0, 1], counts, batch_size=2)
    assert got["files_per_batch"] == 2.0
    # Batches (0 1 2) (3 4 5) (6 7 8): 1, 2 and 1 files.
    got = order_metrics(range(9), counts, batch_size=3)
    assert got["files_per_batch"] == pytest.approx(4 / 3)
    assert order_metrics(range(9), counts, batch_size=1)["files_per_batch"] == 1.0
    # Exactly one batch, then fewer rows than a batch: nan.
    assert order_metrics(range(9), counts, batch_size=9)["files_per_batch"] == 3.0
    assert math.isnan(order_metrics(range(9), counts, batch_size=10)["files_per_batch"])


def test_label_metrics_by_hand() -> None:
    labels = ["a", "a", "b", "b", "b", "c"]  # rows 0..5
    codes, class_counts = _codes(labels)
    order = [0, 2, 1, 3, 4, 5]  # labels a b a b b c
    got = order_metrics(order, [6], batch_size=3, codes=codes, class_counts=class_counts)
    # Batches (a b a) and (b b c): each 2 + 1 of 3.
    h = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert got["label_entropy"] == pytest.approx(h)
    # Neighbours: ab ba ab bb bc: 1 equal of 5; q = (2/6)^2 + (3/6)^2 + (1/6)^2 = 14/36.
    q = 14 / 36
    assert got["label_autocorr"] == pytest.approx((1 / 5 - q) / (1 - q))
    # Batches of 2: (a b) (a b) (b c): log 2 each.
    got = order_metrics(order, [6], batch_size=2, codes=codes, class_counts=class_counts)
    assert got["label_entropy"] == pytest.approx(math.log(2))
    # One batch of all six: a 2, b 3, c 1.
    got = order_metrics(order, [6], batch_size=6, codes=codes, class_counts=class_counts)
    assert got["label_entropy"] == pytest.approx(
        -(2 / 6) * math.log(2 / 6) - (3 / 6) * math.log(3 / 6) - (1 / 6) * math.log(1 / 6)
    )
    # Sorted: batches (a a) (b b) (b c), entropies 0, 0, log 2; neighbours agree 3 of 5.
    got = order_metrics([0, 1, 2, 3, 4, 5], [6], batch_size=2, codes=codes,
                        class_counts=class_counts)  # fmt: skip
    assert got["label_entropy"] == pytest.approx(math.log(2) / 3)
    assert got["label_autocorr"] == pytest.approx((3 / 5 - q) / (1 - q))


def test_label_metrics_need_both_codes_and_counts() -> None:
    codes = np.array([0, 1, 0, 1])
    counts = np.array([2, 2])
    only_codes = order_metrics([0, 1, 2, 3], [4], batch_size=2, codes=codes)
    only_counts = order_metrics([0, 1, 2, 3], [4], batch_size=2, class_counts=counts)
    for got in (only_codes, only_counts):
        assert math.isnan(got["label_entropy"]) and math.isnan(got["label_autocorr"])
    both = order_metrics([0, 1, 2, 3], [4], batch_size=2, codes=codes, class_counts=counts)
    assert both["label_entropy"] == pytest.approx(math.log(2))
    assert both["label_autocorr"] == pytest.approx((0 - 0.5) / 0.5)  # never equal: -1


def test_one_class_and_one_row_give_nan_label_autocorrelation() -> None:
    one_class = order_metrics([1, 0, 2], [3], batch_size=3, codes=np.zeros(3, np.int64),
                              class_counts=np.array([3]))  # fmt: skip
    assert math.isnan(one_class["label_autocorr"])  # q = 1: nothing to correlate
    assert one_class["label_entropy"] == 0.0
    one_row = order_metrics([1, 3], [2], batch_size=1, codes=np.array([0, 1]),
                            class_counts=np.array([1, 1]))  # fmt: skip
    assert math.isnan(one_row["label_autocorr"]) and one_row["label_entropy"] == 0.0
    assert one_row["displacement"] == pytest.approx(0.5)  # |1/2 - 0/1|
    assert math.isnan(one_row["adjacent_gap"]) and math.isnan(one_row["kendall_tau"])
    assert one_row["files_per_batch"] == 1.0


def test_padded_ids_are_left_out_and_empty_orders_are_nan() -> None:
    # N = 4: ids 4, 5 are padding. Kept: 3 1 0 2 over n = 4 positions.
    got = order_metrics([3, 4, 1, 0, 5, 2], [2, 2], batch_size=2)
    assert got["displacement"] == pytest.approx((3 + 0 + 2 + 1) / 4 / 4)  # |3/4-0|+|1/4-1/4|...
    assert got["adjacent_gap"] == pytest.approx((2 + 1 + 2) / 3)
    assert got["kendall_tau"] == pytest.approx(1 - 2 * 4 / 6)  # 3>1,3>0,3>2,1>0
    assert got["files_per_batch"] == 2.0  # (3 1) and (0 2): files {1, 0} each
    for ids in ([], [4, 9], np.zeros(0, dtype=np.int64)):
        assert all(math.isnan(v) for v in order_metrics(ids, [2, 2], batch_size=1).values())
    assert all(math.isnan(v) for v in order_metrics([], [], batch_size=1).values())


def test_order_metrics_accepts_any_integer_array_shape() -> None:
    want = order_metrics([3, 0, 2, 1], [4], batch_size=2)
    for ids in (np.array([[3, 0], [2, 1]], dtype=np.uint16), (3, 0, 2, 1), np.array([3, 0, 2, 1])):
        got = order_metrics(ids, np.array([4], dtype=np.int32), batch_size=2)
        assert_same(got, want, list(METRICS))
    assert want["displacement"] == pytest.approx((3 + 1 + 0 + 2) / 4 / 4)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_order_metrics_against_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = [int(c) for c in rng.integers(0, 9, 5)]
    total = sum(counts)
    labels = [int(x) for x in rng.integers(0, 3, total)]
    order = [int(x) for x in rng.permutation(total + 3)]  # 3 padded ids among them
    codes, class_counts = _codes(labels)
    for batch in (1, 2, 3, 5, 7):
        got = order_metrics(order, counts, batch_size=batch, codes=codes,
                            class_counts=class_counts)  # fmt: skip
        assert_same(got, brute_metrics(order, counts, batch, labels), PER_EPOCH)


def test_kendall_tau_on_a_sample_of_positions() -> None:
    n = 100
    ids = np.arange(n)
    # Any subset of a sorted order is sorted, of a reversed one reversed: exactly +1 / -1.
    for sample in (2, 10, 99, 100, 1000):
        up = order_metrics(ids, [n], batch_size=1, kendall_sample=sample)["kendall_tau"]
        down = order_metrics(ids[::-1], [n], batch_size=1, kendall_sample=sample)
        assert up == 1.0 and down["kendall_tau"] == -1.0
    # Not sampled when the order fits (n <= sample): the exact value.
    order = [1, 0, 2, 3, 4, 5, 6, 7, 8, 9]  # one inversion of 45 pairs
    for sample in (10, 11):
        got = order_metrics(order, [10], batch_size=1, kendall_sample=sample)
        assert got["kendall_tau"] == pytest.approx(1 - 2 / 45)


def test_two_positions() -> None:
    up = order_metrics([0, 1], [2], batch_size=2)
    down = order_metrics([1, 0], [2], batch_size=2)
    assert up["kendall_tau"] == 1.0 and down["kendall_tau"] == -1.0
    assert up["adjacent_gap"] == 1.0 and down["displacement"] == pytest.approx(0.5)
    assert up["files_per_batch"] == 1.0
    codes, counts = np.array([0, 1]), np.array([1, 1])
    labelled = order_metrics([1, 0], [2], batch_size=2, codes=codes, class_counts=counts)
    assert labelled["label_entropy"] == pytest.approx(math.log(2))
    assert labelled["label_autocorr"] == pytest.approx(-1.0)
    # Fewer rows than a batch: no label entropy.
    short = order_metrics([1, 0], [2], batch_size=3, codes=codes, class_counts=counts)
    assert math.isnan(short["label_entropy"]) and math.isnan(short["files_per_batch"])
    assert short["label_autocorr"] == pytest.approx(-1.0)


def test_kendall_tau_sample_is_seeded_by_the_generator() -> None:
    rng = np.random.default_rng(9)
    order = rng.permutation(500)

    def tau(gen: np.random.Generator | None) -> float:
        return order_metrics(order, [500], batch_size=1, kendall_sample=40, rng=gen)[
            "kendall_tau"
        ]

    # Without a generator: a fixed one, so the estimate is the same call after call.
    assert tau(None) == tau(None) == tau(np.random.default_rng(0))
    assert tau(np.random.default_rng(1)) == tau(np.random.default_rng(1))
    # An exact Kendall tau of 40 sorted positions: a multiple of 1/780 in [-1, 1].
    value = tau(np.random.default_rng(1))
    assert abs(value) < 1 and (1 - value) * 780 / 2 == pytest.approx(round((1 - value) * 390))
    # Different subsets give different estimates (of 500 rows, 40 at a time).
    assert len({tau(np.random.default_rng(s)) for s in range(6)}) > 1


# ------------------------------------------------------------------------ uniform_metrics


def _all_permutation_means(
    counts: Sequence[int], batch: int, labels: Sequence[Any]
) -> dict[str, float]:
    total = sum(counts)
    sums = dict.fromkeys(PER_EPOCH, 0.0)
    perms = list(itertools.permutations(range(total)))
    for perm in perms:
        for key, value in brute_metrics(perm, counts, batch, labels).items():
            if key in sums:
                sums[key] += value
    return {key: value / len(perms) for key, value in sums.items()}


def test_uniform_closed_forms_by_hand() -> None:
    u = uniform_metrics([2, 1], batch_size=2, class_counts=np.array([2, 1]))
    assert u["displacement"] == pytest.approx(8 / 27)  # (9 - 1) / 27
    assert u["adjacent_gap"] == pytest.approx(4 / 3)
    # A batch of 2 of 3 rows misses file 0 never, file 1 with C(2,2)/C(3,2) = 1/3.
    assert u["files_per_batch"] == pytest.approx(1 + 2 / 3)
    # q = 4/9 + 1/9 = 5/9; equal neighbours 2*1/(3*2) = 1/3: (1/3 - 5/9) / (4/9) = -1/2.
    assert u["label_autocorr"] == pytest.approx(-0.5)
    # Batches of 2: {a,a} (1/3, entropy 0) or {a,b} (2/3, log 2).
    assert u["label_entropy"] == pytest.approx(2 / 3 * math.log(2))
    assert u["kendall_tau"] == 0.0 and u["epoch_corr"] == 0.0


def test_uniform_batches_larger_than_the_dataset_hold_every_row() -> None:
    u = uniform_metrics([0, 3, 0, 2], batch_size=50, class_counts=np.array([4, 1]))
    assert u["files_per_batch"] == pytest.approx(2.0)  # the two files with rows
    p = np.array([4, 1]) / 5
    assert u["label_entropy"] == pytest.approx(-float(np.sum(p * np.log(p))))
    u = uniform_metrics([5, 1], batch_size=6)
    assert u["files_per_batch"] == pytest.approx(2.0)
    assert math.isnan(u["label_entropy"]) and math.isnan(u["label_autocorr"])


def test_uniform_label_metrics_degenerate_cases() -> None:
    one_class = uniform_metrics([4], batch_size=2, class_counts=np.array([4]))
    assert math.isnan(one_class["label_autocorr"])
    assert one_class["label_entropy"] == 0.0
    one_row = uniform_metrics([1], batch_size=1, class_counts=np.array([1]))
    assert math.isnan(one_row["label_autocorr"])
    two = uniform_metrics([2], batch_size=1, class_counts=np.array([1, 1]))
    assert two["label_autocorr"] == pytest.approx((0 - 0.5) / 0.5)
    assert two["label_entropy"] == 0.0
    none = uniform_metrics([2], batch_size=1, class_counts=np.zeros(0, dtype=np.int64))
    assert math.isnan(none["label_entropy"]) and math.isnan(none["label_autocorr"])
    assert all(math.isnan(v) for v in uniform_metrics([], batch_size=2).values())
    assert all(math.isnan(v) for v in uniform_metrics([0, 0], batch_size=2).values())
    single = uniform_metrics([1], batch_size=4)
    assert single["displacement"] == 0.0 and single["adjacent_gap"] == pytest.approx(2 / 3)
    assert single["files_per_batch"] == 1.0


def test_uniform_files_per_batch_for_large_files() -> None:
    # 16 files of 1,000 rows, batches of 64: 16 (1 - C(15000, 64) / C(16000, 64)).
    c = math.comb
    want = 16 * (1 - c(15000, 64) / c(16000, 64))
    got = uniform_metrics([1000] * 16, batch_size=64)["files_per_batch"]
    assert got == pytest.approx(want, rel=1e-9)
    # Unequal files: 1 - C(N - n_s, B) / C(N, B) each.
    counts = [10, 200, 3000]
    want = sum(1 - c(3210 - s, 40) / c(3210, 40) for s in counts)
    assert uniform_metrics(counts, batch_size=40)["files_per_batch"] == pytest.approx(
        want, rel=1e-9
    )


# ------------------------------------------------------------------------ shuffle_quality


def _orders(
    mode: str, counts: list[int], shards: int, epochs: int, seed: int = 11, **kw: Any
) -> list[Any]:
    shuffle = None if mode == "none" else Shuffle(mode)
    out = []
    for epoch in range(epochs):
        if shards == 1:
            order = shuffle_order(shuffle, counts, seed, epoch, **kw)
        else:
            sampler = DistributedSampler(shards, 0, shuffle=False if shuffle is None else shuffle)
            order = sampler.build_order(counts, seed=seed, epoch=epoch, **kw)
        out.append([int(x) for x in order.to_array()])
    return out


@pytest.mark.parametrize("shards", [1, 3])
def test_report_values_are_the_metrics_of_the_orders_read(shards: int) -> None:
    counts = [9, 4, 11]
    labels = [f"c{(7 * i) % 4}" for i in range(24)]
    layout = BlockLayout(page_starts=np.array([0, 4, 9, 16]), block_rows=3, window_blocks=2)
    report = shuffle_quality(
        counts, modes=["global", "block", "partial", "files", "infile", "none"], labels=labels,
        num_shards=shards, batch_size=3, epochs=3, seed=11, partial_window=5, layout=layout,
    )  # fmt: skip
    assert [m.mode for m in report.modes] == ["global", "block", "partial", "files", "infile",
                                              "none"]  # fmt: skip
    for quality in report.modes:
        kw: dict[str, Any] = {}
        if quality.mode == "partial" and shards == 1:
            kw = {"partial_window": 5}
        if quality.mode == "block":
            kw = {"layout": layout}
        orders = _orders(quality.mode, counts, shards, 3, **kw)
        for epoch, order in enumerate(orders):
            want = brute_metrics(order, counts, 3, labels)
            got = {key: quality.values[key][epoch] for key in PER_EPOCH}
            assert_same(got, want, PER_EPOCH)
        corr = [brute_epoch_corr(orders[e], orders[e + 1], 24) for e in range(2)]
        assert len(quality.values["epoch_corr"]) == 2
        for got_corr, want_corr in zip(quality.values["epoch_corr"], corr, strict=True):
            if math.isnan(want_corr):
                assert math.isnan(got_corr)
            else:
                assert got_corr == pytest.approx(want_corr, rel=1e-12, abs=1e-12)
    assert report.num_rows == 24 and report.file_row_counts == [9, 4, 11]
    assert report.num_shards == shards and report.batch_size == 3 and report.epochs == 3
    assert report.seed == 11 and report.num_classes == 4
    _, class_counts = _codes(labels)
    assert_same(report.uniform, uniform_metrics(counts, batch_size=3, class_counts=class_counts),
                list(METRICS))  # fmt: skip
    assert report.block == "block_rows=3, window_blocks=2, cut at page boundaries (defaults)"


def test_partial_window_reaches_the_order() -> None:
    counts = [30, 30]
    small = shuffle_quality(counts, modes=["partial"], epochs=1, partial_window=4, seed=11)
    (order,) = _orders("partial", counts, 1, 1, partial_window=4)
    assert small.modes[0].values["displacement"][0] == pytest.approx(
        brute_metrics(order, counts, 32)["displacement"]
    )
    # A window of 4 rows moves a row at most 3 places: displacement under 3/60.
    assert small.modes[0].values["displacement"][0] < 3 / 60


def test_epoch_correlation_by_hand() -> None:
    # The stored order every epoch: positions equal, correlation 1.
    report = shuffle_quality([5, 5], modes=["none"], epochs=3)
    assert report.modes[0].values["epoch_corr"] == [pytest.approx(1.0)] * 2
    none = report.modes[0].values
    assert none["displacement"] == [0.0] * 3 and none["adjacent_gap"] == [1.0] * 3
    assert none["kendall_tau"] == [1.0] * 3
    # Batches of 32 of 10 rows: none full.
    assert all(math.isnan(v) for v in none["files_per_batch"])
    assert none["label_entropy"] == [] and none["label_autocorr"] == []
    assert report.uniform["files_per_batch"] == 2.0  # a 10-row batch holds both files


def test_epoch_corr_of_rank_zero_rows_read_in_both_epochs() -> None:
    # Rank 0 of 2, stored order, 5 rows: 0 2 4 every epoch (the pad is rank 1's).
    report = shuffle_quality([5], modes=["none"], num_shards=2, epochs=2, batch_size=1)
    values = report.modes[0].values
    assert values["epoch_corr"] == [pytest.approx(1.0)]
    # |0/5 - 0/3| + |2/5 - 1/3| + |4/5 - 2/3| = 0 + 1/15 + 2/15, over 3.
    assert values["displacement"] == [pytest.approx(1 / 15)] * 2
    assert values["adjacent_gap"] == [2.0, 2.0] and values["files_per_batch"] == [1.0, 1.0]
    # Two rows on rank 0 (0 2): correlation of two positions, exactly 1 for the same order.
    two = shuffle_quality([4], modes=["none"], num_shards=2, epochs=2)
    assert two.modes[0].values["epoch_corr"] == [pytest.approx(1.0)]
    # One row per rank: positions cannot vary, no correlation.
    one = shuffle_quality([2], modes=["none", "global"], num_shards=2, epochs=2)
    assert all(math.isnan(m.values["epoch_corr"][0]) for m in one.modes)


def test_report_without_labels() -> None:
    report = shuffle_quality([6, 6], epochs=2, batch_size=4)
    assert [m.mode for m in report.modes] == list(DEFAULT_MODES)
    assert DEFAULT_MODES == ("global", "block", "partial", "files", "infile")
    assert report.num_classes is None and report.num_shards == 1 and report.seed == 5489
    assert report.block == "block_rows=65,536, window_blocks=64, cut at any row (defaults)"
    for m in report.modes:
        assert m.values["label_entropy"] == [] and m.values["label_autocorr"] == []
        assert len(m.values["displacement"]) == 2 and len(m.values["epoch_corr"]) == 1
        assert list(m.values) == list(METRICS)
    assert math.isnan(report.uniform["label_entropy"])
    assert math.isnan(report.uniform["label_autocorr"])
    assert shuffle_quality([6, 6], modes=["files", "global"]).block is None


def test_default_seed_and_epochs() -> None:
    report = shuffle_quality([7, 9], modes=["global"])
    assert report.epochs == 3 and report.batch_size == 32 and report.seed == 5489
    orders = [
        [int(x) for x in shuffle_order(Shuffle.GLOBAL, [7, 9], 5489, e).to_array()]
        for e in range(3)
    ]
    got = report.modes[0].values["adjacent_gap"]
    assert got == [pytest.approx(brute_metrics(o, [7, 9], 32)["adjacent_gap"]) for o in orders]


def test_reports_of_one_seed_are_equal() -> None:
    def make() -> dict[str, Any]:
        return shuffle_quality([300, 200], modes=["global", "files"], labels=np.arange(500) % 7,
                               kendall_sample=30, seed=3).to_dict()  # fmt: skip

    assert make() == make()


def test_kendall_subsets_are_drawn_from_the_seed() -> None:
    counts = [40, 30]
    report = shuffle_quality(counts, modes=["global", "files"], epochs=2, kendall_sample=12,
                             seed=7)  # fmt: skip
    rng = np.random.default_rng(7)  # the docstring's generator, mode after mode, epoch by epoch
    for quality in report.modes:
        for epoch, order in enumerate(_orders(quality.mode, counts, 1, 2, seed=7)):
            positions = sorted(int(p) for p in rng.choice(70, size=12, replace=False))
            subset = [order[p] for p in positions]
            want = brute_metrics(subset, [70], 1)["kendall_tau"]
            assert quality.values["kendall_tau"][epoch] == pytest.approx(want, abs=1e-12)


def test_modes_are_named_any_case_or_as_shuffle() -> None:
    report = shuffle_quality(
        [4], modes=[Shuffle.GLOBAL, "FILES", "None", "adaptive", Shuffle.FALSE], epochs=1
    )
    assert [m.mode for m in report.modes] == ["global", "files", "none", "adaptive", "false"]
    # "false" (Shuffle.FALSE) is the stored order, like "none".
    assert report.modes[4].values["kendall_tau"] == [1.0]


def _message(make: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ArgumentError) as info:
        make(*args, **kwargs)
    return str(info.value)


def test_argument_messages_whole() -> None:
    known = "['none', 'false', 'adaptive', 'global', 'partial', 'files', 'infile', 'block']"
    assert _message(shuffle_quality, [4], modes=["random"]) == (
        f"unknown shuffle mode 'random'; choose from {known}"
    )
    assert _message(shuffle_quality, [4], modes=[]) == "name at least one shuffle mode"
    assert _message(shuffle_quality, [4], modes=()) == "name at least one shuffle mode"
    for name in ("num_shards", "batch_size", "epochs"):
        for bad in (0, -1, True, 2.0, "2", None):
            assert _message(shuffle_quality, [4], **{name: bad}) == (
                f"{name} must be an int >= 1, got {bad!r}"
            )
        one: dict[str, Any] = {name: 1}
        shuffle_quality([4], modes=["none"], **one)  # 1 is allowed
    assert _message(shuffle_quality, [4], labels=[1, 2, 3]) == (
        "labels must hold one value per row (4), got an array of shape (3,); "
        "pass a scalar label column"
    )
    assert _message(shuffle_quality, [2], labels=[[1], [2]]) == (
        "labels must hold one value per row (2), got an array of shape (2, 1); "
        "pass a scalar label column"
    )


def test_labels_are_classes_of_any_hashable_value() -> None:
    labels = ["cat", "dog", "cat", "cat"]
    report = shuffle_quality([4], modes=["none"], labels=labels, batch_size=2, epochs=1)
    values = report.modes[0].values
    assert report.num_classes == 2
    # Batches (cat dog) (cat cat): log 2 and 0.
    assert values["label_entropy"] == [pytest.approx(math.log(2) / 2)]
    # Neighbours: cd dc cc: 1 of 3 equal; q = 9/16 + 1/16 = 10/16.
    q = 10 / 16
    assert values["label_autocorr"] == [pytest.approx((1 / 3 - q) / (1 - q))]
    assert report.uniform["label_autocorr"] == pytest.approx((6 / 12 - q) / (1 - q))


# ---------------------------------------------------------------------- the report's views


def test_mode_quality_mean() -> None:
    quality = ModeQuality("global", {"displacement": [0.25, 0.5], "kendall_tau": []})
    assert quality.mean("displacement") == 0.375
    assert math.isnan(quality.mean("kendall_tau")) and math.isnan(quality.mean("nope"))
    assert isinstance(quality.mean("displacement"), float)


def _report(**kw: Any) -> ShuffleReport:
    values: dict[str, list[float]] = {
        "displacement": [0.25, 0.5],
        "adjacent_gap": [1234.4, 999.9],
        "kendall_tau": [-0.0004, 0.0],
        "files_per_batch": [NAN, NAN],
        "label_entropy": [0.5, 1.0],
        "label_autocorr": [-1000.0, -1000.0],
        "epoch_corr": [0.1],
    }
    uniform = {
        "displacement": 1 / 3, "adjacent_gap": 1000.0, "kendall_tau": 0.0,
        "files_per_batch": 2.0, "label_entropy": 1.0, "label_autocorr": 0.0,
        "epoch_corr": 0.0,
    }  # fmt: skip
    args: dict[str, Any] = {
        "num_rows": 12345, "file_row_counts": [12000, 345], "num_shards": 2, "batch_size": 8,
        "epochs": 2, "seed": 7, "num_classes": 3, "uniform": uniform,
        "modes": [ModeQuality("global", values), ModeQuality("none", {"displacement": [0.0]})],
    }  # fmt: skip
    return ShuffleReport(**{**args, **kw})


def test_report_to_dict() -> None:
    data = _report(block="b").to_dict()
    assert data == {
        "num_rows": 12345,
        "file_row_counts": [12000, 345],
        "num_shards": 2,
        "batch_size": 8,
        "epochs": 2,
        "seed": 7,
        "num_classes": 3,
        "block": "b",
        "uniform": {
            "displacement": 1 / 3, "adjacent_gap": 1000.0, "kendall_tau": 0.0,
            "files_per_batch": 2.0, "label_entropy": 1.0, "label_autocorr": 0.0,
            "epoch_corr": 0.0,
        },
        "modes": {
            "global": {
                "displacement": [0.25, 0.5], "adjacent_gap": [1234.4, 999.9],
                "kendall_tau": [-0.0004, 0.0], "files_per_batch": [None, None],
                "label_entropy": [0.5, 1.0], "label_autocorr": [-1000.0, -1000.0],
                "epoch_corr": [0.1],
            },
            "none": {"displacement": [0.0]},
        },
    }  # fmt: skip
    assert _report(modes=[]).to_dict()["modes"] == {} and _report().to_dict()["block"] is None
    assert _report(uniform={"x": NAN}).to_dict()["uniform"] == {"x": None}


def test_text_table_whole() -> None:
    text = format_shuffle_report(_report(block="block_rows=3, window_blocks=2, cut at any row"))
    # Columns as wide as their widest cell: the titles (33), "-0.000"/"-1,000", "0.000".
    assert text == "\n".join([
        "12,345 rows in 2 files, rank 0 of 2, batches of 8, 2 epochs, seed 7, "
        "3 label classes (log C = 1.099)",
        "BLOCK: block_rows=3, window_blocks=2, cut at any row",
        "",
        "metric                             GLOBAL   NONE  uniform",
        "---------------------------------  ------  -----  -------",
        "mean displacement |pi(i)/N - i/n|   0.375  0.000    0.333",
        "mean adjacent gap (rows)            1,117      -    1,000",
        "Kendall tau vs stored order        -0.000      -    0.000",
        "distinct files per batch                -      -    2.000",
        "batch label entropy (nats)          0.750      -    1.000",
        "lag-1 label autocorrelation        -1,000      -    0.000",
        "epoch-to-epoch correlation          0.100      -    0.000",
    ])  # fmt: skip


def test_text_table_without_labels_or_block() -> None:
    report = _report(num_classes=None, modes=[ModeQuality("files", {"displacement": [999.9996]})])
    assert format_shuffle_report(report) == "\n".join([
        "12,345 rows in 2 files, rank 0 of 2, batches of 8, 2 epochs, seed 7",
        "",
        "metric                                FILES  uniform",
        "---------------------------------  --------  -------",
        "mean displacement |pi(i)/N - i/n|  1000.000    0.333",
        "mean adjacent gap (rows)                  -    1,000",
        "Kendall tau vs stored order               -    0.000",
        "distinct files per batch                  -    2.000",
        "epoch-to-epoch correlation                -    0.000",
    ])  # fmt: skip


# ------------------------------------------ the slow ones last (mutation_quick stops early)


@pytest.mark.parametrize(
    ("counts", "labels"),
    [
        ([2, 1, 2, 1], [0, 0, 1, 1, 2, 3]),  # classes of the same size
        ([2, 0, 4], ["x", "y", "y", "z", "z", "z"]),  # an empty file
        ([6], [0, 1, 2, 3, 4, 5]),  # one file, every class one row
    ],
)
def test_uniform_values_are_the_means_over_every_permutation(
    counts: list[int], labels: list[Any]
) -> None:
    total = sum(counts)
    _, class_counts = _codes(labels)
    for batch in range(1, total + 1):
        want = _all_permutation_means(counts, batch, labels)
        got = uniform_metrics(counts, batch_size=batch, class_counts=class_counts)
        assert_same(got, {**want, "kendall_tau": 0.0}, PER_EPOCH)
        assert want["kendall_tau"] == pytest.approx(0.0, abs=1e-12)
        assert got["epoch_corr"] == 0.0


def test_kendall_tau_is_exact_up_to_65536_positions_by_default() -> None:
    # One swapped pair: exactly one inversion.
    for n in (65_535, 65_536):
        order = np.arange(n)
        order[[0, 1]] = [1, 0]
        tau = order_metrics(order, [n], batch_size=n)["kendall_tau"]
        assert tau == 1 - 2 / (n * (n - 1) // 2)
    # 65,537 positions: a subset of 65,536, which keeps the pair (tau of 65,536) or not (1).
    order = np.arange(65_537)
    order[[0, 1]] = [1, 0]
    tau = order_metrics(order, [65_537], batch_size=1)["kendall_tau"]
    assert tau in (1.0, 1 - 2 / (65_536 * 65_535 // 2))
    # The report samples as well: a Kendall tau of 65,536 positions is 1 - 2k / C(65536, 2)
    # for a whole k; one of all 65,537 (prime) would be 1 - 2k' / C(65537, 2), whole k' only
    # for k' a multiple of 65,537.
    report = shuffle_quality([65_537], modes=["global"], epochs=1, batch_size=65_537)
    (tau,) = report.modes[0].values["kendall_tau"]
    k = (1 - tau) * (65_536 * 65_535 // 2) / 2
    assert abs(k - round(k)) < 1e-3 and abs(tau) < 0.02
