"""ConcatDataset.use_sampler(DistributedSampler(k, s, shuffle=False)): MindSpore's offset rule.

Expected counts come from the rule in the reference README: child j gets
offset = (sum of sizes before j) % k, and shard x gets
floor((n+off)/k) + [x < (n+off)%k] - [x < off] rows of a child of size n,
as one contiguous block (blocks in shard order).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import Dataset, DistributedSampler, FileWriter, GeneratorDataset, MindDataset
from mrecord.errors import ArgumentError


def expected_blocks(sizes: list[int], k: int, s: int) -> list[list[int]]:
    """Per child, the positions shard ``s`` gets, straight from the README's rule."""
    out, before = [], 0
    for n in sizes:
        off = before % k
        counts = [(n + off) // k + (x < (n + off) % k) - (x < off) for x in range(k)]
        start = sum(counts[:s])
        out.append(list(range(start, start + counts[s])))
        before += n
    return out


def write(folder: Path, name: str, ids: np.ndarray) -> str:
    path = folder / name
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": ids})
    return str(path)


@settings(max_examples=15)
@given(sizes=st.lists(st.integers(0, 9), min_size=2, max_size=4), k=st.integers(1, 6))
def test_each_child_is_split_by_the_offset_rule(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], k: int
) -> None:
    folder = tmp_path_factory.mktemp("concat")
    files = [write(folder, f"c{j}.mrecord", 1000 * j + np.arange(n)) for j, n in enumerate(sizes)]
    seen: list[int] = []
    for s in range(k):
        children = [MindDataset(f, shuffle=False) for f in files]
        ds: Dataset = children[0]
        for child in children[1:]:
            ds = ds + child
        ds.use_sampler(DistributedSampler(k, s, shuffle=False))
        ids = [int(row["id"]) for row in ds.create_dict_iterator(num_epochs=1)]
        want = [1000 * j + p for j, block in enumerate(expected_blocks(sizes, k, s)) for p in block]
        assert ids == want
        assert ds.get_dataset_size() == len(want)
        seen.extend(ids)
    assert sorted(seen) == sorted(1000 * j + p for j, n in enumerate(sizes) for p in range(n))


def test_children_smaller_than_num_shards_work(tmp_path: Path) -> None:
    # MindSpore 2.10 segfaults here.
    a = write(tmp_path, "a.mrecord", np.arange(2))
    b = write(tmp_path, "b.mrecord", 100 + np.arange(1))
    per_shard = []
    for s in range(4):
        ds = MindDataset(a, shuffle=False) + MindDataset(b, shuffle=False)
        ds.use_sampler(DistributedSampler(4, s, shuffle=False))
        per_shard.append([int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1)])
    assert per_shard == [[0], [1], [100], []]


def test_generic_children_are_split_too() -> None:
    ds = GeneratorDataset([(i,) for i in range(7)], ["id"], shuffle=False) + GeneratorDataset(
        [(10 + i,) for i in range(2)], ["id"], shuffle=False
    )
    ds.use_sampler(DistributedSampler(4, 1, shuffle=False))
    assert [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1)] == [2, 3]


def test_use_sampler_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    a = MindDataset(write(tmp_path, "a.mrecord", np.arange(3)), shuffle=False)
    ds = a + MindDataset(write(tmp_path, "b.mrecord", np.arange(3)), shuffle=False)
    with pytest.raises(TypeError, match="DistributedSampler"):
        ds.use_sampler(object())
    with pytest.raises(ArgumentError, match="shuffle=False"):
        ds.use_sampler(DistributedSampler(2, 0, shuffle=True))
