"""Run mrecord and its random-access peers on the same rows; one table per workload.

Usage::

    python -m benchmarks.peers [--scale 0.25] [--workloads images,tabular,varshape]
        [--peer-python /work/peervenv14/bin/python] [--max-seconds 20] [--out bench_out]

Each system of each workload runs in its own subprocess (``benchmarks.bench_peers``):
mrecord in this interpreter, the peers in ``--peer-python`` (default: the environment
variable ``MRECORD_BENCH_PEER_PYTHON``), a virtual environment holding ``pylance``,
``array-record``, ``datasets`` and ``mosaicml-streaming``, never mrecord's dependencies.
A peer that cannot be imported there is skipped, and the table says so. The physical
limits (``benchmarks.limits``) are measured first, in the same run; every mrecord number
is also printed as a fraction of the limit of the same work (reads, whose consumers read
one byte per 4 KiB page of what they get, against touching the pages of a memory map of
random 100 KB rows or in order; writes against the disk's fsync bandwidth).

Results: ``bench_out/peers.json`` and Markdown tables in ``bench_out/peers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_peers import SYSTEMS
from benchmarks.limits import measure_limits

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
_IMPORT = {"lance": "lance", "arrayrecord": "array_record.python.array_record_module",
           "hf": "datasets", "streaming": "streaming"}
METRICS = {
    "write": ("write, time to durable", "fsync_mb_s"),
    "read_seq": ("sequential scan", "touch_scan_gb_s"),
    "read_row": ("one row per call, random", "touch_random_gb_s"),
    "read_batch256": ("256 random ids per call", "touch_random_gb_s"),
    "read_epoch": ("shuffled epoch", "touch_random_gb_s"),
}
"""Metric -> (label, the limit it is a fraction of)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    return env


def _probe(python: str, system: str) -> str | None:
    """None when ``python`` imports the peer, else why not."""
    proc = subprocess.run([python, "-c", f"import {_IMPORT[system]}"], capture_output=True,
                          text=True, env=_env(), check=False)
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]


def _run(python: str, system: str, workload: str, args: argparse.Namespace) -> dict[str, Any]:
    out = args.out.resolve()
    json_path = out / "raw" / f"peer_{system}_{workload}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [python, "-m", "benchmarks.bench_peers", system, workload, "--scale", str(args.scale),
           "--out-dir", str(out / "peers"), "--max-seconds", str(args.max_seconds),
           "--json", str(json_path)]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    if proc.returncode != 0 or not json_path.exists():
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {proc.returncode}: {tail[:300]}"}
    result: dict[str, Any] = json.loads(json_path.read_text())
    return result


def _rate(run: dict[str, Any], metric: str) -> float | None:
    m = run.get("metrics", {}).get(metric)
    if not m or m["extra"].get("error") or not m["rows_per_s"]:
        return None
    rate: float = m["rows_per_s"]
    return rate


def _fraction(run: dict[str, Any], metric: str, limits: dict[str, Any]) -> float | None:
    from benchmarks.run import fraction_of_limit

    m = run.get("metrics", {}).get(metric)
    if not m or m["extra"].get("error") or not m["mb_per_s"]:
        return None
    return fraction_of_limit(m["rows_per_s"], m["mb_per_s"], METRICS[metric][1], limits)


def table(workload: str, rows: int, runs: dict[str, dict[str, Any]],
          limits: dict[str, Any]) -> str:
    """One workload as a Markdown table: rows/s per system, mrecord ÷ peer, fraction of limit."""
    systems = [s for s in SYSTEMS if s in runs]
    head = "| step | " + " | ".join(
        f"{s} {runs[s].get('version', '')}".strip() for s in systems
    ) + " | mrecord ÷ best peer | mrecord, fraction of limit |"
    out = [f"**{workload}** ({rows:,} rows; rows/s)", "", head,
           "| --- |" + " ---: |" * (len(systems) + 2)]
    for metric, (label, _limit) in METRICS.items():
        cells = []
        for s in systems:
            if "error" in runs[s]:
                cells.append("skipped")
                continue
            rate = _rate(runs[s], metric)
            err = runs[s].get("metrics", {}).get(metric, {}).get("extra", {}).get("error")
            cells.append(f"{rate:,.0f}" if rate else ("error" if err else "–"))
        mine = _rate(runs.get("mrecord", {}), metric)
        peers = [r for s in systems if s != "mrecord" and (r := _rate(runs[s], metric))]
        ratio = f"{mine / max(peers):.2f}×" if mine and peers else "–"
        frac = _fraction(runs.get("mrecord", {}), metric, limits)
        frac_text = f"{frac:.1%}" if frac is not None else "–"
        out.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} | {frac_text} |")
    notes = [f"- {s}: {runs[s]['error']}" for s in systems if "error" in runs[s]]
    for s in systems:
        for metric, m in runs[s].get("metrics", {}).items():
            if m["extra"].get("error"):
                notes.append(f"- {s} {metric}: {m['extra']['error'][:200]}")
            elif m["extra"].get("stopped_early"):
                notes.append(f"- {s} {metric}: stopped after --max-seconds ({m['rows']:,} rows)")
    return "\n".join(out + (["", *notes] if notes else []))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.25)
    parser.add_argument("--workloads", default="images,tabular,varshape")
    parser.add_argument("--peer-python", default=os.environ.get("MRECORD_BENCH_PEER_PYTHON"))
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    args = parser.parse_args(argv)
    from benchmarks import workloads as W

    args.out.mkdir(parents=True, exist_ok=True)
    print("measuring the physical limits ...", flush=True)
    limits = measure_limits(args.out.resolve(), 256)
    print(json.dumps(limits), flush=True)
    available: dict[str, str | None] = {}
    for system in SYSTEMS[1:]:
        if not args.peer_python:
            available[system] = "no --peer-python (or MRECORD_BENCH_PEER_PYTHON) given"
        else:
            available[system] = _probe(args.peer_python, system)
        if available[system]:
            print(f"{system}: skipped ({available[system]})", flush=True)
    report: dict[str, Any] = {"command": "python -m benchmarks.peers " + " ".join(
        sys.argv[1:] if argv is None else argv), "limits": limits,
        "loadavg_1min_at_start": os.getloadavg()[0], "workloads": {}}
    md = [f"`{report['command']}`; limits measured in the same run: "
          + ", ".join(f"{k} {v}" for k, v in limits.items()), ""]
    for workload in [w for w in args.workloads.split(",") if w]:
        runs: dict[str, dict[str, Any]] = {}
        for system in SYSTEMS:
            if system != "mrecord" and available[system]:
                runs[system] = {"error": f"not importable: {available[system]}"}
                continue
            python = sys.executable if system == "mrecord" else str(args.peer_python)
            print(f"running {system} on {workload} ...", flush=True)
            runs[system] = _run(python, system, workload, args)
        report["workloads"][workload] = runs
        text = table(workload, W.get(workload).num_rows(args.scale), runs, limits)
        print(text + "\n", flush=True)
        md += [text, ""]
        (args.out / "peers.json").write_text(json.dumps(report, indent=1))
    (args.out / "peers.md").write_text("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
