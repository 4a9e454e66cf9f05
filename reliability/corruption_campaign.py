"""Corruption campaign: thousands of damaged copies of a dataset, each checked in a subprocess.

    .venv/bin/python -m reliability.corruption_campaign --cases 5000 --seed 1

Each case flips, zeroes, overwrites, truncates or appends bytes in a data file
(its pages, metadata, trailer, header or anywhere) or a ``.db``, then reads every
row and runs ``verify_dataset`` (see :mod:`reliability.corrupt`). Cases run
in worker subprocesses in batches, so a segfault or hang is caught and counted.
Prints the figures and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from reliability import corrupt


def _run_batch(template: Path, seed: int, count: int, timeout: float) -> list[dict[str, object]]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "reliability.corrupt", str(template), str(seed), str(count)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out, code, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code, err = None, "batch timed out"
    results = [json.loads(line) for line in out.splitlines() if '"read"' in line]
    if code != 0:
        started = [json.loads(line) for line in out.splitlines() if '"read"' not in line]
        last = started[-1] if started else {}
        results.append(
            {
                "case": last.get("case"),
                "mutation": last.get("mutation"),
                "passed": False,
                "read": f"failure: worker exit {code}: {err[-300:]}",
                "verify": "",
                "changed": True,
                "must_detect": False,
            }
        )
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    start = time.monotonic()
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="mrecord-corrupt-campaign-") as tmp:
        template = Path(tmp) / "template"
        template.mkdir()
        corrupt.build_template(template)
        for b, first in enumerate(range(0, args.cases, args.batch)):
            count = min(args.batch, args.cases - first)
            results += _run_batch(template, args.seed * 100_003 + b, count, 30.0 + count)
    by_region: Counter[tuple[str, str]] = Counter()
    for r in results:
        mutation = r.get("mutation")
        region = str(mutation.get("region", "?")) if isinstance(mutation, dict) else "?"
        if not r.get("changed"):
            outcome = "no byte changed"
        elif r.get("must_detect"):
            outcome = "detected" if r["passed"] else "MISSED"
        elif r.get("read") == "ok":
            outcome = "harmless (rows intact)"
        else:
            outcome = "refused"
        if not r["passed"]:
            outcome = "FAILURE" if outcome != "MISSED" else outcome
        by_region[(region, outcome)] += 1
    failures = [r for r in results if not r["passed"]]
    print(f"{len(results)} cases in {time.monotonic() - start:.0f} s")
    for (region, outcome), n in sorted(by_region.items()):
        print(f"  {region:9} {outcome:24} {n:6}")
    print(f"failures: {len(failures)}")
    for f in failures[:10]:
        print("   ", f)
    if args.json:
        figures = {f"{region}/{outcome}": n for (region, outcome), n in sorted(by_region.items())}
        args.json.write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "cases": len(results),
                    "figures": figures,
                    "failures": failures,
                },
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
