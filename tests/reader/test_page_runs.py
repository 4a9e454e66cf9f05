"""``rows_by_page`` groups a read's rows by page, keeping their order within each page:
every gather from the chunk buffers and the map walks its pages with it."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.storage.shard import rows_by_page


@given(
    pages=st.lists(
        st.one_of(st.integers(0, 40), st.integers(65_530, 65_540), st.integers(0, 2**40)),
        min_size=1,
        max_size=300,
    )
)
def test_rows_grouped_by_page_in_their_order(pages: list[int]) -> None:
    array = np.array(pages, dtype=np.int64)
    order, bounds, distinct = rows_by_page(array)
    assert sorted(order.tolist()) == list(range(len(pages)))  # each row once
    assert distinct == sorted(set(pages))
    assert bounds[0] == 0 and bounds[-1] == len(pages)
    for k, page in enumerate(distinct):
        members = order[bounds[k] : bounds[k + 1]].tolist()
        # the rows of this page, and only them, in the read's order
        assert members == [i for i, p in enumerate(pages) if p == page]
