"""Crash campaign: SIGKILL a writer N times in each phase and check every survivor.

    .venv/bin/python -m reliability.crash_campaign --trials 200 --seed 1

Phases: ``write`` (during write_raw_data of the first commit), ``commit`` (during
the first commit()), ``append`` (during open_for_append + writes + commit of a
later commit), and the commit's inner steps ``journal``, ``renamed_one``,
``renamed_all`` (the writer kills itself there through ``crash.install_crash_at``).
The checks after each kill are those of :mod:`reliability.crash`. Prints a
table and exits 1 if any trial lost or mixed data.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from reliability import crash


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="kills per random phase")
    parser.add_argument("--step-trials", type=int, default=50, help="kills per commit step")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    plan = [(p, args.trials) for p in crash.PHASES] + [(s, args.step_trials) for s in crash.STEPS]
    results: dict[str, dict[str, object]] = {}
    failed: dict[str, int] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mrecord-crash-") as tmp:
        durations = crash.calibrate(Path(tmp) / "calibrate")
        for phase, n in plan:
            killed = survived = 0
            outcomes: dict[str, int] = {}
            failures: list[str] = []
            for k in range(n):
                try:
                    trial = crash.run_trial(Path(tmp) / "trial", rng, durations, phase)
                except AssertionError as exc:
                    failures.append(f"trial {k}: {exc}")
                    continue
                killed += trial.killed
                survived += 1
                key = "old" if trial.rows == min(trial.allowed) else "new"
                outcomes[key] = outcomes.get(key, 0) + 1
            failed[phase] = len(failures)
            results[phase] = {
                "trials": n,
                "killed": killed,
                "checks_passed": survived,
                "rows_from_last_done_commit": outcomes.get("old", 0),
                "rows_from_commit_in_flight": outcomes.get("new", 0),
                "failures": failures,
            }
            print(
                f"{phase:12} trials {n:4}  killed {killed:4}  passed {survived:4}  "
                f"old {outcomes.get('old', 0):4}  new {outcomes.get('new', 0):4}  "
                f"failures {len(failures)}",
                flush=True,
            )
            for failure in failures[:5]:
                print("   ", failure)
    total = sum(n for _, n in plan)
    bad = sum(failed.values())
    print(f"{total} trials, {bad} failures, {time.monotonic() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "phases": results}, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
