"""How fast the volume holding a file reads, and how much memory this process may use.

:func:`probe_storage` measures the device under a file with direct I/O (``O_DIRECT``, so
the page cache answers nothing): random 4 KiB reads from 16 threads (IOPS), then 1 MiB
reads from 4 threads (bandwidth), each phase for a quarter of a second or
:data:`_RANDOM_READS` / :data:`_BIG_READS` reads, whichever ends first. Without the caps
a fast disk read 300-344 MB in the half second on this machine (44-48K IOPS, 1 GB/s:
nearly all of it the bandwidth phase), beside the first rows of a ``Shuffle.BLOCK``
reader; with them ~0.3 s and 116-124 MB, and ~0.15 s since the IOPS phase stops at 4,096
reads (a disk with hundreds of thousands of IOPS stops it early too).
A cloud volume's own limits show up in both numbers; a read throttle on this process's
block-I/O groups caps them (a quarter-second phase reads the throttle's burst: 3,947 IOPS
and 596 MB/s under 3,000 IOPS / 262 MB/s). The result is cached per device (``st_dev``)
for the life of the process, and kept on disk for the host's other processes for an hour
(``mrecord.storage.device_profiles``: a throttled device took 0.43 s to measure, most of
the time before a ``Shuffle.BLOCK`` reader's first batch). File systems without direct
I/O (tmpfs, some network file systems) give ``None``: not measured.

:func:`memory_budget` is what this process may still fill (the one rule every window is
cut from): each memory cgroup's limit above it (v1 ``memory.limit_in_bytes``, v2
``memory.max``) less the anonymous memory charged to that group, or the kernel's
``MemAvailable`` when that is smaller.

The numbers feed ``mrecord.sampling.shuffle.block`` (the block shuffle's sizes and
``Shuffle.ADAPTIVE``'s choice), which only does arithmetic on them, and the read-ahead
windows (``MindDataset``'s blocks in flight).
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mrecord.errors import ArgumentError
from mrecord.storage.device_profiles import Numbers, remembered

__all__ = [
    "LARGE_REQUEST",
    "MIN_BUDGET",
    "StorageProfile",
    "budget_from",
    "budget_sharers",
    "budget_workers",
    "clear_probe_cache",
    "first_memory_budget",
    "memory_budget",
    "needs_large_requests",
    "probe_storage",
    "share_memory_budget",
    "throttle_allows_large_requests",
]

_IO = 4096
_BIG_IO = 1 << 20
_RANDOM_THREADS = 16
_SEQUENTIAL_THREADS = 4
_PHASE_SECONDS = 0.25
_RANDOM_READS = 4096
"""Reads of the IOPS phase at most (256 per thread). A short phase reads a little low
(thread starts, the device's queue filling: 4,096 reads measured 33-41K IOPS on a disk
that 0.25 s measured at 44-48K), but within what the same disk gives from one run to the
next (2026-11-27, three runs each: 36-49K with 4,096 reads in 0.14-0.17 s, 44-53K with
16,384 in 0.30-0.32 s), and the sizes it decides are rounded to powers of two. With
16,384 the probe was most of the 0.35 s before a ``Shuffle.BLOCK`` reader's first row,
a tenth of its first epoch over 2.4 GB."""
_BIG_READS = 64
"""Reads of the bandwidth phase at most (64 MiB)."""
_V1_BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
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

    def pass_seconds(self, nbytes: int) -> float:
        """Seconds this device takes to read ``nbytes`` in large sequential requests."""
        return nbytes / max(1.0, self.bandwidth)

    def requests_seconds(self, requests: int) -> float:
        """Seconds this device takes for ``requests`` random small reads."""
        return requests / max(1.0, self.iops)


def clear_probe_cache() -> None:
    """Forget every measured device (the next probe measures again)."""
    with _cache_lock:
        _cache.clear()
        _large.clear()


def probe_storage(
    path: str | os.PathLike[str], *, seconds: float = _PHASE_SECONDS
) -> StorageProfile | None:
    """The :class:`StorageProfile` of the device holding ``path`` (cached per device).

    ``None`` when the file system does not do direct I/O or the file is shorter than one
    4 KiB read. OS errors other than "direct I/O not supported" propagate.
    """
    st = os.stat(path)
    with _cache_lock:
        if st.st_dev in _cache:
            return _cache[st.st_dev]
        profile = _kept_or_measured(Path(path), st.st_dev, st.st_size, seconds)
        _cache[st.st_dev] = profile
        return profile


def _kept_or_measured(path: Path, dev: int, size: int, seconds: float) -> StorageProfile | None:
    """The profile another process of this host measured for the device (under the same
    read throttle, since the last boot, within the hour: ``device_profiles``), else one
    measured now and kept for the others.

    A read throttle on this process's groups caps what it measured: a short measurement
    under a blkio throttle reads the throttle's burst (3,947 IOPS and 596 MB/s measured
    under 3,000 IOPS / 262 MB/s, 2026-11-28)."""
    iops_limits, bps_limits = _throttle_limits(
        _disk_of(dev), _read_text(Path("/proc/self/cgroup")), _V1_BLKIO_ROOT, _v2_root()
    )

    def measure() -> Numbers | None:
        profile = _measure(path, dev, size, seconds)
        if profile is None:
            return None
        return {
            "device": profile.device,
            "iops": min([profile.iops, *iops_limits]),
            "bandwidth": min([profile.bandwidth, *bps_limits]),
            "seconds": profile.seconds,
        }

    boot = (_read_text(Path("/proc/sys/kernel/random/boot_id")) or "").strip()
    # what a kept profile must match: the device, this process's read throttle on its
    # disk (groups of one disk may allow it different rates) and the boot
    key = (
        f"{os.major(dev)}:{os.minor(dev)} read_iops={min(iops_limits, default=0)} "
        f"read_bps={min(bps_limits, default=0)} boot={boot}"
    )
    numbers = remembered(key, measure)
    profile = _profile_of(numbers)
    if numbers is not None and profile is None:  # a damaged entry: measure again, capped
        profile = _profile_of(measure())
    return profile


def _profile_of(numbers: Numbers | None) -> StorageProfile | None:
    """The profile ``numbers`` hold, or None when there are none or they are not a
    profile's (missing, not numbers, not positive rates)."""
    if numbers is None:
        return None
    try:
        profile = StorageProfile(
            device=str(numbers["device"]),
            iops=float(numbers["iops"]),
            bandwidth=float(numbers["bandwidth"]),
            seconds=float(numbers["seconds"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return profile if profile.iops > 0 and profile.bandwidth > 0 else None


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
        iops = _rate(fd, slots, _IO, _RANDOM_THREADS, seconds, _RANDOM_READS) / _IO
        big_slots = max(1, size // _BIG_IO)
        size_big = _BIG_IO if size >= _BIG_IO else slots * _IO
        bandwidth = _rate(fd, big_slots, size_big, _SEQUENTIAL_THREADS, seconds, _BIG_READS)
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


def _rate(fd: int, slots: int, io_size: int, threads: int, seconds: float, reads: int) -> float:
    """Bytes per second read by ``threads`` threads, each reading ``io_size`` bytes at
    random aligned offsets (``slots`` of them) until ``seconds`` have passed or it has
    read its share of ``reads`` (each thread reads once at least)."""
    deadline = time.perf_counter() + seconds
    share = max(1, reads // threads)

    def worker(index: int) -> int:
        rng = np.random.default_rng(index)
        buf = mmap.mmap(-1, io_size)  # page-aligned, as O_DIRECT wants
        try:
            # released however the loop ends: a view still held when a read raises would
            # make buf.close() raise BufferError in place of the read's OSError
            with memoryview(buf) as view:
                done = 0
                for _ in range(share):  # one read at least: a thread may start late
                    offset = int(rng.integers(0, slots)) * io_size
                    done += os.preadv(fd, [view], offset)
                    if time.perf_counter() >= deadline:
                        break
                return done
        finally:
            buf.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(threads, thread_name_prefix="mrecord-probe") as pool:
        total = sum(pool.map(worker, range(threads)))
    return total / max(1e-9, time.perf_counter() - start)


MIN_BUDGET = 16 << 20
"""The least :func:`memory_budget` answers when it knows a limit (a window of a few rows)."""


LARGE_REQUEST = 256 << 10
"""Storage whose bandwidth over its read requests per second is at least this many bytes
serves few requests: reads must be large to reach its bandwidth (a volume throttled to
200 IOPS / 150 MB/s takes 750 KB a request; 3,000 IOPS / 250 MB/s, 83 KB)."""

_large: dict[int, bool] = {}


def needs_large_requests(path: str | os.PathLike[str]) -> bool:
    """Whether the device under ``path`` needs large requests to reach its bandwidth, as
    the system's settings say (nothing is read; cached per device): a read throttle on
    this process's block-I/O cgroup for that disk (v1 ``blkio.throttle.read_{iops,bps}
    _device``, v2 ``io.max``) allowing at least :data:`LARGE_REQUEST` bytes per request.
    False when nothing says so. Not ``queue/rotational``: a virtual machine's virtio disk
    says 1 there whatever is behind it (this machine's, ~16K IOPS, does)."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return False
    with _cache_lock:
        if dev in _large:
            return _large[dev]
    answer = throttle_allows_large_requests(
        _disk_of(dev),
        _read_text(Path("/proc/self/cgroup")),
        _V1_BLKIO_ROOT,
        _v2_root(),
    )
    with _cache_lock:
        _large[dev] = answer
    return answer


def _disk_of(dev: int) -> str:
    """``major:minor`` of the whole disk holding device ``dev`` (a partition's parent)."""
    own = f"{os.major(dev)}:{os.minor(dev)}"
    folder = Path(f"/sys/dev/block/{own}")
    if (folder / "partition").exists():
        parent = _read_text(folder.resolve().parent / "dev")
        if parent:
            return parent.strip()
    return own


def throttle_allows_large_requests(
    disk: str, proc_cgroup: str | None, v1_root: Path, v2_root: Path
) -> bool:
    """Whether a read throttle on this process's groups (and the groups above them) for
    ``disk`` allows at least :data:`LARGE_REQUEST` bytes per request it allows (the
    tightest bytes-per-second limit over the tightest requests-per-second one)."""
    iops, bps = _throttle_limits(disk, proc_cgroup, v1_root, v2_root)
    return bool(iops and bps) and min(bps) >= LARGE_REQUEST * min(iops)


def _throttle_limits(
    disk: str, proc_cgroup: str | None, v1_root: Path, v2_root: Path
) -> tuple[list[int], list[int]]:
    """Every read throttle on ``disk`` of this process's groups and the groups above them:
    requests per second and bytes per second."""
    iops: list[int] = []
    bps: list[int] = []
    for group, v1 in _groups_up(proc_cgroup, "blkio", v1_root, v2_root):
        if v1:
            iops += _device_values(group / "blkio.throttle.read_iops_device", disk)
            bps += _device_values(group / "blkio.throttle.read_bps_device", disk)
        else:
            iops += _io_max(group / "io.max", disk, "riops")
            bps += _io_max(group / "io.max", disk, "rbps")
    return iops, bps


def _groups_up(
    proc_cgroup: str | None, controller: str, v1_root: Path, v2_root: Path
) -> Iterator[tuple[Path, bool]]:
    """Each folder of this process's ``controller`` groups (v1, under ``v1_root``) and of
    its v2 group (under ``v2_root``), from its own group up to the root; whether it is v1."""
    for line in (proc_cgroup or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, where = parts
        v1 = controller in controllers.split(",")
        if not v1 and controllers != "":
            continue
        root = v1_root if v1 else v2_root
        group = root / where.lstrip("/")
        while True:
            yield group, v1
            if group == root or root not in group.parents:
                break
            group = group.parent


def _device_values(path: Path, disk: str) -> list[int]:
    """The values of ``disk``'s lines (``MAJ:MIN VALUE``) in a v1 throttle file."""
    found = []
    for line in (_read_text(path) or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == disk and fields[1].isdigit():
            found.append(int(fields[1]))
    return found


def _io_max(path: Path, disk: str, key: str) -> list[int]:
    """``key``'s value on ``disk``'s line of a v2 ``io.max`` (``max``: no limit)."""
    for line in (_read_text(path) or "").splitlines():
        fields = line.split()
        if fields and fields[0] == disk:
            for field in fields[1:]:
                name, _, value = field.partition("=")
                if name == key and value.isdigit():
                    return [int(value)]
    return []


def memory_budget() -> int | None:
    """Bytes this process may still fill, page cache included: the one budget every
    read-ahead window and block size is cut from (``mrecord.storage.readahead``,
    ``MindDataset``'s blocks in flight, ``Shuffle.BLOCK``'s sizes).

    The rule (:func:`budget_from`): the smallest of

    - for every memory cgroup the process is in, its own group and each one above it up
      to the root (v1 ``memory.limit_in_bytes``, v2 ``memory.max``): the group's limit
      less the anonymous memory charged to it (``memory.stat``: v1 ``total_rss``, v2
      ``anon``), which counts the interpreter, numpy and every other process of the group;
      this process's own anonymous memory when the stat is unreadable (page cache, the
      shard maps included, is not subtracted: the kernel reclaims it for the window);
    - the machine's ``MemAvailable``;

    divided by the processes that share that memory (:func:`budget_sharers`), and at least
    ``MIN_BUDGET``. ``None`` when neither a limit nor ``MemAvailable`` can be read (not
    Linux).
    """
    budget = budget_from(
        _read_text(Path("/proc/self/cgroup")),
        _read_text(Path("/proc/meminfo")),
        _resident(),
        _V1_MEMORY_ROOT,
        _v2_root(),
    )
    if not _first_budget:
        _first_budget.append(budget)
    return _shared(budget)


# The process's first budget, once measured, before the division by its sharers: a
# DataLoader worker inherits its parent's and divides it by its own count.
_first_budget: list[int | None] = []
_workers = [1]  # processes of this process's kind that read beside it (share_memory_budget)


def share_memory_budget(processes: int) -> None:
    """Say that ``processes`` processes (this one included) read beside each other in the
    memory this process sees, each as much as the others: a PyTorch DataLoader's workers
    (the PyTorch adapter says so in each worker). Every later :func:`memory_budget` and
    :func:`first_memory_budget` of this process is then that share of the memory.

    Each worker otherwise sized its read-ahead, sweep windows and buffers from the whole
    of it: 4 workers reading small rows in a random order beyond memory stalled at a
    300 MB memory group's limit (docs/READING.md, "Workers and ranks share the budget")."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ArgumentError(f"processes must be an int >= 1, got {processes!r}")
    _workers[0] = processes


def budget_workers() -> int:
    """The processes given to :func:`share_memory_budget` (1 until it is called): what
    changes a process's share while it runs (``LOCAL_WORLD_SIZE`` is set before it
    starts). Cheap: for what is sized once and sized again when it changes."""
    return _workers[0]


def budget_sharers() -> int:
    """How many processes share this process's memory: the workers given to
    :func:`share_memory_budget` times the processes of a rank's host
    (``LOCAL_WORLD_SIZE``, as ``torchrun`` and Ray Train set it; 1 when unset or not a
    positive number), each of which starts its own workers."""
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    ranks = int(local) if local.isdigit() and int(local) > 0 else 1
    return ranks * _workers[0]


def _shared(budget: int | None) -> int | None:
    """``budget`` divided among :func:`budget_sharers`, at least ``MIN_BUDGET``."""
    sharers = budget_sharers()
    if budget is None or sharers == 1:
        return budget
    return max(MIN_BUDGET, budget // sharers)


def first_memory_budget() -> int | None:
    """The first :func:`memory_budget` this process measured (measured now if none was):
    for what is sized once per process (the buffer pool's free slabs, the shared heads'
    bound). A reader's first blocks then do not read ``/proc`` and the cgroup files again
    on their way to their first reads (measured: 3-4 ms of a cold epoch's first block,
    the reading threads waiting for the GIL on each file's open and read); its own
    blocks and windows were sized from a measure of the same moment."""
    if not _first_budget:
        return memory_budget()
    return _shared(_first_budget[0])


_V1_MEMORY_ROOT = Path("/sys/fs/cgroup/memory")


def _v2_root() -> Path:
    """Where the unified (v2) hierarchy is mounted: ``/sys/fs/cgroup``, or its
    ``unified`` folder on a hybrid host (v1 controllers beside an empty v2 tree)."""
    hybrid = Path("/sys/fs/cgroup/unified")
    return hybrid if (hybrid / "cgroup.procs").exists() else Path("/sys/fs/cgroup")


def budget_from(
    proc_cgroup: str | None,
    meminfo: str | None,
    own_anon: int | None,
    v1_root: Path,
    v2_root: Path,
) -> int | None:
    """:func:`memory_budget`'s rule over what it read: ``/proc/self/cgroup``'s text,
    ``/proc/meminfo``'s text, this process's anonymous resident bytes, and the mount
    points of the v1 memory hierarchy and of the v2 one (tests give their own)."""
    rooms = _group_rooms(proc_cgroup, own_anon, v1_root, v2_root)
    available = _meminfo_field(meminfo, "MemAvailable")
    if available is not None:
        rooms.append(available)
    return max(MIN_BUDGET, min(rooms)) if rooms else None


def _group_rooms(
    proc_cgroup: str | None, own_anon: int | None, v1_root: Path, v2_root: Path
) -> list[int]:
    """Each limited group's limit less what is charged to it (see :func:`memory_budget`)."""
    rooms: list[int] = []
    for group, v1 in _groups_up(proc_cgroup, "memory", v1_root, v2_root):
        limit_name, anon_name = (
            ("memory.limit_in_bytes", "total_rss") if v1 else ("memory.max", "anon")
        )
        limit = _read_int(group / limit_name)
        if limit is not None:
            anon = _stat_field(group / "memory.stat", anon_name)
            used = anon if anon is not None else own_anon or 0
            rooms.append(max(0, limit - used))
    return rooms


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat_field(path: Path, name: str) -> int | None:
    """Field ``name`` of a cgroup ``memory.stat`` file (bytes), None when unreadable."""
    for line in (_read_text(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None


def _meminfo_field(meminfo: str | None, name: str) -> int | None:
    for line in (meminfo or "").splitlines():
        if line.startswith(name + ":"):
            try:
                return int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                return None
    return None


def _resident() -> int | None:
    """This process's anonymous resident memory (``RssAnon``; ``VmRSS`` on kernels
    without it), bytes. Mapped file pages are page cache, which the kernel reclaims."""
    status = _read_text(Path("/proc/self/status"))
    return _meminfo_field(status, "RssAnon") or _meminfo_field(status, "VmRSS")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # "max" (v2: no limit) or garbage
    value = int(text)
    return value if value < _UNLIMITED else None
