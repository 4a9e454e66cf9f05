"""Kill a conversion, resume it, and compare with an uninterrupted one, byte for byte.

The worker (``python -m reliability.convert_crash KIND SRC DST WORKERS RESUME KILL``)
converts ``SRC`` with fixed options and a fixed dataset id (:data:`DATASET_ID`), so
two runs are byte-comparable, checkpointing after every batch that wrote a page.
``KILL`` says where it SIGKILLs itself:

    none              run to the end
    rows:N            once N rows were written (between two batches)
    step:NAME:K       at the K-th checkpoint step NAME (mrecord.writer.resume.CHECKPOINT_STEPS)
    commit:NAME       at the commit step NAME (mrecord.storage.commit.crash_hook)

The parent may also kill it at a random instant (:func:`run_worker` with ``delay``).
After a kill, :func:`visible_files` must show no dataset file (unless the commit got
past its commit point, when the dataset must be complete), and a run with
``RESUME=1`` must leave exactly the files of an uninterrupted run
(:func:`dataset_bytes`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from mrecord.writer.resume import RESUME_SUFFIX

__all__ = [
    "DATASET_ID",
    "dataset_bytes",
    "make_image_folder",
    "make_npz",
    "run_worker",
    "visible_files",
]

DATASET_ID = "c0" * 16
SHARDS = 2
PAGE_SIZE = 4096
BATCH_ROWS = 13


def make_image_folder(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` small JPEGs in three classes under ``root`` (one of them a PNG)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n):
        folder = root / f"class{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        size = (int(rng.integers(8, 40)), int(rng.integers(8, 40)))
        pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        ext = "png" if i % 17 == 0 else "jpg"
        Image.fromarray(pixels).save(folder / f"{i:05d}.{ext}")
    return root


def make_npz(path: Path, n: int, seed: int = 0) -> Path:
    """An .npz of ``n`` rows: a vector, a label and a variable-length blob per row."""
    rng = np.random.default_rng(seed)
    np.savez(
        path,
        vec=rng.standard_normal((n, 16)).astype(np.float32),
        label=rng.integers(0, 10, n).astype(np.int64),
    )
    return path


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install(kill: str) -> None:
    """Arrange for this process to SIGKILL itself where ``kill`` says."""
    from mrecord.storage import commit
    from mrecord.writer import resume

    what, _, arg = kill.partition(":")
    if what == "step":
        name, _, count = arg.partition(":")
        seen = {"n": 0}

        def at_step(step: str) -> None:
            if step == name:
                seen["n"] += 1
                if seen["n"] == int(count):
                    _kill_self()

        resume.crash_hook = at_step
    elif what == "commit":

        def at_commit(step: str) -> None:
            if step == arg:
                _kill_self()

        commit.crash_hook = at_commit


def main(argv: list[str]) -> None:
    """The worker (see the module docstring)."""
    from mrecord.convert import SOURCES, WriteOptions, write_source

    kind, src, dst, workers, resume, kill = argv
    _install(kill)
    limit = int(kill.partition(":")[2]) if kill.startswith("rows:") else None
    written = {"n": 0}

    def progress(n: int) -> None:
        written["n"] += n
        if limit is not None and written["n"] >= limit:
            _kill_self()

    options = WriteOptions(
        shard_num=SHARDS,
        page_size=PAGE_SIZE,
        batch_rows=BATCH_ROWS,
        workers=int(workers),
        resume=resume == "1",
        checkpoint_bytes=1,
    )
    with SOURCES[kind](src) as source:
        summary = write_source(source, dst, options, progress=progress, dataset_id=DATASET_ID)
    print(f"DONE {summary.rows} {summary.resumed_at_row}", flush=True)


def run_worker(
    kind: str,
    src: Path,
    dst: Path,
    *,
    workers: int = 1,
    resume: bool = False,
    kill: str = "none",
    delay: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the worker; with ``delay``, SIGKILL it that many seconds after it started."""
    cmd = [sys.executable, "-m", "reliability.convert_crash", kind, str(src), str(dst)]
    cmd += [str(workers), "1" if resume else "0", kill]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        out, err = proc.communicate(timeout=delay if delay is not None else 300)
    except subprocess.TimeoutExpired:
        # Kill the whole group of the worker's children too (the converter's processes).
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def visible_files(dst: Path) -> list[str]:
    """The dataset's own names that exist (data and .db files, not temporaries)."""
    names = [f"{dst.name}{i}" for i in range(SHARDS)]
    return sorted(
        p.name for n in names for p in (dst.with_name(n), dst.with_name(n + ".db")) if p.exists()
    )


def dataset_bytes(dst: Path, *, checkpoint_left: bool = False) -> dict[str, bytes]:
    """Every file the dataset ``dst`` consists of, by name, with its bytes; fails on
    leftovers (partial files, the resume sidecar unless ``checkpoint_left``: a kill after
    the publish and before the process removed it)."""
    folder = dst.parent
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith(dst.name))
    allowed = {*visible_files(dst), f"{dst.name}.mrecord-lock"}
    if checkpoint_left:
        allowed.add(f"{dst.name}{RESUME_SUFFIX}")
    leftovers = [n for n in names if n not in allowed]
    if leftovers:
        raise AssertionError(f"leftover files next to {dst}: {leftovers}")
    return {n: (folder / n).read_bytes() for n in visible_files(dst)}


if __name__ == "__main__":
    main(sys.argv[1:])
