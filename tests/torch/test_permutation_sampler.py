"""``PermutationSampler``: a shuffled order for ``MapDataset`` under a DataLoader without a
list of every index.

torch's ``RandomSampler`` and ``DistributedSampler`` build ``torch.randperm(n).tolist()``:
a Python int per row (~36 bytes), 216 MB for 6M rows in every loader's main process; a
``MapDataset`` DataLoader over 6M rows was OOM-killed in a 400 MB memory group (1,069 MB
unconstrained). This sampler computes its keyed permutation a chunk at a time.
"""

from __future__ import annotations

import math

import pytest
import torch

from mrecord.errors import ArgumentError
from mrecord.torch import PermutationSampler
from tests.tracing import traced_peak


class _Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def test_a_shuffle_of_a_million_rows_holds_a_chunk_of_them() -> None:
    sampler = PermutationSampler(_Sized(1_000_000), seed=3)

    def walk() -> tuple[int, int, int]:
        count = total = first = 0
        for k, i in enumerate(sampler):
            if k == 0:
                first = i
            count += 1
            total += i
        return count, total, first

    (count, total, first), peak = traced_peak(walk)
    assert peak < 8 << 20, f"the sampler held {peak >> 20} MB"  # randperm().tolist(): 36 MB
    assert count == 1_000_000 and total == 1_000_000 * 999_999 // 2  # every row once
    assert first != 0


def test_epochs_differ_and_repeat_from_the_seed() -> None:
    a = PermutationSampler(_Sized(1000), seed=7)
    first, second = list(a), list(a)  # each pass the next epoch, as RandomSampler varies
    assert sorted(first) == sorted(second) == list(range(1000)) and first != second
    b = PermutationSampler(_Sized(1000), seed=7)
    b.set_epoch(1)
    assert list(b) == second and list(b) == second  # set_epoch fixes the epoch
    assert list(PermutationSampler(_Sized(1000), seed=8)) != first


@pytest.mark.parametrize(
    ("n", "world", "drop_last"), [(10, 3, False), (10, 3, True), (2, 5, False), (12, 4, False)]
)
def test_ranks_split_an_epoch_as_distributed_sampler_does(
    n: int, world: int, drop_last: bool
) -> None:
    """Rank ``r`` takes positions ``r, r + world, ...`` of the epoch's permutation, padded
    from its start (or cut, ``drop_last``) to a multiple of ``world``: the counts of
    torch's ``DistributedSampler``, every row at least once unless cut, the padding the
    epoch's first rows."""
    ranks = [
        list(PermutationSampler(_Sized(n), seed=1, num_replicas=world, rank=r, drop_last=drop_last))
        for r in range(world)
    ]
    theirs: list[list[int]] = [
        list(torch.utils.data.DistributedSampler(_Sized(n), world, r, drop_last=drop_last))  # type: ignore[arg-type]
        for r in range(world)
    ]
    assert [len(r) for r in ranks] == [len(r) for r in theirs]
    per_rank = n // world if drop_last else math.ceil(n / world)
    assert all(len(r) == per_rank for r in ranks)
    epoch = list(PermutationSampler(_Sized(n), seed=1))  # the same seed's first epoch
    by_position = [ranks[p % world][p // world] for p in range(per_rank * world)]
    assert by_position == [epoch[p % n] for p in range(per_rank * world)]
    assert len(PermutationSampler(_Sized(n), num_replicas=world, drop_last=drop_last)) == per_rank


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ArgumentError, match="rank"):
        PermutationSampler(_Sized(10), num_replicas=2, rank=2)
    with pytest.raises(ArgumentError, match="num_replicas"):
        PermutationSampler(_Sized(10), num_replicas=0)
    with pytest.raises(ArgumentError, match="epoch"):
        PermutationSampler(_Sized(10)).set_epoch(-1)
