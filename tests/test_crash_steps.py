"""SIGKILL a writer at every inner step of create, append, commit and reindex, one by one
(``reliability/steps.py``): whoever opens the dataset first finishes the commit, and the
dataset holds exactly that commit's rows. The quick version of
``reliability/steps_campaign.py`` (every opener at every point, more names and shard counts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability import steps


@pytest.mark.parametrize(("name", "shards"), [("data", 1), ("ds1", 2)])
def test_a_kill_at_every_commit_step_leaves_that_commit_whole(
    tmp_path: Path, name: str, shards: int
) -> None:
    """Every point the work passes, killed once each; the first opener after each kill
    cycles through reader (first and last shard), appender, reindex and verify."""
    points = steps.kill_points(tmp_path / "points", name, shards)
    phases = {p.phase for p in points}
    assert phases == {"c1", "c2", "r", "c3"}
    assert {p.step for p in points} == {"journal", "renamed_one", "tail_part", "renamed_all"}
    failures = []
    for k, point in enumerate(points):
        first = steps.FIRST_OPENERS[k % len(steps.FIRST_OPENERS)]
        try:
            steps.run_point(tmp_path / "run", name, shards, point, first)
        except AssertionError as exc:
            failures.append(str(exc))
    assert failures == []
