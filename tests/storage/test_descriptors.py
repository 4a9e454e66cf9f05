"""A dataset of many shards leaves the rest of the process file descriptors: a shard holds
its map's descriptor and, reading cold data, one for ``pread`` and one ``O_DIRECT``. A
dataset of 1,000 shards read in GLOBAL order held 2,006; under the usual soft limit of
1,024 the training script's next ``open`` failed with ``EMFILE``. Each case runs in a
child process: the limits it sets are the child's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.many_shards import write_many_shards
from tests.memory_groups import REPO

SHARDS = 150


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_many_shards(tmp_path_factory.mktemp("shards"), SHARDS)


_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, warnings
    import numpy as np
    soft, hard = int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    from mrecord import DatasetReader
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = DatasetReader.open(sys.argv[1] + "000")
    for shard in reader.shards:  # what cold reads open, shard by shard
        shard.read_fd()
        shard.direct_fd()
    ids = np.random.default_rng(0).permutation(reader.num_rows)
    rows = np.asarray(reader.read_rows(ids).columns["id"])
    spare = []
    try:
        for _ in range(48):  # what the rest of the process opens next
            spare.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    print(json.dumps({
        "right": bool(np.array_equal(np.sort(rows), np.arange(reader.num_rows))),
        "spare": len(spare),
        "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "warned": sorted({type(w.message).__name__ for w in caught}),
    }))
    """
)


def _child(path: Path, soft: int, hard: int) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(soft), str(hard)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 0, proc.stderr[-800:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_the_soft_limit_is_raised_to_make_room_for_the_shards(many_shards: Path) -> None:
    """Soft 256, hard 4,096: 150 shards' three descriptors each fit once the soft limit
    is raised, and the process can still open files after."""
    result = _child(many_shards, 256, 4096)
    assert result["right"] and result["spare"] == 48
    assert isinstance(result["soft"], int) and 3 * SHARDS + 48 < result["soft"] <= 4096
    assert result["warned"] == []


def test_where_the_hard_limit_is_too_low_the_shards_leave_a_reserve_and_warn(
    many_shards: Path,
) -> None:
    """Soft and hard 240: the maps fit, the faster descriptors are refused past the
    reserve (those shards read through their maps), the process can still open 48 files,
    and a DescriptorLimitWarning says what to do."""
    result = _child(many_shards, 240, 240)
    assert result["right"] and result["spare"] == 48
    assert result["soft"] == 240
    assert result["warned"] == ["DescriptorLimitWarning"]
