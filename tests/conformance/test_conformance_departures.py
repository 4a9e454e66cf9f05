"""Issue 17, where MindSpore is wrong: mrecord works or refuses clearly where MindSpore fails.

Every expected value comes from ``tests/cases/conformance_cases.json``, written by
``tools/gen_conformance_cases.py`` running real MindSpore 2.10. Where mrecord departs on
purpose (docs/MINDSPORE_DIFFERENCES.md), the test says so and asserts mrecord's behaviour.
"""


from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import mrecord
from mrecord import FileWriter, GeneratorDataset, MindDataset, SubsetSampler


# ----------------------------------------------------------------------------- MindSpore is wrong
def test_numpy_slices_and_scalar_generators_work_under_numpy_2() -> None:
    """MindSpore 2.10 fails on both under numpy 2 ("Unable to avoid copy"); mrecord does not."""
    ds = mrecord.NumpySlicesDataset(np.arange(4, dtype=np.int64), ["x"], shuffle=False)
    assert [int(r["x"]) for r in ds.create_dict_iterator(num_epochs=1)] == [0, 1, 2, 3]

    def scalars() -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(3))

    rows = [int(r[0]) for r in GeneratorDataset(scalars, ["x"]).create_tuple_iterator()]
    assert rows == [0, 1, 2]


def test_out_of_range_subset_index_is_refused(mixed: str) -> None:
    """MindSpore silently wraps index 9 of a 4-row dataset to another row."""
    ds = MindDataset(mixed, sampler=SubsetSampler([0, 9]))
    with pytest.raises(RuntimeError, match="out of range"):
        list(ds.create_dict_iterator(num_epochs=1))


def test_a_row_missing_a_field_is_refused(tmp_path: Path) -> None:
    """MindSpore's FileWriter drops such a row with only a warning."""
    writer = FileWriter(tmp_path / "m.mrecord", shard_num=1)
    writer.add_schema({"id": {"type": "int64"}, "cls": {"type": "int32"}})
    with pytest.raises(ValueError, match="cls"):
        writer.write_raw_data([{"id": 1, "cls": 0}, {"id": 2}])
    writer.abort()


def test_random_sampler_with_replacement_gives_num_samples(mixed: str) -> None:
    """MindSpore caps num_samples at the dataset size even with replacement=True."""
    ds = MindDataset(mixed, sampler=mrecord.RandomSampler(replacement=True, num_samples=10))
    assert ds.get_dataset_size() == 10
    ids = [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1)]
    assert len(ids) == 10
    assert set(ids) <= {0, 1, 2, 3}
