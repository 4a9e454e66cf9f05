"""The pipeline's optional hooks are declared on ``Dataset`` with defaults (issue 25 §2)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mrecord import Block, NumpySlicesDataset, SourceDataset
from mrecord.errors import PipelineError
from mrecord.pipeline.engine.context import ExecContext


class ThreeClasses(SourceDataset):
    """A source that knows its number of classes."""

    def _source_num_rows(self) -> int:
        return 4

    def _source_column_names(self) -> list[str]:
        return ["label"]

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        yield Block({"label": np.array([0, 1, 2, 0])})

    def _source_num_classes(self) -> int | None:
        return 3


def test_num_classes_is_found_through_the_ops_above_the_source() -> None:
    assert ThreeClasses().map(lambda x: x + 1, input_columns=["label"]).batch(2).num_classes() == 3
    assert NumpySlicesDataset({"a": [1, 2]}).batch(1).num_classes() is None  # knows none


def test_add_sampler_on_a_node_without_a_sampler_says_where_it_works() -> None:
    from mrecord import SequentialSampler

    with pytest.raises(PipelineError, match="add_sampler works on a source that samples by index"):
        ThreeClasses().batch(2).add_sampler(SequentialSampler())


def test_a_concat_slice_of_a_source_without_range_reads_runs_and_slices_it() -> None:
    """The default ``_iter_blocks_range``: rows ``start:stop`` of the epoch, in order."""
    from mrecord import DistributedSampler
    from mrecord.sampling import concat_shard_positions

    ds = ThreeClasses() + ThreeClasses()
    ds.use_sampler(DistributedSampler(2, 1, shuffle=False))
    got = [int(row[0]) for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    labels = [0, 1, 2, 0]
    want = [x for r in concat_shard_positions([4, 4], 2, 1) for x in labels[r.start : r.stop]]
    assert got == want and 0 < len(want) < 8
