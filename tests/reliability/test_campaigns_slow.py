"""The long reliability campaigns, at a size the thorough run can afford (``-m slow``).

``make test`` deselects these (pyproject's ``addopts`` has ``-m "not slow"``); ``make
test-thorough`` selects them with ``-m "slow or not slow"``. Each campaign exits 1 on
any lost, mixed or wrongly accepted data (see its module docstring), so a passing test
here is the campaign's own verdict over many more cases than the quick tests run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_crash_campaign_kills_every_phase_and_step(tmp_path: Path) -> None:
    from reliability import crash_campaign

    args = ["--trials", "15", "--step-trials", "5", "--json", str(tmp_path / "crash.json")]
    assert crash_campaign.main(args) == 0


def test_powerloss_campaign_every_crash_state(tmp_path: Path) -> None:
    from reliability import powerloss_campaign

    assert powerloss_campaign.main(["--shards", "1", "2"]) == 0


def test_corruption_campaign(tmp_path: Path) -> None:
    from reliability import corruption_campaign

    args = ["--cases", "400", "--batch", "100", "--json", str(tmp_path / "corrupt.json")]
    assert corruption_campaign.main(args) == 0


def test_fuzz_campaign(tmp_path: Path) -> None:
    from reliability import fuzz_campaign

    args = ["--cases", "150", "--keep", str(tmp_path / "kept"), "--json", str(tmp_path / "f.json")]
    assert fuzz_campaign.main(args) == 0


def test_bad_input_campaign() -> None:
    from reliability import bad_input_campaign

    assert bad_input_campaign.main(["--examples", "400"]) == 0
