"""Where an I/O-bound conversion's time goes: its phases timed apart, cold.

Run ``python -m benchmarks.convert_phases [--folder F] [--workers N]`` (root: it drops
the page cache) on a folder made by ``benchmarks.bench_convert``. Prints, each from a
cold cache: listing the folder, its resume key (the listing's digest), the source alone
(files read and checked, the batches kept in memory), the source again while another
thread holds the GIL half the time (``--gil-hog``: what the writer's encoding does to
it), the writer alone (those batches written to durable), and the whole conversion in
this process. The sum of the parts against the whole says how much the reading and the
writing overlap.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_convert import drop_caches


def _clean(dst: Path) -> None:
    for p in dst.parent.glob(dst.name + "*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()


@contextlib.contextmanager
def gil_hog(busy_ms: float = 20.0) -> Iterator[None]:
    """A thread that holds the GIL for ``busy_ms`` (CRC-32C of 100 KB buffers, the
    GIL kept, as the writer's checksums do), then sleeps as long, until the block ends."""
    import crc32c

    stop = threading.Event()
    data = os.urandom(100_000)

    def hog() -> None:
        while not stop.is_set():
            until = time.perf_counter() + busy_ms / 1000
            while time.perf_counter() < until:
                crc32c.crc32c(data, 0, 0)
            time.sleep(busy_ms / 1000)

    thread = threading.Thread(target=hog, name="gil-hog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def main(argv: list[str] | None = None) -> int:
    """Print the phases (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/mrecord-bench-jpegs-20000"))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench_out/phases"))
    parser.add_argument(
        "--gil-hog",
        action="store_true",
        help="also time the source while a thread holds the GIL 20 ms of every 40",
    )
    args = parser.parse_args(argv)
    from mrecord.convert import convert_imagefolder
    from mrecord.convert.imagefolder import ImageFolderSource
    from mrecord.convert.parallel import run_plan
    from mrecord.rawdata.imagefolder import walk_image_folder
    from mrecord.writer.file_writer import FileWriter

    args.out.mkdir(parents=True, exist_ok=True)
    dst = args.out.resolve() / "phases.mrecord"
    total = sum(p.stat().st_size for p in args.folder.rglob("*.jpg"))
    print(f"{args.folder}: {total / 1e6:,.0f} MB; workers {args.workers}; cores {os.cpu_count()}")

    clock = [os.times()]

    def phase(label: str, seconds: float) -> None:
        # CPU seconds of this process since the last phase (user + system).
        now = os.times()
        used = (now.user - clock[0].user) + (now.system - clock[0].system)
        clock[0] = now
        print(
            f"{label:44} {seconds:7.2f} s {total / seconds / 1e6:8,.0f} MB/s  cpu {used:5.2f} s",
            flush=True,
        )

    drop_caches()
    t = time.perf_counter()
    walk_image_folder(args.folder)
    phase("list the folder", time.perf_counter() - t)
    listed = ImageFolderSource(args.folder)
    t = time.perf_counter()
    listed.fingerprint()  # the listing's digest: the files' stats are taken as they are read
    phase("resume key (after the listing)", time.perf_counter() - t)

    drop_caches()
    clock[0] = os.times()
    source = ImageFolderSource(args.folder)
    t = time.perf_counter()
    batches = [b for _i, b in run_plan(source.plan(), workers=args.workers) if b]
    phase("source alone (list, read, check)", time.perf_counter() - t)

    if args.gil_hog:  # batches dropped as they come: only the reading and the checks
        for hog in (False, True):
            drop_caches()
            clock[0] = os.times()
            with gil_hog() if hog else contextlib.nullcontext():
                t = time.perf_counter()
                for _ in run_plan(source.plan(), workers=args.workers):
                    pass
                label = "GIL held half the time elsewhere" if hog else "batches dropped"
                phase(f"source, {label}", time.perf_counter() - t)

    _clean(dst)
    drop_caches()
    clock[0] = os.times()
    t = time.perf_counter()
    with FileWriter(str(dst), shard_num=1, overwrite=True) as writer:
        writer.add_schema(source.schema)
        writer.add_index(list(source.index_fields))
        for b in batches:
            writer.write_raw_data(b)
    os.sync()
    phase("writer alone, from memory, to durable", time.perf_counter() - t)
    del batches

    _clean(dst)
    drop_caches()
    clock[0] = os.times()
    t = time.perf_counter()
    convert_imagefolder(args.folder, dst, workers=args.workers, overwrite=True)
    os.sync()
    phase("whole conversion, in this process", time.perf_counter() - t)
    _clean(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
