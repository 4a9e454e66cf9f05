"""How well a shuffle mixes: metrics of an epoch's order next to a uniform permutation's.

Pure arithmetic on orders (row ids), file row counts and, optionally, one label per row;
nothing here reads data (``mrecord.maintenance.shuffle_report`` reads the labels of a
dataset and calls :func:`shuffle_quality`).

Metrics of one epoch's order ``pi`` (``pi[i]`` = the global row id read at position
``i``; ``n`` positions on this rank, ``N`` rows in the dataset):

- ``displacement``: mean ``|pi[i]/N - i/n|``, how far rows move.
  Uniform: ``(N^2-1)/(3N^2)``, about 1/3.
- ``adjacent_gap``: mean ``|pi[i+1] - pi[i]|`` in rows. Uniform: ``(N+1)/3``.
- ``kendall_tau``: Kendall tau of (position, row id), i.e. against the stored order; exact
  on a random subset of at most ``kendall_sample`` positions (an unbiased estimate).
  Uniform: 0.
- ``files_per_batch``: mean number of distinct shard files in a batch of ``B``.
  Uniform: ``sum_s 1 - C(N - n_s, B) / C(N, B)`` (drawing without replacement; about
  ``S(1 - (1 - 1/S)^B)`` for ``S`` equal files).
- ``label_entropy``: mean plug-in entropy (nats) of a batch's labels. Uniform: its exact
  expectation (hypergeometric class counts), a little under the population entropy,
  itself at most ``log C``.
- ``label_autocorr``: lag-1 label autocorrelation ``(a - q) / (1 - q)``, ``a`` the share
  of neighbours with equal labels and ``q = sum p_c^2`` (the lag-1 autocorrelation of the
  one-hot labels). Uniform: ``(sum n_c (n_c - 1) / (N (N - 1)) - q) / (1 - q)``, about 0.
- ``epoch_corr``: Pearson correlation of each row's position in epoch ``e`` and ``e+1``
  (rows read in both). Uniform: 0.

Labels are treated as classes (any hashable value); batches are the full batches of
``B`` consecutive positions (a short last batch is left out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError
from mrecord.sampling.order import IdArray
from mrecord.sampling.samplers import DistributedSampler
from mrecord.sampling.shuffle import DEFAULT_PARTIAL_WINDOW, BlockLayout, Shuffle, shuffle_order
from mrecord.sampling.shuffle._common import Counts, check_counts

__all__ = [
    "DEFAULT_MODES",
    "METRICS",
    "ModeQuality",
    "ShuffleReport",
    "format_shuffle_report",
    "inversions",
    "order_metrics",
    "shuffle_quality",
    "uniform_metrics",
]

METRICS: dict[str, str] = {
    "displacement": "mean displacement |pi(i)/N - i/n|",
    "adjacent_gap": "mean adjacent gap (rows)",
    "kendall_tau": "Kendall tau vs stored order",
    "files_per_batch": "distinct files per batch",
    "label_entropy": "batch label entropy (nats)",
    "label_autocorr": "lag-1 label autocorrelation",
    "epoch_corr": "epoch-to-epoch correlation",
}
"""Metric keys, in report order, with their printed titles."""

DEFAULT_MODES: tuple[str, ...] = ("global", "block", "partial", "files", "infile")
"""Modes reported when none are named (``"none"`` = no shuffle is also accepted)."""

_LABEL_METRICS = ("label_entropy", "label_autocorr")


@dataclass(frozen=True)
class ModeQuality:
    """One shuffle mode's metrics: ``values[key]`` has one entry per epoch
    (``epoch_corr``: one per pair of consecutive epochs)."""

    mode: str
    values: dict[str, list[float]]

    def mean(self, key: str) -> float:
        """The metric averaged over epochs (nan when it was not computed)."""
        vals = self.values.get(key, [])
        return float(np.mean(vals)) if vals else math.nan


@dataclass(frozen=True)
class ShuffleReport:
    """Metrics per mode and their uniform-permutation values (see the module docstring)."""

    num_rows: int
    file_row_counts: list[int]
    num_shards: int
    batch_size: int
    epochs: int
    seed: int
    num_classes: int | None
    uniform: dict[str, float]
    modes: list[ModeQuality] = field(default_factory=list)
    block: str | None = None
    """BLOCK's sizes as read (``"block_rows=..., window_blocks=..."``), when it was measured."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (nan becomes None)."""

        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "num_rows": self.num_rows,
            "file_row_counts": self.file_row_counts,
            "num_shards": self.num_shards,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "seed": self.seed,
            "num_classes": self.num_classes,
            "block": self.block,
            "uniform": {k: clean(v) for k, v in self.uniform.items()},
            "modes": {
                m.mode: {k: [clean(v) for v in vals] for k, vals in m.values.items()}
                for m in self.modes
            },
        }


def inversions(values: npt.ArrayLike) -> int:
    """Number of pairs ``i < j`` with ``values[i] > values[j]`` (ties are not inversions).

    Bottom-up merge counting with one numpy sort per level: O(n log^2 n), no Python loop
    over elements.
    """
    x = np.asarray(values).reshape(-1)
    m = int(x.size)
    if m < 2:
        return 0
    # Ranks with ties broken by position, so tied values never count as inverted.
    rank = np.empty(m, dtype=np.int64)
    rank[np.argsort(x, kind="stable")] = np.arange(m, dtype=np.int64)
    index = np.arange(m, dtype=np.int64)
    rank_in_half = np.zeros(m, dtype=np.int64)  # rank inside its block of width w
    total = 0
    w = 1
    while w < m:
        block = index // (2 * w)
        order = np.argsort(block * m + rank)
        rank_in_block = np.empty(m, dtype=np.int64)
        rank_in_block[order] = index - block[order] * 2 * w
        right = (index // w) % 2 == 1
        # A right-half element has (rank in block - rank in its half) smaller left-half
        # elements; the rest of the (full) left half, w of them, are larger: inversions.
        smaller_left = rank_in_block[right] - rank_in_half[right]
        total += int((w - smaller_left).sum())
        rank_in_half = rank_in_block
        w *= 2
    return total


def _kendall_tau(ids: IdArray, sample: int, rng: np.random.Generator) -> float:
    """Kendall tau between position and id, exact on a random subset of positions."""
    n = int(ids.size)
    if n < 2:
        return math.nan
    if n > sample:
        positions = np.sort(rng.choice(n, size=sample, replace=False))
        ids = ids[positions]
    m = int(ids.size)
    pairs = m * (m - 1) // 2
    return 1.0 - 2.0 * inversions(ids) / pairs


def _file_of(ids: IdArray, counts: IdArray) -> IdArray:
    ends = np.cumsum(counts)
    files: IdArray = np.searchsorted(ends, ids, side="right").astype(np.int64)
    return files


def _batches(values: npt.NDArray[Any], batch_size: int) -> npt.NDArray[Any]:
    full = (values.size // batch_size) * batch_size
    return values[:full].reshape(-1, batch_size)


def _distinct_per_row(rows: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    s = np.sort(rows, axis=1)  # no rows: an empty result all the same
    distinct: npt.NDArray[np.int64] = 1 + (np.diff(s, axis=1) != 0).sum(axis=1)
    return distinct


def _batch_entropy(codes: IdArray, batch_size: int) -> float:
    """Mean over full batches of the plug-in entropy (nats) of the batch's label codes."""
    rows = _batches(codes, batch_size)
    if rows.size == 0:
        return math.nan
    s = np.sort(rows, axis=1).reshape(-1)
    n = s.size
    starts = np.ones(n, dtype=bool)
    starts[1:] = s[1:] != s[:-1]
    starts[::batch_size] = True  # a run never crosses a batch boundary
    where = np.flatnonzero(starts)
    lengths = np.diff(np.append(where, n)).astype(np.float64)
    p = lengths / batch_size
    contributions = -p * np.log(p)
    per_batch = np.bincount(where // batch_size, weights=contributions, minlength=rows.shape[0])
    return float(per_batch.mean())


def _label_autocorr(codes: npt.NDArray[Any], pi: IdArray, q: float) -> float:
    """Lag-1 autocorrelation of the labels ``codes[pi]``, counted a chunk at a time."""
    if pi.size < 2 or q >= 1.0:
        return math.nan
    agree = 0
    for lo in _chunks(pi.size):
        part = codes[pi[max(0, lo - 1) : lo + _CHUNK]]  # one back: the pair across chunks
        agree += int(np.count_nonzero(part[1:] == part[:-1]))
    return (agree / (pi.size - 1) - q) / (1.0 - q)


_CHUNK = 1 << 18
"""Positions of an order measured at a time: each metric's temporaries (several arrays of 8
bytes a position) stay a few MB whatever the order's length. Whole-order temporaries and
two whole orders a mode made ``mrecord shuffle-report`` of 8M rows peak at 859 MB; chunks
of 1M positions still held ~50 MB of temporaries."""


def _chunks(n: int, step: int = _CHUNK) -> range:
    return range(0, n, step)


def _kept(ids: npt.ArrayLike, num_rows: int) -> IdArray:
    """The order without its padded ids (``>= num_rows``); no copy when it has none (nor
    of an order in 4-byte ints)."""
    pi = np.asarray(ids).reshape(-1)
    if pi.dtype not in (np.int32, np.int64):  # differences of narrower or unsigned wrap
        pi = pi.astype(np.int64)
    if pi.size and int(pi.max()) >= num_rows:
        pi = pi[pi < num_rows]
    return pi


def _positions(ids: IdArray, num_rows: int) -> npt.NDArray[np.signedinteger[Any]]:
    """Each row's position in the order ``ids`` (padded ids left out), ``-1`` for rows not
    read: in 4-byte ints where they fit."""
    dtype = np.int32 if ids.size < 2**31 else np.int64
    pos: npt.NDArray[np.signedinteger[Any]] = np.full(num_rows, -1, dtype=dtype)
    seen = 0
    for lo in _chunks(ids.size):
        part = ids[lo : lo + _CHUNK]
        part = part[part < num_rows]
        pos[part] = np.arange(seen, seen + part.size, dtype=dtype)
        seen += part.size
    return pos


def _epoch_corr(
    pos_a: npt.NDArray[np.signedinteger[Any]], pos_b: npt.NDArray[np.signedinteger[Any]]
) -> float:
    """Pearson correlation of the positions (:func:`_positions`) of the rows read in both
    epochs, summed a chunk of rows at a time (centered sums: no cancellation)."""
    center_a = float(pos_a.max(initial=0)) / 2
    center_b = float(pos_b.max(initial=0)) / 2
    n = 0
    sx = sy = sxx = syy = sxy = 0.0
    for lo in _chunks(pos_a.size):
        x, y = pos_a[lo : lo + _CHUNK], pos_b[lo : lo + _CHUNK]
        both = (x >= 0) & (y >= 0)
        xs = x[both].astype(np.float64) - center_a
        ys = y[both].astype(np.float64) - center_b
        n += xs.size
        sx, sy = sx + float(xs.sum()), sy + float(ys.sum())
        sxx, syy = sxx + float(xs @ xs), syy + float(ys @ ys)
        sxy += float(xs @ ys)
    if n < 2:  # two or more rows have distinct positions: never a zero spread
        return math.nan
    cov = sxy - sx * sy / n
    var = (sxx - sx * sx / n) * (syy - sy * sy / n)
    return cov / math.sqrt(var) if var > 0 else math.nan


def _label_codes(
    labels: npt.ArrayLike | None, num_rows: int
) -> tuple[npt.NDArray[np.signedinteger[Any]] | None, IdArray]:
    """Labels as class codes 0..C-1 and the row count of each class."""
    if labels is None:
        return None, np.zeros(0, dtype=np.int64)
    values = np.asarray(labels)
    if values.ndim != 1 or values.size != num_rows:
        raise ArgumentError(
            f"labels must hold one value per row ({num_rows}), got an array of shape "
            f"{values.shape}; pass a scalar label column"
        )
    if values.dtype.kind in "biu" and values.size:
        lo, hi = int(values.min()), int(values.max())
        if hi - lo < _DENSE_LABELS:
            return _dense_codes(values, lo, hi - lo + 1)
    _, codes, class_counts = np.unique(values, return_inverse=True, return_counts=True)
    narrow = np.int32 if class_counts.size < 2**31 else np.int64  # 4 bytes a row, not 8
    return codes.reshape(-1).astype(narrow), class_counts.astype(np.int64)


_DENSE_LABELS = 1 << 24
"""Integer labels spanning fewer values than this are coded by counting, not sorting."""


def _dense_codes(
    values: npt.NDArray[Any], lo: int, span: int
) -> tuple[npt.NDArray[np.signedinteger[Any]], IdArray]:
    """:func:`_label_codes` of integer labels in ``lo .. lo + span - 1``, by counting a
    chunk at a time: the codes ``np.unique`` gives (classes in sorted order), without its
    sort's temporaries (8M labels: 251 MB)."""
    present = np.zeros(span, dtype=np.int64)
    for start in _chunks(values.size):
        part = values[start : start + _CHUNK].astype(np.int64) - lo
        present += np.bincount(part, minlength=span)
    narrow = np.int16 if span <= 2**15 else np.int32  # 2 bytes a row for most label sets
    lookup = (np.cumsum(present > 0) - 1).astype(narrow)
    codes: npt.NDArray[np.signedinteger[Any]] = np.empty(values.size, dtype=narrow)
    for start in _chunks(values.size):
        codes[start : start + _CHUNK] = lookup[values[start : start + _CHUNK].astype(np.int64) - lo]
    counts: IdArray = present[present > 0]
    return codes, counts


def order_metrics(
    ids: npt.ArrayLike,
    file_row_counts: Counts,
    *,
    batch_size: int,
    codes: IdArray | None = None,
    class_counts: IdArray | None = None,
    kendall_sample: int = 65536,
    rng: np.random.Generator | None = None,
) -> dict[str, float]:
    """The per-epoch metrics (all but ``epoch_corr``) of one order of global row ids.

    ``codes`` (a class code per row, 0..C-1) and ``class_counts`` enable the label
    metrics; without them they are nan. Padded ids (``>= N``) are left out.
    """
    counts = check_counts(file_row_counts)
    num_rows = int(counts.sum())
    pi = _kept(ids, num_rows)
    n = int(pi.size)
    gen = rng if rng is not None else np.random.default_rng(0)
    out: dict[str, float] = dict.fromkeys(METRICS, math.nan)
    if n == 0:
        return out
    moved = gaps = 0.0
    for lo in _chunks(n):  # sums a chunk at a time (module docstring of _CHUNK)
        part = pi[lo : lo + _CHUNK]
        moved += float(np.abs(part / num_rows - np.arange(lo, lo + part.size) / n).sum())
        if lo:
            gaps += abs(int(part[0]) - int(pi[lo - 1]))
        gaps += float(np.abs(np.diff(part)).sum())
    out["displacement"] = moved / n
    if n > 1:
        out["adjacent_gap"] = gaps / (n - 1)
    out["kendall_tau"] = _kendall_tau(pi, kendall_sample, gen)
    batches = n // batch_size  # files per batch and label entropy: full batches only
    step = batch_size * max(1, _CHUNK // batch_size)  # whole batches a chunk
    files = entropy = 0.0
    for lo in _chunks(batches * batch_size, step):
        part = pi[lo : lo + step]
        files += float(_distinct_per_row(_batches(_file_of(part, counts), batch_size)).sum())
        if codes is not None:
            entropy += _batch_entropy(codes[part], batch_size) * (part.size // batch_size)
    if batches:
        out["files_per_batch"] = files / batches
    if codes is not None and class_counts is not None:
        if batches:
            out["label_entropy"] = entropy / batches
        p = class_counts / num_rows
        out["label_autocorr"] = _label_autocorr(codes, pi, float(np.sum(p * p)))
    return out


def _log_hypergeom_zero(total: int, k: int, draws: int) -> float:
    """log P(no draw of ``draws`` hits one of ``k`` marked among ``total``)."""
    if total - k < draws:
        return -math.inf
    return (
        math.lgamma(total - k + 1) - math.lgamma(total - k - draws + 1)
        - math.lgamma(total + 1) + math.lgamma(total - draws + 1)
    )


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _expected_entropy(class_counts: IdArray, num_rows: int, batch_size: int) -> float:
    """E[plug-in entropy] of a uniformly drawn batch (hypergeometric class counts)."""
    b = min(batch_size, num_rows)
    log_all = _log_comb(num_rows, b)
    total = 0.0
    sizes, multiplicity = np.unique(class_counts, return_counts=True)
    for size, mult in zip(sizes.tolist(), multiplicity.tolist(), strict=True):
        term = 0.0
        # k rows of this class in the batch: C(size, k) C(N - size, b - k) / C(N, b).
        for k in range(max(1, b - (num_rows - size)), min(b, size) + 1):
            log_pmf = _log_comb(size, k) + _log_comb(num_rows - size, b - k) - log_all
            frac = k / b
            term -= math.exp(log_pmf) * frac * math.log(frac)
        total += mult * term
    return total


def uniform_metrics(
    file_row_counts: Counts, *, batch_size: int, class_counts: IdArray | None = None
) -> dict[str, float]:
    """Each metric's expected value for a uniformly random permutation of the rows."""
    counts = check_counts(file_row_counts)
    num_rows = int(counts.sum())
    out: dict[str, float] = dict.fromkeys(METRICS, math.nan)
    if num_rows == 0:
        return out
    n = num_rows
    out["displacement"] = (n * n - 1) / (3 * n * n)
    out["adjacent_gap"] = (n + 1) / 3
    out["kendall_tau"] = 0.0
    b = min(batch_size, n)
    out["files_per_batch"] = float(
        sum(1.0 - math.exp(_log_hypergeom_zero(n, int(c), b)) for c in counts.tolist() if c)
    )
    out["epoch_corr"] = 0.0
    if class_counts is not None and class_counts.size:
        p = class_counts / n
        q = float(np.sum(p * p))
        pairs = float(np.sum(class_counts * (class_counts - 1)))
        agree = pairs / (n * (n - 1)) if n > 1 else 0.0
        out["label_autocorr"] = (agree - q) / (1.0 - q) if q < 1.0 else math.nan
        out["label_entropy"] = _expected_entropy(class_counts, n, batch_size)
    return out


def _mode_order(
    mode: str,
    counts: IdArray,
    seed: int,
    epoch: int,
    num_shards: int,
    partial_window: int,
    layout: BlockLayout | None,
) -> IdArray:
    shuffle = None if mode == "none" else Shuffle(mode)
    if num_shards == 1:
        order = shuffle_order(
            shuffle, counts, seed, epoch, partial_window=partial_window, layout=layout
        )
    else:
        sampler = DistributedSampler(
            num_shards, 0, shuffle=False if shuffle is None else shuffle
        )
        order = sampler.build_order(counts, seed=seed, epoch=epoch, layout=layout)
    # 4-byte ids where every id fits (padded ones too): half an order's memory
    wide = len(order) == 0 or int(counts.sum()) * 2 >= 2**31
    return order.to_array(np.int64 if wide else np.int32)


def _check_modes(modes: Sequence[str] | None) -> list[str]:
    names = list(DEFAULT_MODES if modes is None else modes)
    known = ["none", *(m.value for m in Shuffle)]
    out = []
    for mode in names:
        value = mode.value if isinstance(mode, Shuffle) else str(mode).lower()
        if value not in known:
            raise ArgumentError(f"unknown shuffle mode {mode!r}; choose from {known!r}")
        out.append(value)
    if not out:
        raise ArgumentError("name at least one shuffle mode")
    return out


def shuffle_quality(
    file_row_counts: Counts,
    *,
    modes: Sequence[str] | None = None,
    labels: npt.ArrayLike | None = None,
    num_shards: int = 1,
    batch_size: int = 32,
    epochs: int = 3,
    seed: int = 5489,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    kendall_sample: int = 65536,
    layout: BlockLayout | None = None,
) -> ShuffleReport:
    """Measure each mode's orders over ``epochs`` epochs (rank 0 of ``num_shards``).

    ``labels`` (one value per row, in global row order) enables the label metrics.
    Kendall tau's subsets (orders over ``kendall_sample`` positions) are drawn from
    ``np.random.default_rng(seed)``, mode after mode and epoch after epoch, so a report
    is reproducible from its seed.
    ``layout`` gives BLOCK its page boundaries and sizes (default: blocks cut at any
    row, default sizes).
    Orders are those :class:`~mrecord.pipeline.MindDataset` reads with the same seed.
    """
    counts = check_counts(file_row_counts)
    num_rows = int(counts.sum())
    for name, value, low in (
        ("num_shards", num_shards, 1), ("batch_size", batch_size, 1), ("epochs", epochs, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ArgumentError(f"{name} must be an int >= {low}, got {value!r}")
    mode_names = _check_modes(modes)
    codes, class_counts = _label_codes(labels, num_rows)
    rng = np.random.default_rng(seed)
    results = []
    for mode in mode_names:
        values: dict[str, list[float]] = {key: [] for key in METRICS}
        previous: npt.NDArray[np.signedinteger[Any]] | None = None  # positions, not the order
        for epoch in range(epochs):
            ids = _mode_order(mode, counts, seed, epoch, num_shards, partial_window, layout)
            metrics = order_metrics(
                ids, counts, batch_size=batch_size, codes=codes,
                class_counts=class_counts if codes is not None else None,
                kendall_sample=kendall_sample, rng=rng,
            )
            for key, metric in metrics.items():
                if key != "epoch_corr":
                    values[key].append(metric)
            positions = _positions(ids, num_rows) if epochs > 1 else None
            del ids
            if previous is not None and positions is not None:
                values["epoch_corr"].append(_epoch_corr(previous, positions))
            previous = positions
        if codes is None:
            for key in _LABEL_METRICS:
                values[key] = []
        results.append(ModeQuality(mode, values))
    return ShuffleReport(
        num_rows=num_rows,
        file_row_counts=[int(c) for c in counts.tolist()],
        num_shards=num_shards,
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        num_classes=None if codes is None else int(class_counts.size),
        uniform=uniform_metrics(
            counts, batch_size=batch_size, class_counts=class_counts if codes is not None else None
        ),
        modes=results,
        block=_describe_block(layout) if "block" in mode_names else None,
    )


def _describe_block(layout: BlockLayout | None) -> str:
    spec = layout if layout is not None else BlockLayout()
    pages = "any row" if spec.page_starts is None else "page boundaries"
    return (
        f"block_rows={spec.block_rows:,}, window_blocks={spec.window_blocks}, "
        f"cut at {pages} ({spec.why})"
    )


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3f}"


def format_shuffle_report(report: ShuffleReport) -> str:
    """The report as a text table: one row per metric, one column per mode, then uniform."""
    header = ["metric", *(m.mode.upper() for m in report.modes), "uniform"]
    rows = [header]
    for key, title in METRICS.items():
        if key in _LABEL_METRICS and report.num_classes is None:
            continue
        rows.append([title, *(_fmt(m.mean(key)) for m in report.modes), _fmt(report.uniform[key])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        f"{report.num_rows:,} rows in {len(report.file_row_counts)} files, "
        f"rank 0 of {report.num_shards}, batches of {report.batch_size}, "
        f"{report.epochs} epochs, seed {report.seed}"
        + ("" if report.num_classes is None else
           f", {report.num_classes} label classes (log C = {math.log(report.num_classes):.3f})"),
        *([] if report.block is None else [f"BLOCK: {report.block}"]),
        "",
    ]
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
