"""SIGKILL a writer at random points; the last committed state always survives whole.

The quick version of ``reliability/crash_campaign.py`` (see docs/RELIABILITY.md).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from reliability import crash


@pytest.fixture(scope="module")
def durations(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], float]:
    """How long each phase of the worker takes on this machine (one uncrashed run)."""
    return crash.calibrate(tmp_path_factory.mktemp("calibrate"))


def test_uncrashed_worker_commits_everything(tmp_path: Path) -> None:
    """Without a kill, every commit is there: the harness's own baseline."""
    crash.calibrate(tmp_path)
    assert crash.check_dataset(tmp_path, 2, {crash.totals()[-1]}) == crash.totals()[-1]


@pytest.mark.parametrize(
    ("phase", "trials"),
    [("write", 2), ("commit", 2), ("append", 2), *((step, 1) for step in crash.STEPS)],
)
def test_kill_leaves_last_commit(
    tmp_path: Path, durations: dict[tuple[str, int], float], phase: str, trials: int
) -> None:
    """After each kill: the last completed commit (or the one in flight, whole) and nothing
    else; verify passes; the next writer removes temporary files; no commit -> no files."""
    rng = random.Random(f"{phase}-suite")
    for k in range(trials):
        trial = crash.run_trial(tmp_path / str(k), rng, durations, phase)
        # A trial that ran to the end uncrashed would prove nothing about this phase.
        assert trial.killed, trial.markers
        assert trial.rows in trial.allowed
        if phase in crash.STEPS:
            # Killed inside commit() after the journal: that commit is durable.
            assert trial.killed and trial.rows == max(trial.allowed)
