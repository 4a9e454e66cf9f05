"""needs_large_requests: storage that serves few requests for its bandwidth, told from the
cgroup throttle settings (a file-order read streams there: DatasetReader._stream)."""

from __future__ import annotations

from pathlib import Path

from mrecord.storage.probe import LARGE_REQUEST, throttle_allows_large_requests


def _v1(root: Path, group: str, iops: str = "", bps: str = "") -> None:
    folder = root / group.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "blkio.throttle.read_iops_device").write_text(iops)
    (folder / "blkio.throttle.read_bps_device").write_text(bps)


def test_a_hard_disk_like_throttle_needs_large_requests(tmp_path: Path) -> None:
    v1 = tmp_path / "blkio"
    _v1(v1, "/bench", "254:0 200\n", "254:0 150000000\n")
    proc = "7:blkio:/bench\n6:freezer:/\n"
    assert throttle_allows_large_requests("254:0", proc, v1, tmp_path / "v2")
    # another disk's throttle says nothing of this one
    assert not throttle_allows_large_requests("8:0", proc, v1, tmp_path / "v2")


def test_a_cloud_volume_like_throttle_does_not(tmp_path: Path) -> None:
    v1 = tmp_path / "blkio"
    _v1(v1, "/bench", "254:0 3000\n", "254:0 250000000\n")  # 83 KB a request
    assert not throttle_allows_large_requests("254:0", "7:blkio:/bench\n", v1, tmp_path)


def test_the_tightest_limits_up_the_hierarchy_count(tmp_path: Path) -> None:
    """A parent group's request limit applies to its children too."""
    v1 = tmp_path / "blkio"
    _v1(v1, "/", "", "")
    _v1(v1, "/outer", "254:0 100\n", "")
    _v1(v1, "/outer/inner", "", "254:0 100000000\n")  # 1 MB a request under the parent's
    assert throttle_allows_large_requests("254:0", "7:blkio:/outer/inner\n", v1, tmp_path)
    _v1(v1, "/outer/inner", "254:0 100000\n", "254:0 100000000\n")  # its own is looser
    assert throttle_allows_large_requests("254:0", "7:blkio:/outer/inner\n", v1, tmp_path)


def test_a_requests_limit_alone_or_none_at_all_says_nothing(tmp_path: Path) -> None:
    v1 = tmp_path / "blkio"
    _v1(v1, "/g", "254:0 200\n", "")
    assert not throttle_allows_large_requests("254:0", "7:blkio:/g\n", v1, tmp_path)
    assert not throttle_allows_large_requests("254:0", "7:blkio:/\n", v1, tmp_path)
    assert not throttle_allows_large_requests("254:0", None, v1, tmp_path)


def test_cgroup_v2_io_max(tmp_path: Path) -> None:
    v2 = tmp_path / "unified"
    group = v2 / "train"
    group.mkdir(parents=True)
    bps = 200 * LARGE_REQUEST
    (group / "io.max").write_text(f"254:0 rbps={bps} wbps=max riops=200 wiops=max\n")
    assert throttle_allows_large_requests("254:0", "0::/train\n", tmp_path / "v1", v2)
    (group / "io.max").write_text(f"254:0 rbps={bps} wbps=max riops=max wiops=max\n")
    assert not throttle_allows_large_requests("254:0", "0::/train\n", tmp_path / "v1", v2)
