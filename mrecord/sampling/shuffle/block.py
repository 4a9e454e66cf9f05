"""BLOCK: page-aligned blocks in a shuffled order, rows mixed across a window of blocks.

For storage that serves few I/Os per second (hard disks, network file systems, cloud
volumes with a few thousand IOPS) a row-level shuffle costs one I/O per row. BLOCK reads
whole blocks of consecutive pages instead, and mixes the rows of ``window_blocks``
blocks, which the reader holds in memory together::

    rows     |b0   |b1   |b2   |b3   |b4   |b5   |b6   |b7   |b8   |   blocks end on page
             |           |           |           |                     boundaries, never
    strata   |  stratum 0      |  stratum 1      |  stratum 2          cross a file
    window 0 = {b1, b4, b8}  window 1 = {b0, b5, b6}  window 2 = {b2, b3, b7}
    epoch    = window 2's rows permuted, window 0's rows permuted, window 1's ...

1. **Blocks.** Each file is cut every ``block_rows`` rows; each cut moves forward to
   the next page boundary (``page_starts``), so a block is whole pages of one file and
   is read with one large request. Without page boundaries, cuts stay where they are.
2. **Windows, stratified.** With ``nb`` blocks and ``W = window_blocks``, there are
   ``M = ceil(nb / W)`` windows. Block ``b`` lies in stratum ``b // M`` (``W`` runs of
   ``M`` consecutive blocks) and goes to window ``perm_s(b mod M)``, a keyed
   permutation per stratum: every window holds one block of every stratum, so each
   window draws from the whole dataset evenly. On data stored sorted by label a
   window holds every label in about its global share; a plain run of ``W`` shuffled
   blocks would hold ``W`` random ones.
3. **Epoch.** Windows are visited in a keyed order; the rows of a window are a keyed
   permutation of the rows of its blocks. Every epoch is a permutation of all rows.

Everything is a pure function of (file row counts, page boundaries, seed, epoch,
``block_rows``, ``window_blocks``): memory is a few integers per block, and ``take`` of
``m`` positions costs a few numpy passes over ``m`` elements, as for GLOBAL.

Across ranks (``num_shards`` k), the sampler reads the order through
:class:`~mrecord.sampling.order.PartitionedOrder`: rank ``s`` gets one contiguous run of
about ``N / k`` positions, so it reads about ``1 / k`` of the blocks, not a share of
every block.

:func:`plan_block_sizes` chooses ``block_rows`` and ``window_blocks`` from a storage
device's IOPS and bandwidth and a memory budget; :func:`prefers_block` is the rule by
which ``Shuffle.ADAPTIVE`` picks BLOCK. Both are arithmetic on numbers the caller
measured (``mrecord.storage.probe``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.sampling.order import IdArray, Order, PermutationOrder
from mrecord.sampling.permutation import (
    ceil_sqrt,
    derive_key,
    feistel_side,
    permute,
    round_keys,
    segment_round_keys,
)
from mrecord.sampling.shuffle._common import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Counts,
    check_counts,
    check_option,
    check_seed_epoch,
)

__all__ = [
    "DEFAULT_BLOCK_ROWS",
    "DEFAULT_WINDOW_BLOCKS",
    "MIN_WINDOW_BLOCKS",
    "BlockLayout",
    "BlockOrder",
    "block_bounds",
    "block_shuffle",
    "choose_layout",
    "plan_block_sizes",
    "prefers_block",
]

DEFAULT_BLOCK_ROWS = 65_536
"""Rows per block when nothing better is known (no row size, no storage numbers)."""

DEFAULT_WINDOW_BLOCKS = 64
"""Blocks per window when nothing better is known."""

MIN_WINDOW_BLOCKS = 32
""":func:`plan_block_sizes` keeps at least this many blocks in a window (mixing quality),
shrinking blocks (down to one page) when the memory budget is small."""

MAX_WINDOW_BLOCKS = 1024
"""More blocks per window than this add nothing to mixing that a reader could measure."""

SEEK_FACTOR = 8
"""A planned block is this many times ``bandwidth / iops`` bytes: its one I/O then costs
1/8 of its transfer time, so block reads run at about 89% of the bandwidth."""

WINDOW_SHARE = 8
"""A window takes at most ``1 / WINDOW_SHARE`` of the memory budget. The reader's memory
also holds the next window coming in, the read-ahead threads' blocks of rows, and, with a
memory map, the kernel's read-around of each fault (up to ``read_ahead_kb`` per fault).
Measured (``benchmarks/bench_block_shuffle.py``, 300 MB group, 1 MiB pages): a 64 MiB
window thrashed the group (6% of the no-shuffle rate), a 32 MiB one did not."""

SLOW_RANDOM_SHARE = 0.25
"""ADAPTIVE picks BLOCK when random reads deliver rows at less than this share of the
sequential rate (and the data does not fit in the memory budget)."""

_IO_BYTES = 4096  # the smallest read a device serves


@dataclass(frozen=True, eq=False)
class BlockLayout:
    """How BLOCK cuts a dataset: page boundaries and sizes, resolved by the caller.

    ``page_starts``: global row ids where pages start (file starts are added; None:
    any row may start a block). ``adaptive``: the caller measured slow storage, so
    ``Shuffle.ADAPTIVE`` reads with BLOCK (see :func:`prefers_block`).
    """

    page_starts: IdArray | None = None
    block_rows: int = DEFAULT_BLOCK_ROWS
    window_blocks: int = DEFAULT_WINDOW_BLOCKS
    adaptive: bool = False
    why: str = field(default="defaults", compare=False)

    def __post_init__(self) -> None:
        check_option("block_rows", self.block_rows)
        check_option("window_blocks", self.window_blocks)
        if self.page_starts is not None:
            starts = np.asarray(self.page_starts)
            if starts.ndim != 1 or (starts.size and starts.dtype.kind not in "iu"):
                raise WrongTypeError(
                    f"page_starts must be a 1-D integer array, got {self.page_starts!r}"
                )
            arr = starts.astype(np.int64)
            if arr.size and (int(arr.min()) < 0 or bool(np.any(np.diff(arr) < 0))):
                raise ArgumentError(
                    "page_starts must be global row ids >= 0 in increasing order, got "
                    f"{arr[:8].tolist()!r}..."
                )
            arr.flags.writeable = False
            object.__setattr__(self, "page_starts", arr)

    def with_sizes(self, block_rows: int, window_blocks: int, why: str) -> BlockLayout:
        """The same page boundaries with other sizes."""
        return replace(self, block_rows=block_rows, window_blocks=window_blocks, why=why)

    def without_adaptive(self) -> BlockLayout:
        """The same layout, not asking ADAPTIVE for BLOCK."""
        return replace(self, adaptive=False)

    def __repr__(self) -> str:
        pages = "None" if self.page_starts is None else f"<{len(self.page_starts)} pages>"
        return (
            f"BlockLayout(page_starts={pages}, block_rows={self.block_rows}, "
            f"window_blocks={self.window_blocks}, adaptive={self.adaptive}, why={self.why!r})"
        )


# ------------------------------------------------------------------------------ blocks


def block_bounds(
    file_row_counts: Counts, page_starts: npt.ArrayLike | None, block_rows: int
) -> IdArray:
    """Global row ids where the blocks start, followed by N (``nb + 1`` values).

    Each file is cut every ``block_rows`` rows from its start; a cut moves forward to the
    next page start (or the file's end). Blocks never cross a file boundary, and with
    ``page_starts`` every block begins on one.
    """
    counts = check_counts(file_row_counts)
    size = check_option("block_rows", block_rows)
    ends = np.cumsum(counts)
    starts = ends - counts
    n = int(ends[-1]) if ends.size else 0
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    keep = counts > 0
    starts, counts = starts[keep], counts[keep]
    per_file = -(-counts // size)
    first = np.repeat(starts, per_file)
    k = np.arange(int(per_file.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(per_file) - per_file, per_file
    )
    cuts = first + k * size
    if page_starts is not None:
        pages = np.asarray(page_starts, dtype=np.int64).reshape(-1)
        if pages.size and (int(pages.min()) < 0 or int(pages.max()) > n):
            raise ArgumentError(f"page_starts must lie in [0, {n}], got {pages.tolist()[:8]!r}")
        allowed = _distinct(np.concatenate([pages, starts, [n]]))
        cuts = allowed[np.searchsorted(allowed, cuts, side="left")]
    bounds: IdArray = _distinct(np.concatenate([cuts, [n]]))
    return bounds


def _distinct(values: IdArray) -> IdArray:
    """``numpy.unique(values)`` without its first call's import of ``numpy.ma`` (40 ms
    with the GIL held, measured in the first epoch's order, before its first row)."""
    distinct: IdArray = np.unique(values, return_index=True)[0]  # indices: no mask check
    return distinct


class BlockOrder(Order):
    """The BLOCK order over blocks starting at ``bounds`` (see the module docstring)."""

    def __init__(self, bounds: npt.ArrayLike, window_blocks: int, key: int):
        self.bounds = np.asarray(bounds, dtype=np.int64).reshape(-1)
        sizes = np.diff(self.bounds)
        nb = int(sizes.size)
        self.num_blocks = nb
        self.window_blocks = max(1, min(check_option("window_blocks", window_blocks), nb))
        self.num_windows = -(-nb // self.window_blocks)
        self._n = int(sizes.sum())
        self._row_keys = round_keys(derive_key(key, "rows"))
        self._kept_window: tuple[int, IdArray] | None = None
        if nb == 0:
            self._visit_end = np.zeros(0, dtype=np.int64)
            return
        m = self.num_windows
        blocks = np.arange(nb, dtype=np.int64)
        stratum, slot = np.divmod(blocks, m)
        strata_keys = segment_round_keys(round_keys(derive_key(key, "strata")), stratum)
        window = permute(
            slot.astype(np.uint64), np.uint64(m), feistel_side(m), strata_keys
        ).astype(np.int64)
        by_window = np.lexsort((stratum, window))  # members of window 0, then 1, ...
        self.members: IdArray = blocks[by_window]
        self._member_window = window[by_window]
        self._member_ends = np.cumsum(sizes[by_window])
        self._member_starts = self._member_ends - sizes[by_window]
        window_rows = np.bincount(window, weights=sizes, minlength=m).astype(np.int64)
        self.window_rows = window_rows
        self._window_start = np.cumsum(window_rows) - window_rows  # in member order
        # The members of window w are members[_window_members[w]:_window_members[w + 1]].
        self._window_members = np.searchsorted(
            self._member_ends, np.append(self._window_start, self._n), side="right"
        )
        visit = PermutationOrder(m, derive_key(key, "windows")).to_array()
        self.visit: IdArray = visit  # the window read at visiting slot t
        self._visit_end = np.cumsum(window_rows[visit])
        self._side = ceil_sqrt(np.maximum(window_rows, 1))

    def __len__(self) -> int:
        return self._n

    def window_of_position(self, positions: npt.ArrayLike) -> IdArray:
        """The window (by index) that each position of the epoch reads."""
        pos = np.asarray(positions, dtype=np.int64)
        slot = np.searchsorted(self._visit_end, pos, side="right")
        windows: IdArray = self.visit[slot]
        return windows

    def blocks_of_window(self, window: int) -> IdArray:
        """The blocks window ``window`` mixes, in stratum order."""
        blocks: IdArray = self.members[self._member_window == window]
        return blocks

    def _take(self, positions: IdArray) -> IdArray:
        if positions.size == 0:
            empty: IdArray = positions.copy()
            return empty
        slot = np.searchsorted(self._visit_end, positions, side="right")
        window = self.visit[slot]
        offset = positions - (self._visit_end[slot] - self.window_rows[window])
        keys = segment_round_keys(self._row_keys, window)
        mixed = permute(
            offset.astype(np.uint64),
            self.window_rows[window].astype(np.uint64),
            self._side[window],
            keys,
        ).astype(np.int64)
        x = self._window_start[window] + mixed
        member = np.searchsorted(self._member_ends, x, side="right")
        ids: IdArray = self.bounds[self.members[member]] + (x - self._member_starts[member])
        return ids

    def _take_range(self, start: int, stop: int) -> IdArray:
        # Contiguous positions lie in few windows: one scalar key per window, not per row.
        pieces = []
        slot = int(np.searchsorted(self._visit_end, start, side="right"))
        while start < stop:
            window = int(self.visit[slot])
            end = min(stop, int(self._visit_end[slot]))
            rows = int(self.window_rows[window])
            first = int(self._visit_end[slot]) - rows
            keys = segment_round_keys(self._row_keys, np.array([window]))[:, 0]
            mixed = permute(
                np.arange(start - first, end - first, dtype=np.uint64),
                np.uint64(rows),
                feistel_side(rows),
                np.ascontiguousarray(keys),
            )
            pieces.append(self._window_ids(window)[mixed])
            start = end
            slot += 1
        if not pieces:
            empty: IdArray = np.zeros(0, dtype=np.int64)
            return empty
        ids: IdArray = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        return ids

    def _window_ids(self, window: int) -> IdArray:
        """Every row id of ``window`` in its members' order (the mixed positions index
        it), kept for the last window asked: contiguous positions lie in one window,
        and one gather from its ids cost a fifth of locating each position's block
        among the window's members (a search, two gathers and the offset arithmetic,
        ~40% of the order's cost)."""
        kept = self._kept_window
        if kept is not None and kept[0] == window:
            return kept[1]
        lo, hi = int(self._window_members[window]), int(self._window_members[window + 1])
        firsts = self.bounds[self.members[lo:hi]]
        sizes = self.bounds[self.members[lo:hi] + 1] - firsts
        heads = np.cumsum(sizes) - sizes  # where each member's rows begin in the window
        ids: IdArray = np.arange(int(sizes.sum()), dtype=np.int64)
        ids += np.repeat(firsts - heads, sizes)
        self._kept_window = (window, ids)
        return ids

    def __repr__(self) -> str:
        return (
            f"BlockOrder(len={self._n}, blocks={self.num_blocks}, "
            f"window_blocks={self.window_blocks}, windows={self.num_windows})"
        )


def block_shuffle(
    file_row_counts: Counts,
    seed: int,
    epoch: int,
    *,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    layout: BlockLayout | None = None,
) -> Order:
    """This epoch's BLOCK order (module docstring); ``layout`` None: default sizes and
    blocks cut at any row. ``partial_window``/``adaptive_threshold`` are ignored."""
    counts = check_counts(file_row_counts)
    seed, epoch = check_seed_epoch(seed, epoch)
    spec = layout if layout is not None else BlockLayout()
    bounds = block_bounds(counts, spec.page_starts, spec.block_rows)
    return BlockOrder(bounds, spec.window_blocks, derive_key(seed, epoch, "block"))


# ---------------------------------------------------------------------------- planning


def _positive(value: float | None) -> float | None:
    """``value`` when it is a usable measurement (finite, > 0), else None."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def plan_block_sizes(
    *,
    num_rows: int,
    data_bytes: int,
    page_bytes: int,
    iops: float | None,
    bandwidth: float | None,
    memory_budget: int | None,
) -> tuple[int, int, str]:
    """``(block_rows, window_blocks, why)`` for a device and a memory budget.

    A block is ``SEEK_FACTOR * bandwidth / iops`` bytes (at least one page, ``page_bytes``
    the mean page size), so its one request costs little next to its transfer; a window
    takes ``memory_budget / WINDOW_SHARE``. When that holds fewer than
    ``MIN_WINDOW_BLOCKS`` blocks, blocks shrink (not below a page) to keep the mixing.
    Block bytes and the window are rounded to the nearest powers of two, so that a
    repeated measurement a little off gives the same sizes.
    Unknown numbers (None, nan, <= 0) fall back to a 4 MiB block and a 256 MiB budget.
    ``why`` says which numbers decided.
    """
    rows = max(1, int(num_rows))
    row_bytes = max(1.0, data_bytes / rows)
    page = max(float(page_bytes), row_bytes, 1.0)
    io = _positive(iops)
    bw = _positive(bandwidth)
    budget = _positive(None if memory_budget is None else float(memory_budget))
    if io is not None and bw is not None:
        block = max(page, SEEK_FACTOR * bw / io)
        why = f"{io:,.0f} IOPS, {bw / 1e6:,.0f} MB/s"
    else:
        block = max(page, 4.0 * (1 << 20))
        why = "storage not measured"
    budget_bytes = budget if budget is not None else 256.0 * (1 << 20)
    why += f", memory budget {budget_bytes / 1e6:,.0f} MB"
    window_bytes = budget_bytes / WINDOW_SHARE
    if window_bytes / block < MIN_WINDOW_BLOCKS:
        block = max(page, window_bytes / MIN_WINDOW_BLOCKS)
    # Powers of two: a measurement a little off next time gives the same sizes.
    block = max(page, 2.0 ** round(math.log2(block)))
    fits = float(np.clip(window_bytes / block, 1, MAX_WINDOW_BLOCKS))
    window = 1 << round(math.log2(fits))
    block_rows = max(1, math.ceil(block / row_bytes))
    num_blocks = max(1, -(-rows // block_rows))
    return block_rows, max(1, min(window, num_blocks)), why


def prefers_block(
    *,
    data_bytes: int,
    num_rows: int,
    iops: float | None,
    bandwidth: float | None,
    memory_budget: int | None,
) -> bool:
    """Whether ``Shuffle.ADAPTIVE`` should read with BLOCK: the data does not fit in the
    memory budget and random reads deliver rows at less than ``SLOW_RANDOM_SHARE`` of the
    sequential rate. Unknown numbers never pick BLOCK."""
    io = _positive(iops)
    bw = _positive(bandwidth)
    if io is None or bw is None or memory_budget is None or num_rows <= 0:
        return False
    if data_bytes <= memory_budget:
        return False
    row_bytes = max(1.0, data_bytes / num_rows)
    sequential = bw / row_bytes
    random = min(io, bw / max(row_bytes, _IO_BYTES))
    return random < SLOW_RANDOM_SHARE * sequential


Measure = Callable[[], "tuple[float, float] | None"]
"""Measures the storage when called: ``(iops, bytes per second)``, or None."""


def choose_layout(
    *,
    adaptive: bool,
    num_shards: int,
    page_starts: npt.ArrayLike | None,
    num_rows: int,
    data_bytes: int,
    page_bytes: int,
    block_rows: int | None,
    window_blocks: int | None,
    memory_budget: int | None,
    measure: Measure,
) -> BlockLayout | None:
    """The layout BLOCK (``adaptive=False``) or ADAPTIVE (``adaptive=True``) reads with.

    ``measure`` is called only when a number it gives is needed, at most once:

    - sizes given: used as given (nothing measured);
    - one rank: ``measure()`` and ``memory_budget`` decide (:func:`plan_block_sizes`);
    - several ranks: nothing is measured and the budget is ignored. Ranks on other
      hosts would measure other numbers and cut other blocks, and their shards must
      split one order: the sizes come from the dataset alone unless given;
    - ADAPTIVE: on one rank, with data larger than ``memory_budget``, ``measure()`` and
      :func:`prefers_block` decide; otherwise (and on several ranks) None: no BLOCK.
    """
    single = num_shards == 1
    budget = memory_budget if single else None
    numbers: tuple[float, float] | None = None
    if adaptive:
        if not single or budget is None or data_bytes <= budget:
            return None
        numbers = measure()
        if numbers is None or not prefers_block(
            data_bytes=data_bytes, num_rows=num_rows, iops=numbers[0],
            bandwidth=numbers[1], memory_budget=budget,
        ):
            return None
    elif single and (block_rows is None or window_blocks is None):
        numbers = measure()
    planned_rows, planned_window, why = plan_block_sizes(
        num_rows=num_rows,
        data_bytes=data_bytes,
        page_bytes=page_bytes,
        iops=None if numbers is None else numbers[0],
        bandwidth=None if numbers is None else numbers[1],
        memory_budget=budget,
    )
    if block_rows is not None and window_blocks is not None:
        why = "given"
    elif not single:
        why = f"{num_shards} ranks: not measured, " + why
    return BlockLayout(
        page_starts=None if page_starts is None else np.asarray(page_starts, dtype=np.int64),
        block_rows=planned_rows if block_rows is None else block_rows,
        window_blocks=planned_window if window_blocks is None else window_blocks,
        adaptive=adaptive,
        why=why,
    )
