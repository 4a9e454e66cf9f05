"""Power-loss campaign: every crash state of create + two appends, for 1 to 3 shards.

    .venv/bin/python -m reliability.powerloss_campaign --seed 1

Records the file-system operations of a writer (see :mod:`reliability.powerloss`),
then checks each distinct state a power cut may leave, twice over: name changes
persisted in order (a journalling file system) and in any order (what POSIX allows
without a folder fsync between them). Prints the figures; exits 1 when a state under
the ordered model is wrong (defects under the unordered model are reported, and
``tests/reliability/test_powerloss.py`` holds them as an expected failure until the commit
protocol is fixed).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from reliability import powerloss

# Rows per write_raw_data call, per commit: commit 1 creates, the others append.
COMMITS = [[60, 40], [50], [30, 10]]


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--random-per-cut", type=int, default=6)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    figures: dict[str, object] = {"seed": args.seed, "commits": COMMITS, "runs": {}}
    ordered_defects = 0
    for shards in args.shards:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="mrecord-powerloss-") as tmp:
            result = powerloss.run_campaign(
                Path(tmp), shards, COMMITS, seed=args.seed, random_per_cut=args.random_per_cut
            )
        took = time.monotonic() - start
        ops = sum(result.ops.values())
        print(
            f"{shards} shard(s): {ops} ops recorded, {result.generated} states generated, "
            f"{result.total_checked} distinct checked in {took:.0f} s"
        )
        for (model, outcome), n in sorted(result.outcomes.items()):
            print(f"  {model:9} {outcome:22} {n:6}")
        for model, defects in sorted(result.defects.items()):
            print(f"  {model}: {len(defects)} defects, e.g.")
            for d in defects[:3]:
                print("     ", d[:300])
        ordered_defects += len(result.defects.get("ordered", []))
        runs = figures["runs"]
        assert isinstance(runs, dict)
        runs[str(shards)] = {
            "ops": result.ops,
            "generated": result.generated,
            "checked": result.checked,
            "outcomes": {f"{m}/{o}": n for (m, o), n in sorted(result.outcomes.items())},
            "defects": result.defects,
            "seconds": round(took, 1),
        }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 1 if ordered_defects else 0


if __name__ == "__main__":
    sys.exit(main())
