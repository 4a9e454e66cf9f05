"""Batched ``bytes`` reads reuse freed memory instead of faulting it in again, unless the
user chose otherwise (``mrecord.storage.allocator``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter

# In a fresh interpreter (the setting is per process): read 8 batches of 128 values of
# 100 KB and count the page faults of batches 2..8; print them and the setting's outcome.
_SCRIPT = """
import json, resource, sys
import numpy as np
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import allocator
reader = DatasetReader.open(sys.argv[1])
rng = np.random.default_rng(0)
faults = []
for i in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    rows = reader.read_rows(rng.choice(reader.num_rows, 128, replace=False), ["blob"])
    assert sum(len(b) for b in rows.columns["blob"]) == 128 * 100_000
    del rows
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"applied": allocator.keep_freed_memory(), "faults": faults[1:]}))
"""


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """512 rows of 100 KB ``bytes``."""
    path = tmp_path_factory.mktemp("alloc") / "blobs.mrecord"
    writer = FileWriter(str(path), overwrite=True)
    writer.add_schema({"blob": {"type": "bytes"}}, "blobs")
    rng = np.random.default_rng(1)
    writer.write_raw_data({"blob": [rng.bytes(100_000) for _ in range(512)]})
    writer.commit()
    return path


def _run(path: Path, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.pop("MRECORD_KEEP_FREED_MEMORY", None)
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


_GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")


@pytest.mark.skipif(not _GLIBC, reason="glibc only")
def test_later_batches_reuse_memory(blobs: Path) -> None:
    """With the setting, a batch after the first faults in far less than its 12.8 MB
    (3,125 pages)."""
    kept = _run(blobs)
    assert kept["applied"] is True
    faults = kept["faults"]
    assert isinstance(faults, list) and max(faults) < 1000, faults


def test_opting_out_leaves_the_allocator_alone(blobs: Path) -> None:
    """MRECORD_KEEP_FREED_MEMORY=0 turns the setting off. (What glibc then does with the
    freed values is its own business: whether the heap's top can be trimmed depends on
    what else was allocated above it, so the fault count is not asserted here. CI once
    saw glibc's defaults reuse the memory too.)"""
    assert _run(blobs, MRECORD_KEEP_FREED_MEMORY="0")["applied"] is False


@pytest.mark.skipif(not _GLIBC, reason="glibc only")
def test_user_malloc_settings_are_left_alone(blobs: Path) -> None:
    """A user's own MALLOC_* variable stands: mrecord does not call mallopt. With an mmap
    threshold under the values' size, each value is its own mapping and every batch
    faults all of its pages in again: the count above can see refaults, and the user's
    choice was not overridden by the setting's 32 MiB threshold."""
    chosen = _run(blobs, MALLOC_MMAP_THRESHOLD_="65536")
    assert chosen["applied"] is False
    faults = chosen["faults"]
    assert isinstance(faults, list) and min(faults) > 2500, faults
    assert _run(blobs, MALLOC_TRIM_THRESHOLD_="131072")["applied"] is False
