"""Helpers for the tests that run a reader, a loader or a command in a cgroup v1 memory
group: where groups cannot be made, such a test fails (never skips) and says why; the
run itself (:func:`run_in_memory_group`), from a cold page cache, the group removed after."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
REPO = Path(__file__).resolve().parents[1]


def need_memory_groups(what: str) -> None:
    """Fail unless this process is root and the cgroup v1 memory controller is mounted
    at ``CGROUP_ROOT``; ``what``: what the test runs in a memory group (for the message)."""
    if os.geteuid() != 0 or not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
        pytest.fail(
            "this test needs root and the cgroup v1 memory controller mounted at "
            f"{CGROUP_ROOT} (it runs {what} in a memory group); neither is here"
        )


def run_in_memory_group(limit: int, script: str, *args: str, timeout: float = 600) -> Any:
    """Run ``script`` (a reader printing JSON last) in a fresh cgroup v1 memory group of
    ``limit`` bytes from a cold page cache; what it printed, after checking that it
    ended well and that the group never went over its limit. A run past ``timeout``
    (stalled at the limit) fails. Every process left in the group is killed and the group
    removed whatever happens."""
    group = CGROUP_ROOT / f"io-test-{os.getpid()}-{limit}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit))
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        command = [
            "sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh",
            sys.executable, "-c", script, *args,
        ]  # fmt: skip
        try:
            proc = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"the reader stalled at its group's {limit >> 20} MB for {timeout:.0f} s")
        assert proc.returncode == 0, f"the reader died ({proc.returncode}): {proc.stderr[-800:]}"
        assert int((group / "memory.max_usage_in_bytes").read_text()) <= limit
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        empty_group(group)
        group.rmdir()


def empty_group(group: Path) -> None:
    """Kill every process left in ``group`` (a reader's DataLoader workers, a stalled run)
    and wait for them to leave it."""
    for _ in range(50):
        pids = (group / "cgroup.procs").read_text().split()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.1)
