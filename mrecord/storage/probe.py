"""How fast the volume holding a file reads, and how much memory this process may use.

:func:`probe_storage` measures the device under a file with direct I/O (``O_DIRECT``, so
the page cache answers nothing): random 4 KiB reads from 16 threads for a quarter of a
second (IOPS), then 1 MiB reads from 4 threads for a quarter of a second (bandwidth).
Throttles (a blkio cgroup, a cloud volume's limits) show up in both numbers. The result
is cached per device (``st_dev``) for the life of the process. File systems without
direct I/O (tmpfs, some network file systems) give ``None``: not measured.

:func:`memory_budget` is what this process may still fill: its memory cgroup's limit (v1
``memory.limit_in_bytes``, v2 ``memory.max``) less its own resident memory, or the
kernel's ``MemAvailable`` when that is smaller.

The numbers feed ``mrecord.sampling.shuffle.block`` (the block shuffle's sizes and
``Shuffle.ADAPTIVE``'s choice), which only does arithmetic on them.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["StorageProfile", "clear_probe_cache", "memory_budget", "probe_storage"]

_IO = 4096
_BIG_IO = 1 << 20
_RANDOM_THREADS = 16
_SEQUENTIAL_THREADS = 4
_PHASE_SECONDS = 0.25
_UNLIMITED = 1 << 60  # cgroup v1 writes ~2**63 for "no limit"

_cache: dict[int, StorageProfile | None] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class StorageProfile:
    """What the device under a file delivers: random reads per second and bytes per second."""

    device: str
    """``major:minor`` of the device."""
    iops: float
    """Random 4 KiB direct reads per second at queue depth 16."""
    bandwidth: float
    """Bytes per second of 1 MiB direct reads at queue depth 4."""
    seconds: float
    """How long the measurement took."""


def clear_probe_cache() -> None:
    """Forget every measured device (the next probe measures again)."""
    with _cache_lock:
        _cache.clear()


def probe_storage(path: str | os.PathLike[str], *, seconds: float = _PHASE_SECONDS) -> (
    StorageProfile | None
):
    """The :class:`StorageProfile` of the device holding ``path`` (cached per device).

    ``None`` when the file system does not do direct I/O or the file is empty. OS errors
    other than "direct I/O not supported" propagate.
    """
    st = os.stat(path)
    with _cache_lock:
        if st.st_dev in _cache:
            return _cache[st.st_dev]
        profile = _measure(Path(path), st.st_dev, st.st_size, seconds)
        _cache[st.st_dev] = profile
        return profile


def _measure(path: Path, dev: int, size: int, seconds: float) -> StorageProfile | None:
    slots = size // _IO
    if slots < 1:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError as exc:
        if exc.errno in (22, 95):  # EINVAL / EOPNOTSUPP: no direct I/O here
            return None
        raise
    if not hasattr(os, "O_DIRECT"):
        os.close(fd)
        return None
    began = time.perf_counter()
    try:
        iops = _rate(fd, slots, _IO, _RANDOM_THREADS, seconds) / _IO
        big_slots = max(1, size // _BIG_IO)
        size_big = _BIG_IO if size >= _BIG_IO else slots * _IO
        bandwidth = _rate(fd, big_slots, size_big, _SEQUENTIAL_THREADS, seconds)
    except OSError as exc:
        if exc.errno == 22:  # direct I/O refused at read time
            return None
        raise
    finally:
        os.close(fd)
    return StorageProfile(
        device=f"{os.major(dev)}:{os.minor(dev)}",
        iops=iops,
        bandwidth=bandwidth,
        seconds=time.perf_counter() - began,
    )


def _rate(fd: int, slots: int, io_size: int, threads: int, seconds: float) -> float:
    """Bytes per second read by ``threads`` threads, each reading ``io_size`` bytes at
    random aligned offsets (``slots`` of them) until ``seconds`` have passed."""
    deadline = time.perf_counter() + seconds

    def worker(index: int) -> int:
        rng = np.random.default_rng(index)
        buf = mmap.mmap(-1, io_size)  # page-aligned, as O_DIRECT wants
        try:
            view = memoryview(buf)
            done = 0
            while time.perf_counter() < deadline:
                offset = int(rng.integers(0, slots)) * io_size
                done += os.preadv(fd, [view], offset)
            view.release()
            return done
        finally:
            buf.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(threads, thread_name_prefix="mrecord-probe") as pool:
        total = sum(pool.map(worker, range(threads)))
    return total / max(1e-9, time.perf_counter() - start)


def memory_budget() -> int | None:
    """Bytes this process may still fill: its memory cgroup limit less its resident
    memory (the interpreter, numpy and the rest count against the same limit), or
    ``MemAvailable`` when smaller. ``None`` when neither is readable (not Linux).
    """
    limit = _cgroup_limit()
    room = None if limit is None else max(0, limit - (_resident() or 0))
    limits = [v for v in (room, _mem_available()) if v is not None]
    return min(limits) if limits else None


def _resident() -> int | None:
    """This process's resident memory (``VmRSS``), bytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # "max" (v2: no limit) or garbage
    value = int(text)
    return value if value < _UNLIMITED else None


def _cgroup_limit() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        group = group.lstrip("/")
        if "memory" in controllers.split(","):
            value = _read_int(Path("/sys/fs/cgroup/memory") / group / "memory.limit_in_bytes")
            if value is not None:
                limits.append(value)
        elif controllers == "":
            value = _read_int(Path("/sys/fs/cgroup") / group / "memory.max")
            if value is not None:
                limits.append(value)
    return min(limits) if limits else None


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
