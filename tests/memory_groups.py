"""Helpers for the tests that run a reader, a loader or a command in a cgroup v1 memory
group: where groups cannot be made, such a test fails (never skips) and says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def need_memory_groups(what: str) -> None:
    """Fail unless this process is root and the cgroup v1 memory controller is mounted
    at ``CGROUP_ROOT``; ``what``: what the test runs in a memory group (for the message)."""
    if os.geteuid() != 0 or not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
        pytest.fail(
            "this test needs root and the cgroup v1 memory controller mounted at "
            f"{CGROUP_ROOT} (it runs {what} in a memory group); neither is here"
        )
