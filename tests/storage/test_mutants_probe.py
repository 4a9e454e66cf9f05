"""Tests written for mutants of ``mrecord/storage/probe.py`` that survived its tests
(docs/RELIABILITY.md, "Mutation testing"): what the numbers of a :class:`StorageProfile`
mean, which reads and files the probe touches, and where ``memory_budget`` reads the
process's memory cgroups on v1, v2 and hybrid hosts.

The device is faked (``os.preadv`` and the probe's clock): each read takes one tick of a
fake clock, so a probe of it must report exactly one read per tick, whatever the threads
did. ``memory_budget`` reads ``/proc`` and ``/sys/fs/cgroup`` under a fake root made here;
nothing touches the machine's own cgroups.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mrecord.storage import probe
from mrecord.storage.probe import MIN_BUDGET, budget_from, memory_budget, probe_storage

KIB = 1024
MIB = 1 << 20
TICK = 0.001  # fake seconds per read
START = 1000.0  # the fake clock's reading before the first read


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Each test measures: nothing cached from another test's device."""
    probe.clear_probe_cache()
    yield
    probe.clear_probe_cache()


class FakeDevice:
    """A device whose every read takes ``TICK`` seconds of a fake clock (which moves only
    when a read completes). The first read of each thread waits until ``depth`` threads
    are reading at once (``depth`` per read size), so a probe that keeps fewer reads in
    flight fails instead of passing."""

    def __init__(self, size: int, depth: dict[int, int] | None = None) -> None:
        self.size = size
        self.now = START
        self.lock = threading.Lock()
        self.reads: list[tuple[str, int, int]] = []  # (thread name, offset, length)
        self.opens: list[int] = []  # flags of each os.open of the probed file
        self.fds: list[int] = []  # the descriptors those opens returned
        self.closed: set[int] = set()  # descriptors closed since
        self._depth = {n: threading.Barrier(k, timeout=10) for n, k in (depth or {}).items()}
        self._started: set[tuple[int, int]] = set()  # (read size, thread)

    def perf_counter(self) -> float:
        with self.lock:
            return self.now

    def preadv(self, fd: int, buffers: list[Any], offset: int) -> int:
        (buf,) = buffers
        length = len(buf)
        barrier = self._depth.get(length)
        with self.lock:
            first = (length, threading.get_ident()) not in self._started
            self._started.add((length, threading.get_ident()))
        if barrier is not None and first:
            barrier.wait()  # BrokenBarrierError (the test fails) when fewer threads read
        with self.lock:
            self.now += TICK
            self.reads.append((threading.current_thread().name, offset, length))
        return max(0, min(length, self.size - offset))


def _fake(
    monkeypatch: pytest.MonkeyPatch, path: Path, depth: dict[int, int] | None = None
) -> FakeDevice:
    """Probe ``path`` through a :class:`FakeDevice` (the file is opened for real, without
    ``O_DIRECT`` so any file system will do; the flags asked for are recorded)."""
    device = FakeDevice(path.stat().st_size, depth)
    real_open, real_close = os.open, os.close
    direct = getattr(os, "O_DIRECT", 0)

    def fake_open(file: Any, flags: int, *args: Any) -> int:
        if Path(file) == path:
            device.opens.append(flags)
            fd = real_open(file, flags & ~direct, *args)
            device.fds.append(fd)
            return fd
        return real_open(file, flags, *args)

    def fake_close(fd: int) -> None:
        device.closed.add(fd)
        real_close(fd)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "close", fake_close)
    monkeypatch.setattr(os, "preadv", device.preadv)
    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=device.perf_counter))
    return device


def _file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(size))
    return path


def test_a_profile_counts_reads_and_bytes_per_second_of_the_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device doing one read per millisecond: 1,000 random 4 KiB reads per second, and
    1 MiB per millisecond of 1 MiB reads; each phase lasts the ``seconds`` asked for, and
    ``seconds`` is the time both took; the device is named ``major:minor``."""
    path = _file(tmp_path, 3 * MIB // 2)
    device = _fake(monkeypatch, path)
    profile = probe_storage(path, seconds=0.01)
    assert profile is not None
    st = os.stat(path)
    assert profile.device == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    assert profile.iops == pytest.approx(1 / TICK, rel=1e-9)
    assert profile.bandwidth == pytest.approx(MIB / TICK, rel=1e-9)
    assert profile.seconds == pytest.approx(len(device.reads) * TICK, rel=1e-9)
    # each phase reads for the time asked (device time: ten 1 ms reads at least)
    assert sum(size == 4 * KIB for _, _, size in device.reads) >= 10
    assert sum(size == MIB for _, _, size in device.reads) >= 10
    assert probe_storage(path) is profile  # measured once per device
    assert len(device.opens) == 1


def test_a_fast_device_is_read_no_more_than_the_read_caps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phases of a whole second on a device doing a read per millisecond: the IOPS phase
    stops at ``_RANDOM_READS`` reads and the bandwidth phase at ``_BIG_READS`` (64 MiB),
    not at the second's thousand reads, and the rates are still the device's (a fast disk
    read 300-344 MB in the uncapped half second, beside a reader's first rows)."""
    monkeypatch.setattr(probe, "_RANDOM_READS", 320)
    path = _file(tmp_path, 3 * MIB // 2)
    device = _fake(monkeypatch, path)
    profile = probe_storage(path, seconds=1.0)
    assert profile is not None
    assert sum(size == 4 * KIB for _, _, size in device.reads) == 320
    assert sum(size == MIB for _, _, size in device.reads) == probe._BIG_READS == 64
    assert profile.iops == pytest.approx(1 / TICK, rel=1e-9)
    assert profile.bandwidth == pytest.approx(MIB / TICK, rel=1e-9)


def test_reads_are_direct_read_only_aligned_inside_the_file_on_mrecord_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe opens the file read-only with O_DIRECT and closes it; 16 threads keep
    16 random 4 KiB reads in flight, then 4 threads 4 reads of 1 MiB, at offsets aligned to
    the read size, never past the end of the file; its threads are named ``mrecord-probe``."""
    path = _file(tmp_path, 3 * MIB // 2)
    device = _fake(monkeypatch, path, depth={4 * KIB: 16, MIB: 4})
    assert probe_storage(path, seconds=0.01) is not None
    assert device.opens == [os.O_RDONLY | os.O_DIRECT]
    assert set(device.fds) <= device.closed
    small = [r for r in device.reads if r[2] == 4 * KIB]
    big = [r for r in device.reads if r[2] == MIB]
    assert len(small) + len(big) == len(device.reads) and small and big
    assert len({name for name, _, _ in small}) == 16
    assert len({name for name, _, _ in big}) == 4
    assert all(name.startswith("mrecord-probe") for name, _, _ in device.reads)
    assert all(off % size == 0 and off + size <= device.size for _, off, size in device.reads)
    assert {off for _, off, _ in big} == {0}  # 1.5 MiB hold one whole 1 MiB read


def test_every_thread_reads_once_even_if_it_starts_after_the_phase_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy machine the probe's threads may start late; each still reads once, so
    the device is never reported as doing 0 reads or 0 bytes per second."""
    path = _file(tmp_path, 3 * MIB // 2)
    device = _fake(monkeypatch, path)
    clock = iter(range(10**6))  # every reading of the clock is 10 s after the one before

    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=lambda: 10.0 * next(clock)))
    profile = probe_storage(path, seconds=0.01)
    assert profile is not None and profile.iops > 0 and profile.bandwidth > 0
    assert sorted(size for _, _, size in device.reads) == [4 * KIB] * 16 + [MIB] * 4


def test_a_file_under_1_mib_is_read_whole_in_the_sequential_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of 3 pages and a bit: the random reads use its 3 whole pages, and the
    sequential reads are its 3 whole pages at once (12 KiB per tick)."""
    path = _file(tmp_path, 3 * 4 * KIB + 100)
    device = _fake(monkeypatch, path)
    profile = probe_storage(path, seconds=0.01)
    assert profile is not None
    assert profile.iops == pytest.approx(1 / TICK, rel=1e-9)
    assert profile.bandwidth == pytest.approx(12 * KIB / TICK, rel=1e-9)
    assert {size for _, _, size in device.reads} == {4 * KIB, 12 * KIB}
    assert {off for _, off, size in device.reads if size == 4 * KIB} <= {0, 4 * KIB, 8 * KIB}
    assert {off for _, off, size in device.reads if size == 12 * KIB} == {0}


def test_a_file_of_one_page_is_measured_a_shorter_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path, 4 * KIB)
    device = _fake(monkeypatch, path)
    profile = probe_storage(path, seconds=0.01)
    assert profile is not None and profile.bandwidth == pytest.approx(4 * KIB / TICK)
    assert {off for _, off, _ in device.reads} == {0}
    probe.clear_probe_cache()
    path.write_bytes(b"x" * (4 * KIB - 1))
    assert probe_storage(path, seconds=0.01) is None
    path.write_bytes(b"")
    assert probe_storage(path, seconds=0.01) is None


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EOPNOTSUPP])
def test_no_direct_io_at_open_is_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    path = _file(tmp_path, 64 * KIB)
    real_open = os.open

    def refuse(file: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(code, os.strerror(code))
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    assert probe_storage(path, seconds=0.01) is None


def test_other_errors_at_open_propagate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, 64 * KIB)

    def denied(file: Any, flags: int, *args: Any) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(file))

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(PermissionError):
        probe_storage(path, seconds=0.01)


@pytest.mark.parametrize(("code", "measured"), [(errno.EINVAL, False), (errno.EIO, True)])
def test_direct_io_refused_at_read_time_is_not_measured_other_read_errors_propagate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, measured: bool
) -> None:
    path = _file(tmp_path, 64 * KIB)
    _fake(monkeypatch, path)

    def fail(fd: int, buffers: list[Any], offset: int) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "preadv", fail)
    if measured:
        with pytest.raises(OSError) as info:
            probe_storage(path, seconds=0.01)
        assert info.value.errno == code
    else:
        assert probe_storage(path, seconds=0.01) is None


def test_without_o_direct_nothing_is_measured_and_the_file_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a platform whose ``os`` has no O_DIRECT the probe opens the file read-only,
    closes it and answers None."""
    path = _file(tmp_path, 64 * KIB)
    device = _fake(monkeypatch, path)
    monkeypatch.delattr(os, "O_DIRECT")
    assert probe_storage(path, seconds=0.01) is None
    assert device.opens == [os.O_RDONLY]
    assert len(device.fds) == 1 and set(device.fds) <= device.closed
    assert device.reads == []


# -- memory_budget on a fake root ------------------------------------------------------


def _host(
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    proc_cgroup: str,
    status: str,
    meminfo: str = "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n",  # 8 GiB available
) -> None:
    """Make ``memory_budget`` read ``/proc`` and ``/sys/fs/cgroup`` under ``root``."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(proc_cgroup)
    (root / "proc/self/status").write_text(status)
    (root / "proc/meminfo").write_text(meminfo)
    (root / "sys/fs/cgroup/memory").mkdir(parents=True)

    def rooted(*parts: Any) -> Path:
        path = Path(*parts)
        return root / path.relative_to("/") if path.is_absolute() else path

    monkeypatch.setattr(probe, "Path", rooted)
    monkeypatch.setattr(probe, "_V1_MEMORY_ROOT", root / "sys/fs/cgroup/memory")


def _limit(folder: Path, name: str, limit: int, stat: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"{limit}\n")
    if stat is not None:
        (folder / "memory.stat").write_text(stat)


STATUS = "Name:\tpython\nVmRSS:\t  204800 kB\nRssAnon:\t  102400 kB\nRssFile:\t  102400 kB\n"


def test_v1_host_the_group_less_this_process_s_anonymous_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``memory.stat`` in the group: its 300 MB limit less this process's ``RssAnon``
    (100 MB; ``VmRSS`` also counts mapped file pages, which are page cache)."""
    _host(monkeypatch, tmp_path, "5:cpu,cpuacct:/\n4:memory:/job\n0::/\n", STATUS)
    _limit(tmp_path / "sys/fs/cgroup/memory/job", "memory.limit_in_bytes", 300 * MIB)
    assert memory_budget() == 200 * MIB


def test_a_kernel_without_rss_anon_subtracts_vm_rss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = "Name:\tpython\nVmRSS:\t  153600 kB\n"  # 150 MB
    _host(monkeypatch, tmp_path, "4:memory:/job\n", status)
    _limit(tmp_path / "sys/fs/cgroup/memory/job", "memory.limit_in_bytes", 300 * MIB)
    assert memory_budget() == 150 * MIB


def test_v2_host_reads_the_unified_tree_at_sys_fs_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _host(monkeypatch, tmp_path, "0::/a\n", STATUS)
    _limit(tmp_path / "sys/fs/cgroup/a", "memory.max", 500 * MIB, f"anon {120 * MIB}\n")
    assert memory_budget() == 380 * MIB


def test_hybrid_host_reads_the_unified_tree_at_its_unified_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 controllers beside a v2 tree mounted at ``/sys/fs/cgroup/unified`` (which has
    a ``cgroup.procs``): the v2 line's group is looked up there, not in the v1 mount."""
    _host(monkeypatch, tmp_path, "0::/a\n", STATUS)
    unified = tmp_path / "sys/fs/cgroup/unified"
    _limit(unified / "a", "memory.max", 500 * MIB, f"anon {100 * MIB}\n")
    (unified / "cgroup.procs").write_text("1\n")
    _limit(tmp_path / "sys/fs/cgroup/a", "memory.max", 200 * MIB, "anon 0\n")  # a decoy
    assert memory_budget() == 400 * MIB


def test_controllers_listed_together_and_odd_group_names(tmp_path: Path) -> None:
    """``memory`` co-mounted with other controllers (``4:cpu,memory:/g``) is found; a group
    name may hold colons, and may start with any letter; a line that is not
    ``id:controllers:path`` is skipped, not the end of the list."""
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _limit(v1 / "g", "memory.limit_in_bytes", 300 * MIB, "total_rss 0\n")
    _limit(v1 / "Xjob:1", "memory.limit_in_bytes", 200 * MIB, "total_rss 0\n")
    meminfo = "MemAvailable: 8388608 kB\n"
    assert budget_from("4:cpu,memory:/g\n", meminfo, 0, v1, v2) == 300 * MIB
    assert budget_from("4:memory,cpu:/g\n", meminfo, 0, v1, v2) == 300 * MIB
    assert budget_from("4:memory:/Xjob:1\n", meminfo, 0, v1, v2) == 200 * MIB
    assert budget_from("garbage\n4:memory:/g\n", meminfo, 0, v1, v2) == 300 * MIB


def test_unknown_own_memory_subtracts_nothing(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _limit(v1 / "g", "memory.limit_in_bytes", 300 * MIB)
    assert budget_from("4:memory:/g\n", None, None, v1, v2) == 300 * MIB


def test_v1_s_no_limit_value_is_no_limit(tmp_path: Path) -> None:
    """The v1 root's ``memory.limit_in_bytes`` (9223372036854771712: no limit) is no room
    to cut from: without ``MemAvailable`` the budget is unknown, not 8 EiB."""
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _limit(v1, "memory.limit_in_bytes", 9223372036854771712, "total_rss 0\n")
    assert budget_from("4:memory:/\n", None, 0, v1, v2) is None
    assert budget_from("4:memory:/\n", "MemAvailable: 1 kB\n", 0, v1, v2) == MIN_BUDGET
