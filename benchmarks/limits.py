"""The machine's physical limits, measured in the same run as the benchmarks they bound.

Usage::

    python -m benchmarks.limits [--dir bench_out] [--mb 256] [--json FILE]

- ``page_cache_gb_s``: reading a file that is in the page cache with ``readinto`` into
  one reused buffer (8 MiB calls): the most any reader can move bytes from cached files.
- ``mmap_gather_gb_s``: a numpy fancy-index gather of random 100,000-byte rows from a
  ``np.memmap`` of the same cached file into one reused output buffer (page tables and
  buffer warmed first): the most a random-access reader of big rows can copy.
- ``mmap_gather_small_rows_per_s``: the same gather of random 76-byte rows (the tabular
  workload's row), 256 per call: the most a Python caller gets in batches of 256.
- ``fsync_mb_s``: writing the file again and ``fsync``-ing it: the disk's durable write
  bandwidth (every write number is a time to durable).
- ``touch_scan_gb_s``: reading one byte of every 4 KiB page of the cached file through a
  memory map, in order: the same work as a scan whose consumer reads what it gets
  (:func:`benchmarks.measure.touch`) from a reader that hands out views (no copy).
- ``touch_random_gb_s``: the same for random 100,000-byte rows (one byte per page of each
  row): the limit of a random read whose consumer reads its rows, whether the reader
  copies them or not. A reader that copies (``mmap_gather_gb_s`` bounds it) does more
  work than this limit; a zero-copy reader can reach it. Rates are payload bytes covered
  per second, so every ``of limit`` divides a rate by the limit of the same work.

Only numpy and the standard library: every virtual environment can import it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["measure_limits"]

_CALL = 8 << 20
_BIG_ROW = 100_000
_SMALL_ROW = 76


def _best(fn: Any, repeat: int = 3) -> float:
    """The shortest of ``repeat`` timings of ``fn()`` (the least disturbed by others)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure_limits(directory: Path, mb: int = 256) -> dict[str, Any]:
    """Measure the limits with a scratch file of ``mb`` MiB in ``directory`` (removed after)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "limits.scratch"
    size = mb << 20
    block = np.random.default_rng(0).integers(0, 256, _CALL, dtype=np.uint8).tobytes()

    def write_durable() -> None:
        with open(path, "wb") as f:
            for _ in range(size // _CALL):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())

    try:
        fsync_s = _best(write_durable, 2)
        buf = bytearray(_CALL)

        def read_cached() -> None:
            with open(path, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass

        read_cached()  # into the page cache
        read_s = _best(read_cached)
        mm = np.memmap(path, dtype=np.uint8, mode="r")
        rng = np.random.default_rng(1)
        big = mm[: (size // _BIG_ROW) * _BIG_ROW].reshape(-1, _BIG_ROW)
        ids = rng.permutation(len(big))
        out = np.empty((len(ids), _BIG_ROW), dtype=np.uint8)
        np.take(big, ids, axis=0, out=out)  # page tables (and the output buffer) warm
        gather_s = _best(lambda: np.take(big, ids, axis=0, out=out))
        small = mm[: (size // _SMALL_ROW) * _SMALL_ROW].reshape(-1, _SMALL_ROW)
        small_ids = rng.integers(0, len(small), 256 * 2000)
        batches = small_ids.reshape(-1, 256)

        def gather_small() -> None:
            for b in batches:
                small[b]

        small_s = _best(gather_small)
        pages = mm[::4096]
        touch_scan_s = _best(lambda: int(pages.sum(dtype=np.uint64)))
        per_row = np.arange(0, _BIG_ROW, 4096)
        touch_ids = (ids[:, None] * _BIG_ROW + per_row[None, :]).reshape(-1)
        touch_random_s = _best(lambda: int(mm[touch_ids].sum(dtype=np.uint64)))

    finally:
        path.unlink(missing_ok=True)
    return {
        "file_mb": mb,
        "page_cache_gb_s": round(size / read_s / 1e9, 2),
        "mmap_gather_gb_s": round(len(ids) * _BIG_ROW / gather_s / 1e9, 2),
        "mmap_gather_small_rows_per_s": round(small_ids.size / small_s),
        "fsync_mb_s": round(size / fsync_s / 1e6, 1),
        "touch_scan_gb_s": round(size / touch_scan_s / 1e9, 2),
        "touch_random_gb_s": round(len(ids) * _BIG_ROW / touch_random_s / 1e9, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("bench_out"))
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    limits = measure_limits(args.dir, args.mb)
    text = json.dumps(limits, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
