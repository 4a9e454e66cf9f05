"""Append cost against dataset size (issue 15): time and bytes written for 1,000 new rows.

Run ``python -m benchmarks.bench_append [--sizes 100M,1G,4G] [--old-src DIR]
[--mindspore-python PATH]``. For each size it builds a one-shard dataset of rows of
10 KiB of random bytes plus an indexed ``id`` (``bench_out/append/``), then times, each
in its own subprocess so ``/proc/self/io`` counts that append alone:

- ``mrecord``: ``FileWriter.open_for_append`` + ``write_raw_data`` (1,000 rows) + ``commit``;
- ``old``: the same with the mrecord found in ``--old-src`` (a checkout of an older
  commit, e.g. ``git worktree add /tmp/old 84c8ac4``), on the same files;
- ``mindspore``: MindSpore's ``FileWriter.open_for_append`` on a MindRecord file of
  the same rows written by MindSpore itself, when ``--mindspore-python`` is given
  (or ``MRECORD_BENCH_MINDSPORE_PYTHON`` is set).

``write_bytes`` is what the kernel sent (or will send) to the disk for the process,
``wchar`` the bytes passed to ``write``-like calls; both should stay flat with size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path("bench_out/append")
ROW_BYTES = 10 * 1024
APPEND_ROWS = 1000
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_MEASURE = """
import json, os, sys, time
def io():
    d = dict(l.split(": ") for l in open("/proc/self/io").read().splitlines())
    return int(d["write_bytes"]), int(d["wchar"])
import numpy as np
rng = np.random.default_rng(1)
rows = [{"id": 10**9 + i, "payload": rng.bytes(__ROW_BYTES__)} for i in range(__N__)]
w0, c0 = io(); t0 = time.perf_counter()
__BODY__
t = time.perf_counter() - t0; w1, c1 = io()
print(json.dumps({"seconds": t, "write_bytes": w1 - w0, "wchar": c1 - c0}))
"""

_APPEND_MRECORD = """
import mrecord
print("mrecord from", mrecord.__file__, file=sys.stderr)
from mrecord import FileWriter
w = FileWriter.open_for_append(__PATH__)
w.write_raw_data(rows)
w.commit()
"""

_APPEND_MINDSPORE = """
from mindspore.mindrecord import FileWriter
w = FileWriter.open_for_append(__PATH__)
w.write_raw_data(rows)
w.commit()
"""

_BUILD_MINDSPORE = """
import numpy as np
from mindspore.mindrecord import FileWriter
w = FileWriter(__PATH__, shard_num=1, overwrite=True)
w.add_schema({"id": {"type": "int64"}, "payload": {"type": "bytes"}}, "bench")
w.add_index(["id"])
rng = np.random.default_rng(0)
done = 0
while done < __ROWS__:
    n = min(2000, __ROWS__ - done)
    w.write_raw_data([{"id": done + i, "payload": rng.bytes(__ROW_BYTES__)} for i in range(n)])
    done += n
w.commit()
"""


def parse_size(text: str) -> int:
    """``100M`` -> bytes."""
    return int(float(text[:-1]) * _UNITS[text[-1].upper()]) if text[-1].isalpha() else int(text)


def build_mrecord(path: Path, size: int) -> int:
    """A one-shard dataset of about ``size`` bytes; kept between runs. Returns its rows."""
    from mrecord import FileWriter

    rows = size // ROW_BYTES
    if path.exists():
        return rows
    rng = np.random.default_rng(0)
    with FileWriter(path, overwrite=True) as writer:
        writer.add_schema({"id": {"type": "int64"}, "payload": {"type": "bytes"}})
        writer.add_index(["id"])
        done = 0
        while done < rows:
            n = min(5000, rows - done)
            payload = rng.bytes(n * ROW_BYTES)
            writer.write_raw_data(
                {
                    "id": np.arange(done, done + n),
                    "payload": [payload[i * ROW_BYTES : (i + 1) * ROW_BYTES] for i in range(n)],
                }
            )
            done += n
    return rows


def _snippet(body: str, **values: Any) -> str:
    code = textwrap.dedent(_MEASURE).replace("__BODY__", textwrap.dedent(body).strip())
    for key, value in values.items():
        code = code.replace(f"__{key}__", repr(value))
    return code.replace("__ROW_BYTES__", str(ROW_BYTES)).replace("__N__", str(APPEND_ROWS))


def measure(python: str, code: str, pythonpath: str | None = None) -> dict[str, Any]:
    """Run one append snippet in a fresh interpreter; its JSON line."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    os.sync()  # the dataset just built is still being written back: let it land first
    # Run outside the checkout: a "-c" script puts its working folder first on sys.path,
    # which would shadow the --old-src mrecord with this one.
    proc = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
        cwd=OUT.resolve(),
    )
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    """Build each size, append to it with each side, print a table and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100M,1G", help="dataset sizes, e.g. 100M,1G,4G")
    parser.add_argument("--old-src", default=None, help="a checkout of an older mrecord")
    parser.add_argument(
        "--mindspore-python", default=os.environ.get("MRECORD_BENCH_MINDSPORE_PYTHON")
    )
    parser.add_argument("--keep", action="store_true", help="keep the datasets afterwards")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for text in args.sizes.split(","):
        size = parse_size(text)
        folder = OUT / text
        folder.mkdir(exist_ok=True)
        path = (folder / "data").resolve()
        t0 = time.perf_counter()
        rows = build_mrecord(path, size)
        row: dict[str, Any] = {"size": text, "file_bytes": path.stat().st_size, "rows": rows}
        row["build_seconds"] = round(time.perf_counter() - t0, 1)
        row["mrecord"] = measure(sys.executable, _snippet(_APPEND_MRECORD, PATH=str(path)))
        if args.old_src:
            row["old"] = measure(
                sys.executable, _snippet(_APPEND_MRECORD, PATH=str(path)), args.old_src
            )
        if args.mindspore_python:
            ms_path = (folder / "data.mindrecord").resolve()
            if not ms_path.exists():
                build = _BUILD_MINDSPORE.replace("__PATH__", repr(str(ms_path)))
                build = build.replace("__ROW_BYTES__", str(ROW_BYTES))
                build = build.replace("__ROWS__", str(rows))
                subprocess.run([args.mindspore_python, "-c", build], check=True, timeout=3600)
            row["mindspore"] = measure(
                args.mindspore_python, _snippet(_APPEND_MINDSPORE, PATH=str(ms_path))
            )
        results.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(folder)
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n{'size':>6} {'side':>10} {'seconds':>8} {'write_bytes':>12} {'wchar':>12}")
    for row in results:
        for side in ("mrecord", "old", "mindspore"):
            m = row.get(side)
            if m and "seconds" in m:
                print(
                    f"{row['size']:>6} {side:>10} {m['seconds']:8.3f} "
                    f"{m['write_bytes']:12,} {m['wchar']:12,}"
                )
            elif m:
                print(f"{row['size']:>6} {side:>10} failed: {m['error']}")


if __name__ == "__main__":
    main()
