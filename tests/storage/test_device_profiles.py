"""A device measured once a host: the first process's profile answers the others' probes
(``mrecord.storage.device_profiles``) under the same key (device, read throttle, boot),
within the hour; anything wrong with the kept file only means measuring again."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrecord.storage import device_profiles, probe
from mrecord.storage.device_profiles import MAX_AGE_SECONDS, remembered
from mrecord.storage.probe import StorageProfile, probe_storage


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Kept profiles on, in a file of this test's own."""
    path = tmp_path / "cache" / "device-profiles.json"
    monkeypatch.setenv("MRECORD_DEVICE_PROFILES", str(path))
    probe.clear_probe_cache()
    yield path
    probe.clear_probe_cache()


class Counting:
    """A measurement that counts its calls and answers fixed numbers."""

    def __init__(self, iops: float = 3000.0) -> None:
        self.calls = 0
        self.iops = iops

    def __call__(self) -> dict[str, float | str]:
        self.calls += 1
        return {"device": "254:0", "iops": self.iops, "bandwidth": 2.5e8, "seconds": 0.4}


def test_a_kept_profile_answers_the_next_process_instead_of_a_measurement(kept: Path) -> None:
    first = Counting()
    assert remembered("disk a", first) == first()  # measured (twice, counting this one)
    again = Counting(iops=1.0)
    assert remembered("disk a", again) == Counting()()
    assert again.calls == 0
    other = Counting(iops=7.0)
    assert remembered("disk b", other) == other()  # another key is measured for itself
    assert set(json.loads(kept.read_text())) == {"disk a", "disk b"}


def test_an_old_profile_is_measured_again_and_replaced(
    kept: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remembered("disk", Counting(iops=10.0))
    later = time.time() + MAX_AGE_SECONDS + 1
    monkeypatch.setattr(time, "time", lambda: later)
    fresh = Counting(iops=20.0)
    got = remembered("disk", fresh)
    assert got is not None and got["iops"] == 20.0
    assert fresh.calls == 1
    assert json.loads(kept.read_text())["disk"]["iops"] == 20.0


@pytest.mark.parametrize(
    "content",
    ["", "not json {", "[1, 2]", '{"disk": 5}', '{"disk": {"iops": 1}}', '{"disk": {"at": "x"}}'],
)
def test_a_damaged_file_means_measuring_and_is_written_whole_again(
    kept: Path, content: str
) -> None:
    kept.parent.mkdir(parents=True)
    kept.write_text(content)
    measured = Counting()
    assert remembered("disk", measured) == Counting()()
    assert measured.calls == 1
    assert json.loads(kept.read_text())["disk"]["iops"] == 3000.0


def test_a_folder_that_cannot_be_written_means_measuring_never_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("MRECORD_DEVICE_PROFILES", str(blocker / "device-profiles.json"))
    measured = Counting()
    assert remembered("disk", measured) == Counting()()
    assert remembered("disk", measured) == Counting()()
    assert measured.calls == 2


@pytest.mark.parametrize("off", ["0", "off", "OFF", "no"])
def test_turned_off_every_process_measures_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    monkeypatch.setenv("MRECORD_DEVICE_PROFILES", off)
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path))
    measured = Counting()
    remembered("disk", measured)
    remembered("disk", measured)
    assert measured.calls == 2
    assert list(tmp_path.iterdir()) == []


def test_the_default_file_is_in_mrecords_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MRECORD_DEVICE_PROFILES")
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "c"))
    assert device_profiles.profiles_path() == tmp_path / "c" / "device-profiles.json"
    monkeypatch.delenv("MRECORD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert device_profiles.profiles_path() == tmp_path / "x" / "mrecord" / "device-profiles.json"


def test_a_lock_held_too_long_means_measuring_for_oneself(
    kept: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped while measuring must not stop every reader of the host."""
    monkeypatch.setattr(device_profiles, "LOCK_WAIT_SECONDS", 0.05)
    kept.parent.mkdir(parents=True)
    holder = os.open(kept.with_name(kept.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        measured = Counting()
        assert remembered("disk", measured) == Counting()()
        assert measured.calls == 1
        assert not kept.exists()  # not kept: it did not hold the lock
    finally:
        os.close(holder)


def test_probe_storage_keeps_the_profile_under_the_throttle_it_was_measured_under(
    kept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's own key: a process under another read throttle of the same disk
    measures for itself; under the same one it gets the kept numbers."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * 8192)
    calls: list[int] = []

    def fake_measure(path: Path, dev: int, size: int, seconds: float) -> StorageProfile:
        calls.append(1)
        return StorageProfile(device="254:0", iops=100.0 * len(calls), bandwidth=1e8, seconds=0.2)

    monkeypatch.setattr(probe, "_measure", fake_measure)
    limits = ([3000], [262144000])
    monkeypatch.setattr(probe, "_throttle_limits", lambda *args: limits)
    first = probe_storage(data)
    probe.clear_probe_cache()  # as a new process of the host
    assert probe_storage(data) == first and len(calls) == 1
    probe.clear_probe_cache()
    limits = ([200], [157286400])
    other = probe_storage(data)
    assert other is not None and first is not None
    assert len(calls) == 2 and other.iops != first.iops
    assert any("read_iops=200 " in key for key in json.loads(kept.read_text()))


def test_processes_starting_together_measure_the_device_once(kept: Path, tmp_path: Path) -> None:
    """Four processes probing one device at once (ranks of one host): one measures, the
    others wait for its answer and all four see its numbers. Each process's measurement
    (a stand-in: 0.2 s, its own pid as the IOPS, whatever the file system) would differ."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * 8192)
    script = textwrap.dedent(
        f"""
        import json, os, time
        from mrecord.storage import probe
        measured = []
        def measure(*args):
            measured.append(1)
            time.sleep(0.2)
            return probe.StorageProfile("254:0", float(os.getpid()), 1e8, 0.2)
        probe._measure = measure
        profile = probe.probe_storage({str(data)!r})
        print(json.dumps([len(measured), profile.iops]))
        """
    )
    env = {**os.environ, "MRECORD_DEVICE_PROFILES": str(kept)}
    children = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    answers = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    assert sum(count for count, _ in answers) == 1, answers
    assert len({iops for _, iops in answers}) == 1, answers


def test_a_read_throttle_caps_what_a_short_measurement_read_in_its_burst(
    kept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured under 3,000 IOPS / 262 MB/s: 3,947 IOPS and 596 MB/s (the throttle's
    burst in a quarter-second phase); the profile says what the throttle allows."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * 8192)
    measured = StorageProfile(device="254:0", iops=3947.0, bandwidth=596e6, seconds=0.4)
    monkeypatch.setattr(probe, "_measure", lambda *args: measured)
    monkeypatch.setattr(probe, "_throttle_limits", lambda *args: ([5000, 3000], [262144000]))
    profile = probe_storage(data)
    assert profile is not None
    assert (profile.iops, profile.bandwidth) == (3000.0, 262144000.0)
    probe.clear_probe_cache()
    monkeypatch.setattr(probe, "_throttle_limits", lambda *args: ([], []))
    unthrottled = probe_storage(data)
    assert unthrottled is not None
    assert (unthrottled.iops, unthrottled.bandwidth) == (3947.0, 596e6)


def test_a_damaged_kept_entry_is_measured_again_and_capped_as_a_fresh_one(
    kept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry under the key whose numbers are not numbers: measured again, and the
    throttle caps that measurement as it caps any other."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * 8192)
    measured = StorageProfile(device="254:0", iops=3947.0, bandwidth=596e6, seconds=0.4)
    monkeypatch.setattr(probe, "_measure", lambda *args: measured)
    monkeypatch.setattr(probe, "_throttle_limits", lambda *args: ([3000], [262144000]))
    probe_storage(data)
    entries = json.loads(kept.read_text())
    (key,) = entries
    entries[key]["iops"] = "not a number"
    kept.write_text(json.dumps(entries))
    probe.clear_probe_cache()
    profile = probe_storage(data)
    assert profile is not None
    assert (profile.iops, profile.bandwidth) == (3000.0, 262144000.0)
