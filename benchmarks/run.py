"""Run the benchmarks, mrecord and MindSpore side by side, and print one table per workload.

Usage::

    python -m benchmarks.run                       # every suite at full scale
    python -m benchmarks.run format pipeline --scale 0.1
    python -m benchmarks.run format --workloads tabular --mindspore-python /work/msvenv/bin/python

MindSpore is looked for, in this order: ``--mindspore-python PATH``, the environment
variable ``MRECORD_BENCH_MINDSPORE_PYTHON``, then ``import mindspore`` in this interpreter.
Without it, mrecord's numbers are printed alone with a note saying MindSpore was not found.

Each side of each workload runs in its own subprocess (so peak memory is per workload
and a crash on one side cannot take the other down), mrecord first, then MindSpore,
one right after the other, so every ratio comes from the same run on the same machine
state. Results go to ``bench_out/results.json``; raw per-side JSON to ``bench_out/raw/``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import workloads as W

__all__ = ["COMPARISONS", "Comparison", "find_mindspore", "main"]

REPO = Path(__file__).resolve().parent.parent
SUITES: dict[str, tuple[str, ...]] = {
    "format": W.FORMAT_WORKLOADS,
    "pipeline": W.PIPELINE_WORKLOADS,
}
EXTRA_SUITES = {
    "orders": "benchmarks.bench_orders",
    "sink": "benchmarks.bench_sink",
    "memory": "benchmarks.bench_pipeline_memory",
    "convert": "benchmarks.bench_convert",
    "append": "benchmarks.bench_append",
    "ray": "benchmarks.bench_ray",
    "serve": "benchmarks.bench_serve",
    "torch": "benchmarks.bench_torch",
    "gpu": "benchmarks.bench_gpu",
    "beyond_ram": "benchmarks.bench_beyond_ram",
    "serve_beyond_ram": "benchmarks.bench_serve_beyond_ram",
    "peers": "benchmarks.peers",
}
"""Benchmarks written by others with their own output: run as ``python -m MODULE``."""


@dataclass(frozen=True)
class Comparison:
    """One table line: an mrecord metric against a MindSpore metric, with a target ratio.

    ``ms_metric`` None makes an mrecord-only line: mrecord's direct reader APIs
    (``read_rows``, ``read_row``) have no MindSpore counterpart doing the same work (its
    per-row pipeline iterator is not the same work), so they get no ratio and no target.
    """

    suite: str
    metric: str
    label: str
    ms_metric: str | None
    targets: dict[str, float] = field(default_factory=dict)


_ALL = {"images": 5.0, "tabular": 5.0, "varshape": 5.0}
COMPARISONS = [
    Comparison("format", "write_rows", "write, row dicts", "write", {"images": 2, "tabular": 5}),
    Comparison("format", "write_columnar", "write, columnar fast path", "write"),
    Comparison("format", "read_seq_reader", "sequential, reader.read_rows blocks", None),
    Comparison("format", "read_seq", "sequential, MindDataset iterator", "read_seq"),
    Comparison("format", "read_random_row", "random order, reader.read_row", None),
    Comparison(
        "format",
        "read_random",
        "GLOBAL shuffle, MindDataset iterator",
        "read_random",
        {"images": 5.0, "varshape": 10.0, "tabular": 25.0},  # issue 14
    ),
    Comparison("format", "read_random_row_cold", "random order, reader.read_row, first read", None),
    Comparison(
        "format",
        "read_random_cold",
        "GLOBAL shuffle, iterator, first read",
        "read_random",
        {"images": 5.0, "varshape": 10.0, "tabular": 25.0},
    ),
    Comparison("format", "read_batch256", "random batches of 256, reader.read_rows", None),
    Comparison(
        "format", "read_batch256", "random batches of 256, vs MS batch(256)", "read_batch256"
    ),
    Comparison(
        "format", "read_batch256_iter", "GLOBAL shuffle + batch(256) iterator", "read_batch256"
    ),
    Comparison(
        "format", "read_4shards", "GLOBAL shuffle, shard 0 of 4, iterator", "read_4shards", _ALL
    ),
    Comparison("pipeline", "write", "write (mrecord columnar)", "write"),
    Comparison(
        "pipeline",
        "pipeline",
        "pipeline, 2 workers (CIFAR: offload)",
        "pipeline",
        {"cifar": 3, "jpeg": 1.5},
    ),
    Comparison("pipeline", "pipeline_no_offload", "pipeline, 2 workers, no offload", "pipeline"),
]
"""Every line of the tables, in order (the targets come from issues 2, 3, 4 and 14)."""


# --- finding MindSpore ---------------------------------------------------------------------


def find_mindspore(option: str | None) -> tuple[str | None, str]:
    """The interpreter that imports MindSpore, and how it was found (or why not)."""
    candidates: list[tuple[str, str]] = []
    if option:
        candidates.append((option, "--mindspore-python"))
    env = os.environ.get("MRECORD_BENCH_MINDSPORE_PYTHON")
    if env:
        candidates.append((env, "MRECORD_BENCH_MINDSPORE_PYTHON"))
    if importlib.util.find_spec("mindspore") is not None:
        candidates.append((sys.executable, "import mindspore in this interpreter"))
    reasons = []
    for python, source in candidates:
        probe = subprocess.run(
            [python, "-c", "import mindspore, sys; sys.stdout.write(mindspore.__version__)"],
            capture_output=True,
            text=True,
            env=_child_env(),
            check=False,
        )
        if probe.returncode == 0:
            return python, f"MindSpore {probe.stdout.strip()} via {source} ({python})"
        err = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        reasons.append(f"{python} (from {source}) cannot import mindspore: {err}")
    if not candidates:
        reasons.append(
            "set MRECORD_BENCH_MINDSPORE_PYTHON or pass --mindspore-python PATH "
            "(an interpreter whose environment has mindspore installed)"
        )
    return None, "MindSpore not found: " + "; ".join(reasons)


def _child_env(out: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env.setdefault("GLOG_v", "3")  # MindSpore: errors only on stderr
    if out is not None:
        env["MRECORD_BENCH_OUT"] = str(out)
    return env


# --- running one side ---------------------------------------------------------------------


def _run_side(
    python: str, module: str, args: list[str], json_path: Path, out: Path, timeout: float
) -> dict[str, Any]:
    """Run ``python -m module args --json json_path``; its JSON, or an error record."""
    cmd = [python, "-m", module, *args, "--json", str(json_path)]
    json_path.unlink(missing_ok=True)
    try:
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            env=_child_env(out),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s: {shlex.join(cmd)}"}
    if proc.returncode != 0 or not json_path.exists():
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        return {"error": f"exit {proc.returncode}: {shlex.join(cmd)}\n{tail}"}
    result: dict[str, Any] = json.loads(json_path.read_text())
    return result


def _clean(out: Path, workload: str) -> None:
    for sub, prefix in (("mrecord", "mr_"), ("mindspore", "ms_")):
        d = out / sub
        if d.is_dir():
            for f in d.glob(f"{prefix}{workload}*"):
                if f.is_file():
                    f.unlink()


# --- tables -----------------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def limit_for(metric: str) -> str | None:
    """Which physical limit (a key of ``benchmarks.limits.measure_limits``) bounds a metric."""
    if metric.startswith("write"):
        return "fsync_mb_s"
    # Reads: the limit of the same work, the consumer reading one byte per page of what
    # it gets (benchmarks.measure.touch), with no copy (see benchmarks/limits.py).
    if metric.startswith("read_seq"):
        return "touch_scan_gb_s"
    if metric.startswith("read"):
        return "touch_random_gb_s"
    return None


def fraction_of_limit(
    rows_per_s: float | None, mb_per_s: float | None, key: str | None, limits: dict[str, Any]
) -> float | None:
    """A rate as a fraction of the limit ``key`` measured in this run.

    Bandwidth limits compare MiB/s of payload; a random read is also bounded by the
    numpy gather of small rows 256 at a time (``mmap_gather_small_rows_per_s``), so its
    fraction is the larger of the two (its limit the smaller). A limit is the same work
    as the figure it bounds (a read's consumer touches every page it gets, and so does
    the limit), so a fraction over 100% is a measurement error, not a favour.
    """
    if not mb_per_s or key is None or not limits.get(key):
        return None
    scale = 1e9 if key.endswith("gb_s") else 1e6
    fraction = float(mb_per_s * (1 << 20) / (limits[key] * scale))
    small = limits.get("mmap_gather_small_rows_per_s")
    if key == "touch_random_gb_s" and rows_per_s and small:
        fraction = max(fraction, float(rows_per_s / small))
    return fraction


def compare(run: dict[str, Any], limits: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The comparison lines of one workload run (ratios from this run only)."""
    mine = run.get("mrecord", {}).get("metrics", {})
    theirs = run.get("mindspore", {}).get("metrics", {})
    lines = []
    for c in COMPARISONS:
        if c.suite != run["suite"] or c.metric not in mine:
            continue
        m = mine[c.metric]
        t = theirs.get(c.ms_metric) if c.ms_metric else None
        mr = m["rows_per_s"] if not m["extra"].get("error") else None
        tr = t["rows_per_s"] if t and not t["extra"].get("error") else None
        ratio = mr / tr if mr and tr else None
        target = c.targets.get(run["workload"])
        lines.append(
            {
                "metric": c.metric,
                "label": c.label,
                "mrecord_rows_per_s": mr,
                "mrecord_mb_per_s": m["mb_per_s"] if mr else None,
                "mrecord_peak_rss_mb": m["peak_rss_mb"] if mr else None,
                "mrecord_peak_private_mb": m.get("peak_private_mb") if mr else None,
                "mrecord_error": m["extra"].get("error"),
                "mindspore_metric": c.ms_metric,
                "mindspore_rows_per_s": tr,
                "mindspore_peak_rss_mb": t["peak_rss_mb"] if tr and t else None,
                "mindspore_peak_private_mb": t.get("peak_private_mb") if tr and t else None,
                "mindspore_error": t["extra"].get("error") if t else None,
                "ratio": round(ratio, 2) if ratio else None,
                "target": target,
                "met": None if ratio is None or target is None else ratio >= target,
                "limit": limit_for(c.metric),
                "fraction_of_limit": fraction_of_limit(
                    mr, m["mb_per_s"] if mr else None, limit_for(c.metric), limits or {}
                ),
            }
        )
    return lines


def format_table(run: dict[str, Any]) -> str:
    """A plain-text table of one workload run."""
    w = W.get(run["workload"])
    unit = "images/s" if run["suite"] == "pipeline" else "rows/s"
    head = (
        f"== {run['suite']}: {run['workload']} ({run['rows']:,} rows, scale {run['scale']:g}, "
        f"load {run.get('loadavg_1min_at_start', 0):.1f}) "
    )
    lines = [head + "=" * max(0, 100 - len(head)), w.description]
    cols = f"{'step':<42}{'mrecord ' + unit:>17}{'MB/s':>8}{'priv MB':>9}"
    cols += f"  {'MindSpore':<14}{unit:>10}{'priv MB':>9}{'ratio':>8}{'target':>8}{'of limit':>10}"
    lines.append(cols)
    lines_note = "priv MB: peak private (anonymous + shared) memory of the process tree"
    notes = []
    for line in run["comparisons"]:
        status = ""
        if line["met"] is not None:
            status = " ok" if line["met"] else " MISS"
        target = f">={line['target']:g}x" if line["target"] else ""
        ratio = f"{line['ratio']:.2f}x" if line["ratio"] else "-"
        frac = line.get("fraction_of_limit")
        status = (f"{frac:.1%}" if frac is not None else "-").rjust(10) + status
        lines.append(
            f"{line['label']:<42}{_fmt(line['mrecord_rows_per_s']):>17}"
            f"{_fmt(line['mrecord_mb_per_s']):>8}{_fmt(line['mrecord_peak_private_mb']):>9}"
            f"  {line['mindspore_metric'] or '(mrecord only)':<14}"
            f"{_fmt(line['mindspore_rows_per_s']):>10}"
            f"{_fmt(line['mindspore_peak_private_mb']):>9}{ratio:>8}{target:>8}{status}"
        )
        for side in ("mrecord", "mindspore"):
            err = line[f"{side}_error"]
            if err:
                notes.append(f"  {side} {line['metric']}: {err.splitlines()[0][:160]}")
    for side in ("mrecord", "mindspore"):
        if "error" in run.get(side, {}):
            notes.append(f"  {side} run failed: {run[side]['error'][:600]}")
    lines.append(f"({lines_note}; resident totals incl. mmap'd pages in results.json)")
    lines.append(
        "(of limit: mrecord's MB/s as a fraction of this run's physical limit of the same "
        "work: writes of the fsync bandwidth; reads, whose consumer reads one byte per "
        "4 KiB page of what it gets, of touching the pages of a memory map in order (scans) "
        "or of random 100 KB rows, or of numpy's gather of small rows 256 at a time, "
        "whichever is lower; see benchmarks/limits.py)"
    )
    if notes:
        lines.append("errors:")
        lines.extend(sorted(set(notes)))
    return "\n".join(lines)


def _frac(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def markdown_table(run: dict[str, Any]) -> str:
    """One workload run as a Markdown table (for docs/BENCHMARKS.md)."""
    unit = "images/s" if run["suite"] == "pipeline" else "rows/s"
    out = [
        f"**{run['suite']} / {run['workload']}** ({run['rows']:,} rows, "
        f"load {run.get('loadavg_1min_at_start', 0):.1f} at start)",
        "",
        f"| step | mrecord {unit} | private MB | MindSpore step | MindSpore {unit} | private MB "
        "| ratio | target | of limit |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for line in run["comparisons"]:
        mark = {True: " met", False: " **missed**", None: ""}[line["met"]]
        target = f"≥ {line['target']:g}×{mark}" if line["target"] else ""
        ratio = f"{line['ratio']:.2f}×" if line["ratio"] else "–"
        mine = _fmt(line["mrecord_rows_per_s"]) if not line["mrecord_error"] else "error"
        theirs = _fmt(line["mindspore_rows_per_s"]) if not line["mindspore_error"] else "error"
        out.append(
            f"| {line['label']} | {mine} | {_fmt(line['mrecord_peak_private_mb'])} "
            f"| {line['mindspore_metric'] or '(mrecord only)'} | {theirs} "
            f"| {_fmt(line['mindspore_peak_private_mb'])} "
            f"| {ratio} | {target} | {_frac(line.get('fraction_of_limit'))} |"
        )
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help=f"suites to run, from {[*SUITES, *EXTRA_SUITES]} (default: all that exist)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every workload")
    parser.add_argument("--workloads", default="", help="comma-separated subset, e.g. images")
    parser.add_argument("--mindspore-python", default=None, help="interpreter with mindspore")
    parser.add_argument("--no-mindspore", action="store_true", help="run mrecord alone")
    parser.add_argument(
        "--peer-python",
        default=None,
        help="interpreter with the peers (pylance, array-record, datasets, mosaicml-streaming) "
        "for the peers suite (default: MRECORD_BENCH_PEER_PYTHON)",
    )
    parser.add_argument("--max-seconds", type=float, default=30.0, help="cap per read step")
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    parser.add_argument("--keep-data", action="store_true", help="keep the written datasets")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per subprocess")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error(f"--scale must be > 0, got {args.scale!r}")
    bad = [s for s in args.suites if s not in SUITES and s not in EXTRA_SUITES]
    if bad:
        parser.error(f"unknown suites {bad}; choose from {[*SUITES, *EXTRA_SUITES]}")
    only = {w for w in args.workloads.split(",") if w}
    unknown = only - set(W.WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {sorted(W.WORKLOADS)}")

    suites = list(args.suites) or [
        *SUITES,
        *(s for s, mod in EXTRA_SUITES.items() if importlib.util.find_spec(mod) is not None),
    ]
    out: Path = args.out.resolve()
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    if args.no_mindspore:
        ms_python, ms_note = None, "MindSpore skipped (--no-mindspore)"
    else:
        ms_python, ms_note = find_mindspore(args.mindspore_python)
    if args.peer_python:  # benchmarks.peers finds it through the environment
        os.environ["MRECORD_BENCH_PEER_PYTHON"] = args.peer_python
    if ms_python is not None:  # the extra suites (bench_convert) find it through the environment
        os.environ["MRECORD_BENCH_MINDSPORE_PYTHON"] = ms_python
    print(ms_note, flush=True)
    if ms_python is None:
        print("Printing mrecord's numbers alone: the MindSpore columns stay empty.", flush=True)

    report: dict[str, Any] = {
        "command": "python -m benchmarks.run " + shlex.join(sys.argv[1:] if argv is None else argv),
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "scale": args.scale,
        "mindspore": {"python": ms_python, "note": ms_note},
        "runs": [],
        "extra_suites": {},
    }
    common = ["--scale", str(args.scale), "--max-seconds", str(args.max_seconds)]
    if any(suite in SUITES for suite in suites):
        from benchmarks.limits import measure_limits

        print("measuring the physical limits (page cache, memory-map gather, fsync) ...")
        report["limits"] = measure_limits(out, 256)
        print(json.dumps(report["limits"]), flush=True)
    for suite in suites:
        if suite in EXTRA_SUITES:
            extra_args = ["--scale", str(args.scale)] if suite == "peers" else []
            report["extra_suites"][suite] = _run_extra(
                EXTRA_SUITES[suite], args.timeout, extra_args
            )
            continue
        for name in SUITES[suite]:
            if only and name not in only:
                continue
            run: dict[str, Any] = {
                "suite": suite,
                "workload": name,
                "scale": args.scale,
                "rows": W.get(name).num_rows(args.scale),
                "loadavg_1min_at_start": round(os.getloadavg()[0], 2),
            }
            print(f"running {suite}/{name} on mrecord ...", flush=True)
            module = "benchmarks.bench_format" if suite == "format" else "benchmarks.bench_pipeline"
            run["mrecord"] = _run_side(
                sys.executable,
                module,
                [name, *common, "--out-dir", str(out / "mrecord")],
                raw / f"mrecord_{suite}_{name}.json",
                out,
                args.timeout,
            )
            if ms_python is not None:
                print(f"running {suite}/{name} on MindSpore ...", flush=True)
                run["mindspore"] = _run_side(
                    ms_python,
                    "benchmarks.mindspore_side",
                    [suite, name, *common, "--out-dir", str(out / "mindspore")],
                    raw / f"mindspore_{suite}_{name}.json",
                    out,
                    args.timeout,
                )
            if not args.keep_data:
                _clean(out, name)
            run["comparisons"] = compare(run, report.get("limits"))
            report["runs"].append(run)
            print(format_table(run), "\n", flush=True)
            _save(report, out)
    report["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    _save(report, out)
    md = [f"`{report['command']}` ({report['started']}; {report['mindspore']['note']})", ""]
    if "limits" in report:
        md += ["Physical limits measured in this run: "
               + ", ".join(f"{k} {v}" for k, v in report["limits"].items()), ""]
    md += [markdown_table(run) + "\n" for run in report["runs"]]
    (out / "results.md").write_text("\n".join(md))
    print(f"results: {out / 'results.json'} (Markdown tables: {out / 'results.md'})")
    return 0


def _run_extra(module: str, timeout: float, extra_args: list[str] | None = None) -> dict[str, Any]:
    """Run another engineer's benchmark module as is; keep its output."""
    if importlib.util.find_spec(module) is None:
        return {"error": f"{module} does not exist yet"}
    print(f"running {module} ...", flush=True)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *(extra_args or [])],
            cwd=REPO,
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    print(proc.stdout, flush=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], flush=True)
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:]}


def _save(report: dict[str, Any], out: Path) -> None:
    tmp = out / "results.json.partial"
    tmp.write_text(json.dumps(report, indent=1))
    shutil.move(str(tmp), str(out / "results.json"))


if __name__ == "__main__":
    sys.exit(main())
