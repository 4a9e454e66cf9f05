"""Conversion throughput: an ImageFolder of ~100 KB JPEGs, cold, to durable (issue 24).

Run ``python -m benchmarks.bench_convert [--images N] [--quick] [--workers N]``
(root: it drops the page cache). The source, ``--images`` JPEGs of about 100 KB in
10 class folders, is generated once into ``/tmp/mrecord-bench-jpegs-N`` and reused.
Each timed run starts with a cold source cache (``sync``; ``echo 1 >
/proc/sys/vm/drop_caches``, then ``--settle`` seconds of quiet disk, default 3) and ends
when its output is durable (the writer's own fsyncs, then ``os.sync()``), timed from
outside, process start included:

- ``mrecord convert imagefolder`` at 1 worker (serial) and at ``--workers`` (default:
  cores; the image check runs in threads);
- MindSpore's ``FileWriter`` loop from its documentation (read each file, a row dict
  per image, ``write_raw_data`` every 1,000 rows, ``commit``), in MindSpore's own
  interpreter (``benchmarks.run.find_mindspore``; "not installed" when none);
- the same with ``--check-images none`` (files stored unread, as MindSpore's loop does)
  and with ``--check-images decode`` (every JPEG decoded at 1/8 scale: CPU-bound, threads);
- ``--resize 64x64`` (CPU-bound) on the first ``--resize-images`` files at 1 and 2
  workers (serial, then 2 processes), for the scaling;

beside the limits measured in the same run: a durable sequential write of as many bytes
(``benchmarks.bench_write_durable.disk_limit``) and a cold read of the source files (the
faster of 8 threads and one thread keeping 64 files in flight with ``POSIX_FADV_WILLNEED``).
The source and the output share one disk, so a conversion's limit is the better of the
two added (every byte read, then written: ``1 / (1/read + 1/write)``) and of both at once
(the cold read in one thread while another writes as many bytes ``O_DIRECT`` to durable,
timed together: what the device does when a conversion overlaps them; on this machine's
virtual disk 4.1 s against 2.5 + 2.1 s apart). ``--curve`` also times a minimal
read-then-write pipeline (:func:`pipeline_seconds`: one thread reads the files 64 ahead,
the main thread copies them into 8 MiB buffers written ``O_DIRECT``, one ``fsync``): a
conversion without parsing, encoding or checksums, which, unlike "both at once", can
write a byte only after reading it. Rows/s and MB/s (source bytes per
second). ``--many-small N`` instead times the default conversion of N files of ~1.5 KB
(``/tmp/mrecord-bench-small-N``) beside a cold read of the same files, listed then read
one thread 64 ahead: for small files the limit is the files' reads, one request and a
handful of system calls each, not the bytes. The machine may be shared: compare ratios
from one run. ``--classic`` runs
the older table (CIFAR-10, a small image folder, MindRecord import; warm cache, library
calls).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_write_durable import disk_limit
from mrecord.convert import convert_cifar10, convert_imagefolder, convert_mindrecord

OUT = Path("bench_out/convert")


def make_cifar(root: Path, records_per_file: int) -> int:
    """Five ``data_batch_N.bin`` files of ``records_per_file`` records (1 label + 3072 pixels)."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        path = root / f"data_batch_{i}.bin"
        labels = rng.integers(0, 10, (records_per_file, 1), dtype=np.uint8)
        pixels = rng.integers(0, 256, (records_per_file, 3072), dtype=np.uint8)
        path.write_bytes(np.concatenate([labels, pixels], axis=1).tobytes())
    return 5 * records_per_file


def make_folder(root: Path, images: int) -> int:
    """``images`` JPEGs (64x64, quality 90) in 10 class folders; kept between runs."""
    from PIL import Image

    if root.exists() and sum(1 for _ in root.rglob("*.jpg")) == images:
        return images
    rng = np.random.default_rng(1)
    for i in range(images):
        folder = root / f"class_{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, 3)
        ramp = np.linspace(0, 60, 64, dtype=np.float32)
        pixels = (base + ramp[:, None, None] + ramp[None, :, None]).clip(0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
    return images


MINDSPORE_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from mindspore.mindrecord import FileWriter
    path, rows = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(2)
    w = FileWriter(path, shard_num=1, overwrite=True)
    w.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"},
                  "name": {"type": "string"}, "box": {"type": "float32", "shape": [-1, 4]}})
    batch = []
    for i in range(rows):
        batch.append({"image": rng.bytes(3072), "label": i % 10, "name": f"img_{i}",
                      "box": rng.random((1 + i % 3, 4), dtype=np.float32)})
        if len(batch) == 1000:
            w.write_raw_data(batch); batch = []
    if batch:
        w.write_raw_data(batch)
    w.commit()
    """
)


def classic(args: argparse.Namespace) -> int:
    """The issue-6 table: CIFAR-10, a small image folder, MindRecord import (warm cache)."""
    OUT.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, int, float]] = []

    n = make_cifar(OUT / "cifar", max(1, int(10_000 * args.scale)))
    cases: list[tuple[str, dict[str, Any]]] = [
        ("cifar10 -> 1 shard", {}),
        ("cifar10 -> 4 shards", {"shard_num": 4}),
    ]
    for label, options in cases:
        summary = convert_cifar10(OUT / "cifar", OUT / "cifar.mrecord", overwrite=True, **options)
        results.append((label, summary.rows, summary.seconds))
    assert summary.rows == n

    images = make_folder(OUT / "folder", max(10, int(5_000 * args.scale)))
    summary = convert_imagefolder(OUT / "folder", OUT / "folder.mrecord", overwrite=True)
    results.append((f"imagefolder ({images} JPEGs)", summary.rows, summary.seconds))

    from benchmarks.run import find_mindspore

    python, why = find_mindspore(args.mindspore_python)
    if python is not None:
        rows = max(100, int(50_000 * args.scale))
        source = OUT / "ms.mindrecord"
        start = time.perf_counter()
        subprocess.run([python, "-c", MINDSPORE_WRITER, str(source), str(rows)], check=True)
        written = time.perf_counter() - start
        summary = convert_mindrecord(source, OUT / "imported.mrecord", overwrite=True)
        results.append(
            (f"mindrecord import ({rows} rows by MindSpore)", summary.rows, summary.seconds)
        )
        results.append(("  (MindSpore writing that source)", rows, written))
    else:
        print(f"MindRecord import skipped: {why}")

    print(f"{'conversion':48} {'rows':>8} {'seconds':>8} {'rows/s':>10}")
    for label, count, seconds in results:
        print(f"{label:48} {count:8,} {seconds:8.2f} {count / seconds:10,.0f}")
    return 0


JPEG_SIDE = 320  # a 320x320 RGB JPEG of the pattern below at quality 95 is ~100 KB
MS_LOOP = textwrap.dedent(
    """
    import os, sys
    from mindspore.mindrecord import FileWriter
    src, dst = sys.argv[1], sys.argv[2]
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    writer = FileWriter(file_name=dst, shard_num=1, overwrite=True)
    writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"},
                       "file_name": {"type": "string"}}, "imagefolder")
    writer.add_index(["label"])
    rows = []
    for label, name in enumerate(classes):
        folder = os.path.join(src, name)
        for file in sorted(os.listdir(folder)):
            with open(os.path.join(folder, file), "rb") as f:
                rows.append({"image": f.read(), "label": label, "file_name": name + "/" + file})
            if len(rows) == 1000:
                writer.write_raw_data(rows)
                rows = []
    if rows:
        writer.write_raw_data(rows)
    writer.commit()
    os.sync()
    """
)


def _jpeg_range(root: Path, first: int, stop: int) -> None:
    """Write JPEGs ``first`` to ``stop - 1`` of the benchmark folder (one process's share)."""
    from PIL import Image

    ramp = np.linspace(0, 120, JPEG_SIDE, dtype=np.float32)
    for i in range(first, stop):
        # one generator per image: the files do not depend on how the work was split
        rng = np.random.default_rng((7, i))
        noise = 50 * rng.standard_normal((JPEG_SIDE, JPEG_SIDE, 3), dtype=np.float32)
        base = rng.integers(0, 120, 3).astype(np.float32)
        pixels = base + ramp[:, None, None] + ramp[None, :, None] + noise
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(
            root / f"class_{i % 10}" / f"{i:06d}.jpg", quality=95
        )


def make_jpegs(root: Path, images: int) -> int:
    """``images`` JPEGs of about 100 KB in 10 class folders (kept between runs; generated
    by one process per core); total bytes."""
    from concurrent.futures import ProcessPoolExecutor

    done = root / ".complete"
    if not done.exists():
        for c in range(10):
            (root / f"class_{c}").mkdir(parents=True, exist_ok=True)
        step = 250
        with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
            for f in [
                pool.submit(_jpeg_range, root, a, min(a + step, images))
                for a in range(0, images, step)
            ]:
                f.result()
        done.write_text(str(images))
    return sum(p.stat().st_size for p in root.rglob("*.jpg"))


SMALL_SIDE = 32  # the --many-small images: 32x32, ~1.5 KB each


def make_small_jpegs(root: Path, images: int) -> int:
    """``images`` JPEGs of ~1.5 KB in 10 class folders (kept between runs): 64 distinct
    images written again and again, so generating a million takes a minute; total bytes."""
    import io

    from PIL import Image

    done = root / ".complete"
    if not done.exists():
        rng = np.random.default_rng(0)
        blobs = []
        for _ in range(64):
            pixels = rng.integers(0, 256, (SMALL_SIDE, SMALL_SIDE, 3), dtype=np.uint8)
            out = io.BytesIO()
            Image.fromarray(pixels).save(out, "JPEG", quality=90)
            blobs.append(out.getvalue())
        for i in range(images):
            folder = root / f"class_{i % 10}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:07d}.jpg").write_bytes(blobs[i % 64])
        done.write_text(str(images))
    return sum(p.stat().st_size for p in root.rglob("*.jpg"))


def _listed(root: Path) -> list[str]:
    """Every file under ``root``, folders and names sorted: ``os.walk`` and text paths
    (pathlib's ``rglob`` took 2.4-3.4 s for 200,000 files, the reads 3)."""
    paths: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        paths.extend(os.path.join(folder, name) for name in sorted(files) if name[0] != ".")
    return paths


def many_small(args: argparse.Namespace) -> int:
    """``--many-small N``: the default conversion of N small files, cold, to durable,
    each round beside the cold read of the same files (listed, then read one thread 64
    ahead): for small files the limit is the files' reads, not the bytes."""
    src = args.source_dir / f"mrecord-bench-small-{args.many_small}"
    nbytes = make_small_jpegs(src, args.many_small)
    args.out.mkdir(parents=True, exist_ok=True)
    dst = args.out.resolve() / "small.mrecord"
    print(
        f"source: {src} ({args.many_small:,} JPEGs of {SMALL_SIDE}x{SMALL_SIDE}, "
        f"{nbytes / args.many_small:,.0f} bytes avg); cold cache, timed to durable"
    )
    print(
        f"{'round':>5} {'read limit s':>12} {'files/s':>9} {'convert s':>10} {'files/s':>9} "
        f"{'of limit':>8}"
    )
    shares = []
    for round_ in range(1, args.rounds + 1):
        drop_caches()
        start = time.perf_counter()
        read_ahead_64(_listed(src))
        limit = time.perf_counter() - start
        took = timed(mrecord_cmd(src, dst, 1), dst)
        shares.append(limit / took)
        print(
            f"{round_:5} {limit:12.2f} {args.many_small / limit:9,.0f} {took:10.2f} "
            f"{args.many_small / took:9,.0f} {limit / took:8.0%}"
        )
    clean(dst)
    print(f"of the limit: median {statistics.median(shares):.0%} over {len(shares)} round(s)")
    return 0


def subset(root: Path, images: int, out: Path) -> Path:
    """The first ``images`` files of ``root`` (hard links, same layout) under ``out``."""
    if not (out / ".complete").exists():
        files = sorted(root.rglob("*.jpg"), key=lambda p: p.name)[:images]
        for f in files:
            target = out / f.parent.name / f.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(f, target)
        (out / ".complete").write_text(str(images))
    return out


SETTLE_SECONDS = 3.0
"""Seconds of quiet after the write-back, before each timed step (``--settle``): a step
that followed the removal of the last one's 10 GB output ran slower with the same code
(100,000 images, the same conversion twice in a row: 79% then 67% of the limit; 90%
then 71% in the next round)."""


def drop_caches() -> bool:
    """Write back and drop the page cache, then let the disk settle (``SETTLE_SECONDS``);
    False when the cache cannot be dropped (not root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError:
        return False
    finally:
        time.sleep(SETTLE_SECONDS)
    return True


def clean(dst: Path) -> None:
    """Remove the dataset ``dst`` (every file starting with its name)."""
    for p in dst.parent.glob(dst.name + "*"):
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def cold_read_seconds(src: Path, threads: int = 8) -> float:
    """Seconds to read every file of ``src`` from a cold cache, the faster of two ways:
    ``threads`` threads each reading a file, and one thread reading each file while
    ``POSIX_FADV_WILLNEED`` keeps the next 64 in flight (on this 2-core machine the
    second read 2x faster with a fifth of the CPU). The source side's limit: a
    conversion reads each file once, then writes it."""
    from concurrent.futures import ThreadPoolExecutor

    files = sorted(src.rglob("*.jpg"))
    drop_caches()
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(Path.read_bytes, files, chunksize=64):
            pass
    threaded = time.perf_counter() - start

    drop_caches()
    start = time.perf_counter()
    read_ahead_64(files)
    return min(threaded, time.perf_counter() - start)


def read_ahead_64(
    files: Sequence[str | os.PathLike[str]], use: Callable[[bytes], object] | None = None
) -> None:
    """Read every file in turn while ``POSIX_FADV_WILLNEED`` keeps the next 64 in flight,
    each file opened once (advised, then read through the same descriptor: 1.9 s for
    the 20,000 files where opening twice and ``Path.read_bytes`` took 2.5 s); each file's
    bytes go to ``use`` (default: dropped)."""
    opened: collections.deque[int] = collections.deque()

    def advise(path: str | os.PathLike[str]) -> None:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        opened.append(fd)

    for f in files[:64]:
        advise(f)
    for i in range(len(files)):
        if i + 64 < len(files):
            advise(files[i + 64])
        fd = opened.popleft()
        try:
            data = os.read(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        if use is not None:
            use(data)


def timed(cmd: list[str], dst: Path, env: dict[str, str] | None = None) -> float:
    """Seconds from a cold cache to ``cmd``'s output durable."""
    clean(dst)
    if not drop_caches():
        print("warning: cannot drop caches (not root): the source is warm", file=sys.stderr)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    os.sync()
    return time.perf_counter() - start


def mrecord_cmd(src: Path, dst: Path, workers: int, *extra: str) -> list[str]:
    """``mrecord convert imagefolder`` as a user runs it."""
    return [
        sys.executable,
        "-m",
        "mrecord.cli",
        "convert",
        "imagefolder",
        str(src),
        str(dst),
        "--workers",
        str(workers),
        "--quiet",
        *extra,
    ]


def compile_mrecord() -> None:
    """Byte-compile mrecord once, so the timed CLI runs do not compile it at start-up
    (where ``PYTHONDONTWRITEBYTECODE`` is set, every run would: ~0.5 s on a 16-core
    machine); an installed package has its ``.pyc`` already."""
    import compileall

    import mrecord

    compileall.compile_dir(str(Path(mrecord.__file__).parent), quiet=1)


def _sources(args: argparse.Namespace) -> tuple[Path, int, Path, int, Path]:
    """The JPEG folder and its first ``--resize-images`` files (made once), their bytes,
    and the output dataset's path: ``(src, bytes, small, small bytes, dst)``."""
    src = args.source_dir / f"mrecord-bench-jpegs-{args.images}"
    source_bytes = make_jpegs(src, args.images)
    small = subset(
        src,
        args.resize_images,
        args.source_dir / f"mrecord-bench-jpegs-{args.images}-first{args.resize_images}",
    )
    small_bytes = sum(p.stat().st_size for p in small.rglob("*.jpg"))
    args.out.mkdir(parents=True, exist_ok=True)
    return src, source_bytes, small, small_bytes, args.out.resolve() / "folder.mrecord"


def _disk_limits(args: argparse.Namespace, src: Path, source_bytes: int) -> tuple[float, float]:
    """MB/s of a durable sequential write of the source's bytes and of a cold read of
    its files, measured now."""
    write = source_bytes / disk_limit(args.out / "limit.scratch", source_bytes) / 1e6
    return write, source_bytes / cold_read_seconds(src) / 1e6


def together_seconds(src: Path, scratch: Path, nbytes: int) -> float:
    """Seconds for a cold read of every file of ``src`` (one thread, 64 files ahead with
    ``POSIX_FADV_WILLNEED``) while another thread writes ``nbytes`` into ``scratch`` with
    8 MiB ``O_DIRECT`` writes and an ``fsync``: reading and writing at once."""
    import mmap
    import threading

    files = sorted(src.rglob("*.jpg"))
    chunk = 8 << 20
    big = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    big.write(np.random.default_rng(0).integers(0, 256, chunk, dtype=np.uint8).tobytes())
    scratch.unlink(missing_ok=True)

    def write() -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_DIRECT", 0)
        fd = os.open(scratch, flags, 0o644)
        try:
            for _ in range(-(-nbytes // chunk)):
                os.write(fd, big)
            os.fsync(fd)
        finally:
            os.close(fd)

    drop_caches()
    start = time.perf_counter()
    writer = threading.Thread(target=write)
    writer.start()
    read_ahead_64(files)
    writer.join()
    seconds = time.perf_counter() - start
    scratch.unlink()
    big.close()
    return seconds


def pipeline_seconds(src: Path, scratch: Path) -> float:
    """Seconds for the smallest conversion there is, cold, to durable: one thread reads
    every file of ``src`` (64 ahead, ``POSIX_FADV_WILLNEED``) into a queue; the main
    thread copies each into 8 MiB page-aligned buffers and writes each full one into
    ``scratch`` with ``O_DIRECT`` (``fsync`` at the end). No parsing, no checksums, no
    index: what the disk and Python's copies allow a read-then-write loop."""
    import mmap
    import queue
    import threading

    files = sorted(src.rglob("*.jpg"))
    handoff: queue.Queue[bytes | None] = queue.Queue(maxsize=512)

    def read() -> None:
        read_ahead_64(files, handoff.put)
        handoff.put(None)

    scratch.unlink(missing_ok=True)
    drop_caches()
    start = time.perf_counter()
    reader = threading.Thread(target=read, name="pipeline-read", daemon=True)
    reader.start()
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    direct = os.open(scratch, os.O_WRONLY | getattr(os, "O_DIRECT", 0))
    stage = mmap.mmap(-1, 8 << 20)
    fill = at = 0
    try:
        while (value := handoff.get()) is not None:
            view = memoryview(value)
            while view:
                n = min(len(view), len(stage) - fill)
                stage[fill : fill + n] = view[:n]
                fill, view = fill + n, view[n:]
                if fill == len(stage):
                    os.pwrite(direct, stage, at)
                    at, fill = at + fill, 0
        os.pwrite(fd, stage[:fill], at)
        os.fsync(fd)
    finally:
        os.close(direct)
        os.close(fd)
    seconds = time.perf_counter() - start
    reader.join()
    scratch.unlink()
    return seconds


def one_disk_limit(
    args: argparse.Namespace, src: Path, nbytes: int, read: float, write: float
) -> tuple[float, float]:
    """MB/s a conversion on one disk can reach (the better of reading and writing added
    and at once; see the module docstring), and the at-once rate alone."""
    at_once = nbytes / together_seconds(src, args.out / "limit.scratch", nbytes) / 1e6
    return max(1 / (1 / read + 1 / write), at_once), at_once


def curve(args: argparse.Namespace, workers: list[int]) -> int:
    """The scaling curve: the default conversion, ``--check-images decode`` and ``--resize
    64x64`` at each worker count, cold source, to durable, beside the same run's limits."""
    start = time.perf_counter()
    src, source_bytes, small, small_bytes, dst = _sources(args)
    print(
        f"source: {args.images:,} JPEGs, {source_bytes / 1e6:,.0f} MB "
        f"(ready in {time.perf_counter() - start:.0f} s); cores: {os.cpu_count()}",
        flush=True,
    )
    write_limit, read_limit = _disk_limits(args, src, source_bytes)
    limit, at_once = one_disk_limit(args, src, source_bytes, read_limit, write_limit)
    pipeline = source_bytes / pipeline_seconds(src, args.out / "pipeline.scratch") / 1e6
    print(
        f"limits (same run): durable sequential write {write_limit:,.0f} MB/s; cold read of "
        f"the source files (best of 8 threads, 64 ahead) {read_limit:,.0f} MB/s; both at "
        f"once {at_once:,.0f} MB/s; one disk {limit:,.0f} MB/s; a minimal read-then-write "
        f"pipeline {pipeline:,.0f} MB/s",
        flush=True,
    )
    every: dict[str, tuple[str, Path, int, int, tuple[str, ...]]] = {
        "default": ("default check", src, args.images, source_bytes, ()),
        "decode": (
            "--check-images decode",
            src,
            args.images,
            source_bytes,
            ("--check-images", "decode"),
        ),
        "resize": ("--resize 64x64", small, args.resize_images, small_bytes, ("--resize", "64x64")),
    }
    runs = [every[name] for name in args.curve_runs.split(",")]
    print(
        f"{'run':24} {'workers':>7} {'rows':>7} {'s':>7} {'rows/s':>8} {'MB/s':>6} "
        f"{'vs 1':>6} {'of limit':>8} {'of pipeline':>11}",
        flush=True,
    )
    shares: dict[tuple[str, int], list[float]] = {}
    of_pipeline: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.rounds):
        if round_:  # this disk's speed drifts: the limit again, right before the runs
            limit, at_once = one_disk_limit(args, src, source_bytes, read_limit, write_limit)
            pipeline = source_bytes / pipeline_seconds(src, args.out / "pipeline.scratch") / 1e6
            print(
                f"round {round_ + 1}: both at once {at_once:,.0f} MB/s; minimal pipeline "
                f"{pipeline:,.0f} MB/s",
                flush=True,
            )
        for label, folder, count, nbytes, extra in runs:
            # every other round the other way round: a run's place in the round is not
            # what its share measures
            timings = {
                w: timed(mrecord_cmd(folder, dst, w, *extra), dst)
                for w in (workers if round_ % 2 == 0 else workers[::-1])
            }
            first = timings[workers[0]]
            for w in workers:
                seconds = timings[w]
                rate = nbytes / seconds / 1e6
                shares.setdefault((label, w), []).append(rate / limit)
                of_pipeline.setdefault((label, w), []).append(rate / pipeline)
                print(
                    f"{label:24} {w:7} {count:7,} {seconds:7.2f} {count / seconds:8,.0f} "
                    f"{rate:6,.0f} {first / seconds:5.2f}x {rate / limit:8.0%} "
                    f"{rate / pipeline:11.0%}",
                    flush=True,
                )
    if args.rounds > 1:
        for (label, w), values in shares.items():
            values.sort()
            piped = sorted(of_pipeline[(label, w)])
            print(
                f"{label}, {w} worker(s): of the limit measured beside it, median "
                f"{values[len(values) // 2]:.0%} ({values[0]:.0%}-{values[-1]:.0%}, "
                f"{len(values)} rounds); of the minimal pipeline, median "
                f"{piped[len(piped) // 2]:.0%} ({piped[0]:.0%}-{piped[-1]:.0%})"
            )
    clean(dst)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the issue-24 table (see the module docstring)."""
    global SETTLE_SECONDS  # --settle sets it for every step of the run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--resize-images", type=int, default=4_000)
    parser.add_argument("--quick", action="store_true", help="2,000 images, 400 resized")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--mindspore-python", default=None, help="interpreter with mindspore")
    parser.add_argument("--classic", action="store_true", help="the older table instead")
    parser.add_argument("--scale", type=float, default=1.0, help="--classic: shrink the sources")
    parser.add_argument(
        "--source-dir",
        type=Path,
        default=Path("/tmp"),
        help="where the JPEG folders are generated (put it on the disk under test, not tmpfs)",
    )
    parser.add_argument(
        "--curve",
        default=None,
        metavar="W1,W2,...",
        help="instead of the table: the scaling curve, each run at each worker count "
        "(e.g. 1,2,4,8,16 on a 16-core machine)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="--curve: repeat the runs, each round after the one-disk limit measured "
        "again (this machine's disk drifts), and print each run's median share of it",
    )
    parser.add_argument(
        "--curve-runs",
        default="default,decode,resize",
        help="--curve: which runs (default, decode, resize; comma-separated)",
    )
    parser.add_argument(
        "--many-small",
        type=int,
        default=None,
        metavar="N",
        help="instead of the table: N small files (~1.5 KB) converted, beside their cold read "
        "(--rounds times)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_SECONDS,
        help="seconds of quiet disk before each timed step (after the cache is dropped)",
    )
    args = parser.parse_args(argv)
    SETTLE_SECONDS = args.settle
    if args.classic:
        return classic(args)
    if args.many_small:
        compile_mrecord()
        return many_small(args)
    if args.quick:
        args.images, args.resize_images = 2_000, 400
    compile_mrecord()
    if args.curve:
        return curve(args, [int(w) for w in args.curve.split(",")])
    src, source_bytes, small, small_bytes, dst = _sources(args)

    from benchmarks.limits import measure_limits
    from benchmarks.run import find_mindspore

    limits = measure_limits(args.out, 256)
    write_limit, read_limit = _disk_limits(args, src, source_bytes)
    rows: list[tuple[str, int, int, float | None]] = []
    for workers in sorted({1, args.workers}):
        seconds = timed(mrecord_cmd(src, dst, workers), dst)
        rows.append((f"mrecord convert, {workers} worker(s)", args.images, source_bytes, seconds))
    seconds = timed(mrecord_cmd(src, dst, args.workers, "--check-images", "none"), dst)
    rows.append(
        (f"  --check-images none, {args.workers} worker(s)", args.images, source_bytes, seconds)
    )
    for workers in sorted({1, args.workers}):
        seconds = timed(mrecord_cmd(src, dst, workers, "--check-images", "decode"), dst)
        rows.append(
            (f"  --check-images decode, {workers} worker(s)", args.images, source_bytes, seconds)
        )
    python, why = find_mindspore(args.mindspore_python)
    if python is not None:
        ms_dst = args.out.resolve() / "folder.mindrecord"
        seconds = timed([python, "-c", MS_LOOP, str(src), str(ms_dst)], ms_dst)
        clean(ms_dst)
        rows.append(("MindSpore FileWriter loop (its docs)", args.images, source_bytes, seconds))
    else:
        rows.append((f"MindSpore FileWriter loop: not installed ({why})", args.images, 0, None))
    for workers in (1, 2):
        seconds = timed(mrecord_cmd(small, dst, workers, "--resize", "64x64"), dst)
        rows.append(
            (f"--resize 64x64, {workers} worker(s)", args.resize_images, small_bytes, seconds)
        )
    clean(dst)

    print(
        f"source: {src} ({args.images:,} JPEGs, {source_bytes / args.images / 1e3:.0f} KB avg); "
        f"cold source cache, timed to durable; cores: {os.cpu_count()}"
    )
    print(
        f"disk limits (same run): durable sequential write of the source's bytes "
        f"{write_limit:,.0f} MB/s (benchmarks.limits' buffered write + fsync: "
        f"{limits['fsync_mb_s']:,.0f}); cold read of the source files (best of 8 threads, "
        f"one thread 64 ahead) "
        f"{read_limit:,.0f} MB/s"
    )
    print(f"{'run':52} {'rows':>7} {'seconds':>8} {'rows/s':>9} {'MB/s':>7}")
    for label, count, nbytes, took in rows:
        if took is None:
            print(label)
            continue
        print(f"{label:52} {count:7,} {took:8.2f} {count / took:9,.0f} {nbytes / took / 1e6:7.0f}")
    by = {label: s for label, _c, _b, s in rows if s is not None}
    one = by.get("mrecord convert, 1 worker(s)")
    many = by.get(f"mrecord convert, {args.workers} worker(s)")
    ms = next((s for label, s in by.items() if label.startswith("MindSpore")), None)
    if one and many:
        print(f"ratio: {args.workers} workers vs 1: {one / many:.2f}x")
    if ms and many:
        print(f"ratio: mrecord ({args.workers} workers) vs MindSpore: {ms / many:.2f}x faster")
    # The source and the output are on the same device here: every byte is read once and
    # written once (the module docstring: the better of the two added and both at once).
    limit, at_once = one_disk_limit(args, src, source_bytes, read_limit, write_limit)
    print(f"reading and writing at once: {at_once:,.0f} MB/s; one-disk limit {limit:,.0f} MB/s")
    for label in (
        f"mrecord convert, {args.workers} worker(s)",
        f"  --check-images none, {args.workers} worker(s)",
    ):
        if by.get(label):
            rate = source_bytes / by[label] / 1e6
            print(
                f"{label.strip()}: {rate:,.0f} MB/s, {rate / limit:.0%} of the one-disk limit "
                f"({limit:,.0f} MB/s)"
            )
    d1 = by.get("  --check-images decode, 1 worker(s)")
    d2 = by.get(f"  --check-images decode, {args.workers} worker(s)")
    if d1 and d2:
        print(f"ratio: --check-images decode, {args.workers} workers vs 1: {d1 / d2:.2f}x")
    r1, r2 = by.get("--resize 64x64, 1 worker(s)"), by.get("--resize 64x64, 2 worker(s)")
    if r1 and r2:
        print(f"ratio: --resize, 2 workers vs 1: {r1 / r2:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
