"""mrecord.ray without a cluster: how parts become shards, and the extra's ImportError.

(That no core package imports ``mrecord.ray`` is tests/docs/test_layering.py's job.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.ray._publish import plan_shards

REPO = Path(__file__).resolve().parents[2]

part_pages = st.lists(
    st.lists(st.integers(min_value=1, max_value=50), max_size=6).map(
        lambda rows: np.array(rows, dtype="<u4")
    ),
    min_size=1,
    max_size=8,
)


@given(part_pages, st.one_of(st.none(), st.integers(min_value=1, max_value=12)))
def test_every_page_lands_in_one_shard_in_task_order(
    pages: list[np.ndarray], shard_num: int | None
) -> None:
    plan = plan_shards(pages, shard_num)
    placed = [
        (piece.part, page)
        for shard in plan
        for piece in shard
        for page in range(piece.start, piece.stop)
    ]
    assert placed == [(i, p) for i, rows in enumerate(pages) for p in range(len(rows))]
    rows = [
        sum(int(pages[pc.part][pc.start : pc.stop].sum()) for pc in shard) for shard in plan
    ]
    if shard_num is None:
        assert len(plan) == max(1, sum(1 for r in pages if r.sum()))
    else:
        assert len(plan) == shard_num
        # contiguous runs of whole pages: each shard is within one page of an equal share
        biggest = max((int(r.max()) for r in pages if len(r)), default=0)
        share = sum(rows) / shard_num
        assert all(abs(r - share) <= biggest for r in rows)


def test_missing_ray_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "try:\n    import mrecord.ray\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert "pip install 'mrecord[ray]'" in out

