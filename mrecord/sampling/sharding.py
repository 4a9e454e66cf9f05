"""Splitting an order across distributed shards, MindSpore's way, as pure functions.

Three rules, all reproduced exactly from MindSpore (see ``tests/cases``):

1. **Strided with wraparound** (:func:`shard_order`): position ``p`` of the order goes
   to shard ``p % k``; every shard gets ``ceil(N / k)`` rows, and the short shards
   wrap around to the start. N=10, k=3: ``[0, 3, 6, 9]``, ``[1, 4, 7, 0]``,
   ``[2, 5, 8, 1]``.
2. **Padding** (:func:`pad_order`, :func:`check_padding`): ``num_padded`` padded ids
   ``N, N+1, ...`` are appended to the order before the split; ``N + num_padded`` must
   be a multiple of ``k``. N=10, k=4, 2 padded: ``[0, 4, 8]``, ``[1, 5, 9]``,
   ``[2, 6, P]``, ``[3, 7, P]``.
3. **Offset blocks** (:func:`offset_shard_counts`, :func:`concat_shard_positions`),
   used by ``ConcatDataset`` + ``DistributedSampler``: child ``j`` gets
   ``offset = (sum of the sizes of children before j) % k``; shard ``x`` gets
   ``floor((n + off) / k) + [x < (n + off) % k] - [x < off]`` rows of a child of size
   ``n``, as one contiguous block (shard 0 first). Children smaller than ``k`` work
   (MindSpore crashes the process there).

Every shard of a job must compute its order from the same seed, so that the shards
split one permutation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mrecord.arguments import require_int
from mrecord.errors import SamplerError
from mrecord.sampling.order import IdArray, Order, PaddedOrder, RangeOrder, ShardView, SliceOrder

__all__ = [
    "check_padding",
    "check_shards",
    "concat_offsets",
    "concat_shard_positions",
    "offset_shard_counts",
    "offset_shard_order",
    "pad_order",
    "shard_order",
    "shard_size",
    "split_order",
]

_INT32_MAX = 2**31 - 1


def check_shards(num_shards: object, shard_id: object) -> tuple[int, int]:
    """Validate ``num_shards`` and ``shard_id`` and return them.

    TypeError for non-ints; :class:`~mrecord.errors.SamplerError` (a RuntimeError, as
    MindSpore's DistributedSampler) for ``num_shards < 1`` or ``shard_id`` outside
    ``[0, num_shards - 1]``.
    """
    k = require_int(num_shards, "num_shards")
    s = require_int(shard_id, "shard_id")
    if not 1 <= k <= _INT32_MAX:
        raise SamplerError(
            f"Input num_shards is not within the required interval of [1, {_INT32_MAX}]. "
            f"Got num_shards={num_shards!r}."
        )
    if not 0 <= s < k:
        raise SamplerError(f"Input shard_id is not within the required interval of [0, {k - 1}].")
    return k, s


def check_padding(num_rows: int, num_padded: int, num_shards: int) -> None:
    """Raise SamplerError unless ``num_rows + num_padded`` is a multiple of ``num_shards``.

    The message is MindSpore's.
    """
    total = num_rows + num_padded
    if total % num_shards:
        raise SamplerError(
            f"Invalid data, the size of dataset and padded samples: {total} can not be "
            f"divisible by the value of 'num_shards': {num_shards}. "
            "Please adjust the value of 'num_padded'."
        )


def pad_order(order: Order, num_padded: int, num_rows: int) -> Order:
    """``order`` followed by ``num_padded`` padded ids ``num_rows, num_rows + 1, ...``."""
    if num_padded == 0:
        return order
    return PaddedOrder(order, num_padded, num_rows)


def shard_order(order: Order, num_shards: int, shard_id: int) -> Order:
    """Shard ``shard_id`` of ``order``: strided, ``ceil(len / num_shards)`` ids, wrapping."""
    k, s = check_shards(num_shards, shard_id)
    if k == 1:
        return order
    return ShardView(order, k, s)


def offset_shard_counts(n: int, num_shards: int, offset: int) -> IdArray:
    """Rows of a size-``n`` block that each shard gets with ``offset`` (see rule 3).

    ``0 <= offset <= num_shards``; the counts sum to ``n``.
    """
    k = require_int(num_shards, "num_shards")
    off = require_int(offset, "offset")
    if k < 1:
        raise SamplerError(f"num_shards must be >= 1, got {num_shards!r}")
    if not 0 <= off <= k:
        raise SamplerError(
            f"offset must be in [0, num_shards={k}] for offset sharding, got {offset!r}"
        )
    x = np.arange(k, dtype=np.int64)
    m = n + off
    counts: IdArray = m // k + (x < m % k).astype(np.int64) - (x < off).astype(np.int64)
    return counts


def offset_shard_order(order: Order, num_shards: int, shard_id: int, offset: int) -> Order:
    """Shard ``shard_id``'s contiguous block of ``order`` under the offset rule."""
    k, s = check_shards(num_shards, shard_id)
    counts = offset_shard_counts(len(order), k, offset)
    start = int(counts[:s].sum())
    return SliceOrder(order, start, start + int(counts[s]))


def shard_size(num_rows: int, num_shards: int, shard_id: int, offset: int = -1) -> int:
    """Rows shard ``shard_id`` gets from ``num_rows`` (padding already included)."""
    k, s = check_shards(num_shards, shard_id)
    if offset == -1:
        return -(-num_rows // k)
    return int(offset_shard_counts(num_rows, k, offset)[s])


def split_order(
    order: Order,
    num_rows: int,
    num_shards: int,
    shard_id: int,
    *,
    num_padded: int = 0,
    offset: int = -1,
) -> Order:
    """Pad ``order`` (ids ``>= num_rows`` are padded rows) and take one shard of it.

    ``offset == -1`` is the strided split with wraparound; ``offset >= 0`` the
    contiguous offset blocks. Padding requires ``len(order) + num_padded`` to be a
    multiple of ``num_shards`` (SamplerError with MindSpore's message otherwise).
    """
    k, s = check_shards(num_shards, shard_id)
    if num_padded:
        check_padding(len(order), num_padded, k)
    padded = pad_order(order, num_padded, num_rows)
    if offset == -1:
        return shard_order(padded, k, s)
    return offset_shard_order(padded, k, s, offset)


def concat_offsets(child_sizes: Sequence[int], num_shards: int) -> list[int]:
    """Each child's offset: (sum of the sizes of the children before it) % num_shards."""
    k = require_int(num_shards, "num_shards")
    if k < 1:
        raise SamplerError(f"num_shards must be >= 1, got {num_shards!r}")
    offsets: list[int] = []
    before = 0
    for i, size in enumerate(child_sizes):
        n = require_int(size, f"child_sizes[{i}]")
        if n < 0:
            raise SamplerError(f"child_sizes[{i}] must be >= 0, got {size!r}")
        offsets.append(before % k)
        before += n
    return offsets


def concat_shard_positions(
    child_sizes: Sequence[int], num_shards: int, shard_id: int
) -> list[RangeOrder]:
    """For each child of a ConcatDataset, the row positions (within that child) of a shard.

    Each is a contiguous :class:`RangeOrder`, possibly empty; over all shards the
    positions of every child are covered exactly once.
    """
    k, s = check_shards(num_shards, shard_id)
    sizes = list(child_sizes)
    result: list[RangeOrder] = []
    for size, off in zip(sizes, concat_offsets(sizes, k), strict=True):
        counts = offset_shard_counts(int(size), k, off)
        start = int(counts[:s].sum())
        result.append(RangeOrder(start, start + int(counts[s])))
    return result
