"""Measured device profiles kept on disk, so that the processes of a host measure a device once.

A training job starts many processes on one host: a rank per accelerator, a new process
after each preemption or restart, one per evaluation. Each ``Shuffle.BLOCK`` (or
``Shuffle.ADAPTIVE``) reader measures the device under its files before its first row
(``mrecord.storage.probe``): 0.15 s on a fast disk, 0.43 s on a volume throttled to 3,000
IOPS / 250 MB/s, where both phases run to their time cap (measured 2026-11-28: most of the
0.5 s before such a reader's first batch); and ranks starting together measure each other's
reads. Here the first process measures while holding a lock, the others wait for its
answer (at most :data:`LOCK_WAIT_SECONDS`, then they measure for themselves), and the
answer is written to ``device-profiles.json`` in mrecord's cache folder
(``$MRECORD_CACHE_DIR``, default ``~/.cache/mrecord``) for :data:`MAX_AGE_SECONDS`.

An answer is kept under a key the caller builds (the device, the process's read throttle
on it, the boot), never shared across those. ``MRECORD_DEVICE_PROFILES`` names another
file, or turns this off (``0``, ``off``): every process then measures. A folder that cannot
be written, a lock that cannot be taken, or a damaged file only mean measuring again: this
cache never makes a read fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from mrecord.errors import UnsupportedPlatformError
from mrecord.storage.cache_folder import cache_root
from mrecord.storage.locking import try_lock, unlock

__all__ = ["LOCK_WAIT_SECONDS", "MAX_AGE_SECONDS", "Numbers", "profiles_path", "remembered"]

MAX_AGE_SECONDS = 3600.0
"""How long a measured profile answers for its device (a cloud volume's burst credits or a
neighbour's load change what it delivers; a measurement is 0.15-0.5 s)."""
LOCK_WAIT_SECONDS = 5.0
"""How long a process waits for another one's measurement before measuring itself."""

_ENV = "MRECORD_DEVICE_PROFILES"
_OFF = {"0", "off", "no", "false", "none"}
_WHY = "sharing measured device profiles"

Numbers = dict[str, float | str]
"""A profile as stored: names to numbers or strings (JSON)."""


def profiles_path() -> Path | None:
    """The file of kept profiles, or None where ``MRECORD_DEVICE_PROFILES`` turns them off."""
    chosen = os.environ.get(_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in _OFF else Path(chosen)
    return cache_root() / "device-profiles.json"


def remembered(key: str, measure: Callable[[], Numbers | None]) -> Numbers | None:
    """The profile kept for ``key`` when younger than :data:`MAX_AGE_SECONDS`, else what
    ``measure()`` gives (then kept for the next process; None is not kept)."""
    path = profiles_path()
    if path is None:
        return measure()
    fd = _lock(path)
    if fd is None:
        return measure()
    try:
        kept = _load(path)
        now = time.time()
        fresh = {k: v for k, v in kept.items() if 0 <= now - float(v["at"]) < MAX_AGE_SECONDS}
        if key in fresh:
            return {k: v for k, v in fresh[key].items() if k != "at"}
        numbers = measure()
        if numbers is not None:
            fresh[key] = {**numbers, "at": now}
            _store(path, fresh)
        return numbers
    finally:
        unlock(fd)
        os.close(fd)


def _lock(path: Path) -> int | None:
    """The lock file's descriptor, locked; None when it cannot be had in time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    try:
        while not try_lock(fd, _WHY):
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)
    except (OSError, UnsupportedPlatformError):
        os.close(fd)
        return None
    return fd


def _load(path: Path) -> dict[str, dict[str, float | str]]:
    """The kept profiles; entries that are not a mapping with a numeric ``at`` are left
    out, and a file that is missing or not JSON is empty."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): v
        for k, v in data.items()
        if isinstance(v, dict) and isinstance(v.get("at"), (int, float))
    }


def _store(path: Path, profiles: dict[str, dict[str, float | str]]) -> None:
    """Replace the file whole (a reader never sees half of it); errors leave it as it was."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(json.dumps(profiles, indent=1, sort_keys=True))
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
