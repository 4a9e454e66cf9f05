"""The Ray sink when its driver dies mid-commit: SIGKILL the driver at every commit step.

    .venv/bin/python -m reliability.ray_sweep

A dataset of ``PREVIOUS`` rows (1, 2 or 3 shards) lies at the path; a second driver
overwrites it with ``write_mrecord`` (2 shards, 60 rows) and SIGKILLs itself at a step
of its publish: ``ray_assembled`` (shards built, no journal), then every ``crash_hook``
step of the journaled commit. Afterwards:

- before the journal, the previous dataset reads whole; after it, the new one does
  (the first reader rolls it forward), and ``verify`` passes;
- the next ``write_mrecord`` to the path succeeds and leaves no staging, partial or
  journal file; whatever the killed driver published is either the new dataset or gone.

Prints one line per case and what files were left in the folder, and exits 1 on any
violation. Needs ``mrecord[ray]``; starts a local Ray cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_DRIVER = """
import os, signal, sys
import ray
from mrecord.ray import write_mrecord
from mrecord.storage import commit

seen = {}
def crash(step):
    seen[step] = seen.get(step, 0) + 1
    if f"{step}:{seen[step]}" == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)

commit.crash_hook = crash
ray.init(address=sys.argv[1], log_to_driver=False)
ds = ray.data.from_items([{"id": i} for i in range(60)], override_num_blocks=3)
write_mrecord(ds, sys.argv[2], schema={"id": {"type": "int64"}}, shard_num=2, overwrite=True)
"""

POINTS = [
    "ray_assembled:1",
    "journal:1",
    *(f"renamed_one:{k}" for k in range(1, 5)),
    "renamed_all:1",
]


def _previous(path: Path, shards: int) -> None:
    from mrecord.writer.file_writer import FileWriter

    with FileWriter(path, shard_num=shards, overwrite=True) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data([{"id": 1000 + i} for i in range(10)])


def _ids(first: Path) -> list[int]:
    from mrecord.maintenance.verify import verify_dataset
    from mrecord.reader.dataset_reader import DatasetReader

    with DatasetReader.open(first) as reader:
        ids = sorted(int(r["id"]) for r in reader.iter_rows())
    report = verify_dataset(first)
    if not report.ok:
        raise AssertionError(f"verify: {report.problems}")
    return ids


def case(address: str, folder: Path, point: str, previous: int) -> list[str]:
    """One kill; returns the files left after the next write (the check raises on loss)."""
    import ray.data

    from mrecord.ray import write_mrecord
    from mrecord.storage.naming import shard_file_names

    path = folder / "d.mrecord"
    _previous(path, previous)
    old = [1000 + i for i in range(10)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, address, str(path), point],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    if proc.returncode != -9:
        raise AssertionError(f"driver not killed at {point}: {proc.stderr[-2000:]}")
    new_first = shard_file_names(path, 2)[0]
    if point.startswith("ray_assembled"):
        got = _ids(shard_file_names(path, previous)[0])
        if got != old:
            raise AssertionError(f"previous dataset changed: {got[:10]}")
    else:
        got = _ids(new_first)
        if got != list(range(60)):
            raise AssertionError(f"new dataset not whole: {got[:10]}")
    again = ray.data.from_items([{"id": 7}])
    write_mrecord(again, path, schema={"id": {"type": "int64"}}, shard_num=2, overwrite=True)
    if _ids(new_first) != [7]:
        raise AssertionError("the next write did not replace the dataset")
    left = sorted(p.name for p in folder.iterdir())
    temps = [n for n in left if "partial" in n or "journal" in n or ".ray-" in n]
    if temps:
        raise AssertionError(f"temporary files left after the next write: {temps}")
    return left


def main(argv: list[str] | None = None) -> int:
    """Run every case (or those named); returns the exit status."""
    import argparse

    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--points", nargs="+", default=POINTS)
    args = parser.parse_args(argv)
    ray.init(num_cpus=2, log_to_driver=False, include_dashboard=False)
    address = ray.get_runtime_context().gcs_address
    bad = 0
    try:
        for previous in args.previous:
            for point in args.points:
                with tempfile.TemporaryDirectory(prefix="mrecord-ray-sweep-") as tmp:
                    try:
                        left = case(address, Path(tmp), point, previous)
                        print(f"previous {previous} shards, killed at {point:16} OK  left {left}")
                    except AssertionError as exc:
                        bad += 1
                        print(f"previous {previous} shards, killed at {point:16} FAIL {exc}")
                    sys.stdout.flush()
    finally:
        ray.shutdown()
    print(f"{len(args.previous) * len(args.points)} kills, {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
