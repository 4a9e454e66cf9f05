"""``mrecord bench``'s device limit reads each random place once (a second read of the
same pages is answered by the page cache and would measure memory, not the device)."""

from __future__ import annotations

import numpy as np

from mrecord.cli._bench import read_places


def test_random_reads_are_page_aligned_inside_the_files_and_never_share_a_page() -> None:
    sizes, row = [10_000_000, 3_000_000, 50_000], 100_000
    which, offsets = read_places(sizes, row, reads=2000)
    slots = sum((s - row) // 4096 // 25 + 1 if s > row else 1 for s in sizes)
    assert len(which) == len(offsets) == min(2000, slots)
    assert (offsets % 4096 == 0).all()
    ends = offsets + row
    assert all(
        (ends[which == f] <= max(size, row)).all() for f, size in enumerate(sizes)
    )
    pages = {
        (int(f), page)
        for f, a, b in zip(which, offsets, ends, strict=True)
        for page in range(int(a) // 4096, (int(b) - 1) // 4096 + 1)
    }
    assert len(pages) == sum((int(b) - 1) // 4096 - int(a) // 4096 + 1
                             for a, b in zip(offsets, ends, strict=True))


def test_small_rows_get_as_many_reads_as_asked_each_on_its_own_page() -> None:
    which, offsets = read_places([400_000_000], 76, reads=2000)
    assert len(set(zip(which.tolist(), (offsets // 4096).tolist(), strict=True))) == 2000
    assert np.all(offsets < 400_000_000)
