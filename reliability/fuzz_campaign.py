"""Fuzz campaign: thousands of mutated foreign files per reader, each case in a limited worker.

    .venv/bin/python -m reliability.fuzz_campaign --cases 2000 --seed 1

For each target of :mod:`reliability.fuzz` (``mindrecord``, ``mrecord``, ``db``) runs
``--cases`` cases in worker subprocesses limited to ``fuzz.MEMORY_LIMIT`` bytes of
address space, a case killed after ``--timeout`` seconds counting as a hang. Prints the
outcomes per target and mutation kind, keeps each failing input under ``--keep`` (rebuilt
with ``fuzz.make_case``), and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from reliability import fuzz


def _kind(mutation: str) -> str:
    """The mutator of a case (``db x.db: huge cell on t.c`` -> ``db: huge cell``)."""
    if mutation.startswith("db "):
        return "db: " + mutation.split(": ", 1)[1].split(" on ")[0]
    if mutation.startswith("journal"):
        return "journal"
    if mutation.startswith("mutation not applicable"):
        return "not applicable"
    parts = mutation.split(": ")
    return parts[1] if len(parts) > 1 else mutation


def _outcome(result: fuzz.FuzzResult) -> str:
    if result.outcome.startswith("refused"):
        return "refused (mrecord error)"
    if result.outcome == "ok":
        return "read correctly"
    return result.outcome.split(":")[0]


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="cases per target")
    parser.add_argument("--targets", nargs="+", default=list(fuzz.TARGETS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    parser.add_argument("--keep", type=Path, help="copy failing inputs into this folder")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, int]] = {}
    failures: list[fuzz.FuzzResult] = []
    with tempfile.TemporaryDirectory(prefix="mrecord-fuzz-campaign-") as tmp:
        templates = Path(tmp) / "templates"
        fuzz.build_templates(templates)
        for target in args.targets:
            start = time.monotonic()
            results = fuzz.run_fuzz(target, templates, args.seed, args.cases, timeout=args.timeout)
            took = time.monotonic() - start
            outcomes = Counter(_outcome(r) for r in results)
            kinds = Counter((_kind(r.mutation), _outcome(r)) for r in results)
            figures[target] = dict(outcomes)
            print(f"{target}: {len(results)} cases in {took:.0f} s: {dict(outcomes)}")
            for (kind, outcome), n in sorted(kinds.items()):
                print(f"    {kind:28} {outcome:24} {n:6}")
            for r in results:
                if not r.passed:
                    failures.append(r)
                    print(f"  FAILURE case {r.number}: {r.mutation[:150]} -> {r.outcome[:300]}")
                    if args.keep:
                        keep = args.keep / f"{target}-{r.number}"
                        fuzz.make_case(target, templates, args.seed, r.number, keep)
    print(f"failures: {len(failures)}")
    if args.json:
        doc = {"seed": args.seed, "cases": args.cases, "figures": figures}
        doc["failures"] = [r.__dict__ for r in failures]
        args.json.write_text(json.dumps(doc, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
