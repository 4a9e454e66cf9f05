"""What a call allocates at its peak, by ``tracemalloc`` (Python objects and numpy's
buffers): the tests that a step holds a bounded part of a large input at a time."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def traced_peak(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and the most bytes traced while it ran, above what was traced
    before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return result, peak


def resident_anonymous() -> int:
    """This process's anonymous resident memory in bytes (``RssAnon``): what its heaps and
    Arrow's pool hold, which ``tracemalloc`` does not see (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) << 10
    raise AssertionError("no RssAnon in /proc/self/status")


def run_child(script: str, *args: str, timeout: float = 300) -> Any:
    """Run ``script`` in a fresh interpreter from the repository's root (so it may import
    ``tests.tracing``); the JSON it printed last."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])
