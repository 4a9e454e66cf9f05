"""A row's page and slot: by division where every page but the last holds the same
rows (fixed-width data), by a search otherwise; the same answer either way."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.storage.shard import locate_rows, uniform_page_rows

UNIFORM = st.builds(
    lambda rows, pages, last: [rows] * pages + [last],
    st.integers(1, 50),
    st.integers(0, 20),
    st.integers(1, 120),  # the last page: shorter, as long, or longer
)
ANY = st.lists(st.integers(1, 60), min_size=1, max_size=25)


@given(page_rows=st.one_of(UNIFORM, ANY), data=st.data())
def test_pages_and_slots_are_those_of_the_page_starts(
    page_rows: list[int], data: st.DataObject
) -> None:
    counts = np.array(page_rows, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    total = int(starts[-1])
    rows = np.array(
        data.draw(st.lists(st.integers(0, total - 1), max_size=200), label="rows"), np.int64
    )
    pages, slots = locate_rows(starts, uniform_page_rows(counts), rows)
    for row, page, slot in zip(rows.tolist(), pages.tolist(), slots.tolist(), strict=True):
        assert starts[page] <= row < starts[page + 1]
        assert slot == row - starts[page]


def test_uniform_is_the_rows_of_every_page_but_the_last() -> None:
    assert uniform_page_rows(np.array([8, 8, 8, 3])) == 8
    assert uniform_page_rows(np.array([8, 8, 8, 30])) == 8
    assert uniform_page_rows(np.array([5])) == 5
    assert uniform_page_rows(np.array([8, 7, 8, 3])) == 0
    assert uniform_page_rows(np.array([], dtype=np.int64)) == 0
