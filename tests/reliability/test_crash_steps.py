"""SIGKILL a writer at the inner steps of create, append, commit and reindex, one by one
(``reliability/steps.py``): whoever opens the dataset first finishes the commit, and the
dataset holds exactly that commit's rows. The quick version of
``reliability/steps_campaign.py`` (every opener at every point, more names and shard counts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability import steps


def _kill_each(tmp_path: Path, name: str, shards: int, points: list[steps.KillPoint]) -> None:
    """Kill at each point; the first opener cycles through the five kinds."""
    failures = []
    for k, point in enumerate(points):
        first = steps.FIRST_OPENERS[k % len(steps.FIRST_OPENERS)]
        try:
            steps.run_point(tmp_path / "run", name, shards, point, first)
        except AssertionError as exc:
            failures.append(str(exc))
    assert failures == []


def test_a_kill_at_each_kind_of_step_leaves_that_commit_whole(tmp_path: Path) -> None:
    """A name ending in a digit, 2 shards: the first time each step is reached in each of
    create, append, reindex, append (14 kills)."""
    points = steps.kill_points(tmp_path / "points", "ds1", 2)
    assert {p.phase for p in points} == {"c1", "c2", "r", "c3"}
    assert {p.step for p in points} == {"journal", "renamed_one", "tail_part", "renamed_all"}
    _kill_each(tmp_path, "ds1", 2, [p for p in points if p.nth == 1])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "shards"), [("data", 1), ("ds1", 2), ("v20", 11)])
def test_a_kill_at_every_commit_step_leaves_that_commit_whole(
    tmp_path: Path, name: str, shards: int
) -> None:
    """Every point the work passes, killed once each."""
    _kill_each(tmp_path, name, shards, steps.kill_points(tmp_path / "points", name, shards))
