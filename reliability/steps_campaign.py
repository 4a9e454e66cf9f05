"""Deterministic-kill campaign: every commit step, every first opener, several names and
shard counts (:mod:`reliability.steps`).

    .venv/bin/python -m reliability.steps_campaign --jobs 2 --json steps.json

For each (name, shard count) the work is run once to list its kill points; then each
point is killed once per first opener (reader of the first shard, of the last shard,
appender, reindex, verify) and checked. Prints a line per configuration and exits 1 if
any kill left the dataset unreadable, mixed, or holding other rows than its commit's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from reliability import steps

_NAMES = ("data", "ds1", "v20")
_SHARDS = (1, 2, 11)


def _one(args: tuple[str, str, int, str, str]) -> str:
    """Run one kill; returns "" or what went wrong."""
    folder, name, shards, point, first = args
    try:
        steps.run_point(Path(folder), name, shards, steps.KillPoint.parse(point), first)
    except AssertionError as exc:
        return f"{name}/{shards} {point} {first}: {exc}"
    return ""


def _plan(tmp: Path, name: str, shards: int, openers: list[str]) -> Iterator[tuple[str, ...]]:
    points = steps.kill_points(tmp / f"{name}-{shards}-points", name, shards)
    for k, point in enumerate(points):
        for first in openers:
            yield (str(tmp / f"{name}-{shards}-{k}-{first}"), name, str(shards), str(point), first)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", nargs="+", default=list(_NAMES))
    parser.add_argument("--shards", nargs="+", type=int, default=list(_SHARDS))
    parser.add_argument("--openers", nargs="+", default=list(steps.FIRST_OPENERS))
    parser.add_argument("--jobs", type=int, default=1, help="kills run side by side")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, object]] = {}
    bad = total = 0
    start = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="mrecord-steps-") as tmp,
        ProcessPoolExecutor(args.jobs) as pool,
    ):
        for name in args.names:
            for shards in args.shards:
                plan = [
                    (folder, n, int(s), point, first)
                    for folder, n, s, point, first in _plan(Path(tmp), name, shards, args.openers)
                ]
                failures = [f for f in pool.map(_one, plan) if f]
                points = len({p[3] for p in plan})
                total += len(plan)
                bad += len(failures)
                results[f"{name}/{shards}"] = {
                    "points": points,
                    "kills": len(plan),
                    "failures": failures,
                }
                print(
                    f"{name:6} shards {shards:3}  points {points:3}  kills {len(plan):4}  "
                    f"failures {len(failures)}",
                    flush=True,
                )
                for failure in failures[:5]:
                    print("   ", failure[:300])
    print(f"{total} kills, {bad} failures, {time.monotonic() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"configs": results}, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
