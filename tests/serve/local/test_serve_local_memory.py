"""A same-host reader whose data is larger than its memory (issue 23's "never OOM-killed").

A ``RemoteDataset`` on the same-host transport receives its blocks in shared-memory
segments it allocates (and populates) itself, so they are charged to its own memory group.
Its blocks were 16 MiB whatever its memory: with the pipeline's queue of 16 blocks ahead
of a consumer slower than the server, a client in a 200 MB group reading 800 MB of
variable-shape rows was OOM-killed holding 127 MB of segments (2026-11-29). Its blocks
now come out of its memory budget as ``MindDataset``'s do.

Needs root and the cgroup v1 memory controller (fails, never skips, without: the same
rule as tests/storage/test_beyond_ram.py).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.server.run import ServerThread
from tests.memory_groups import need_memory_groups, run_in_memory_group

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)

ROWS = 100_000
WIDTH = 8


def _lengths(ids: np.ndarray) -> np.ndarray:
    """Row i's ``pts`` has ``1 + i % 250`` rows of ``WIDTH`` float32 (~4 KB on average)."""
    return 1 + ids % 250


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~400 MB of variable-shape rows, ``pts[i]`` all ``i``."""
    path = tmp_path_factory.mktemp("big") / "big.mrecord"
    with FileWriter(path, overwrite=True) as writer:
        writer.add_schema(
            {"id": {"type": "int64"}, "pts": {"type": "float32", "shape": [-1, WIDTH]}}
        )
        for start in range(0, ROWS, 10_000):
            ids = np.arange(start, start + 10_000, dtype=np.int64)
            lengths = _lengths(ids).tolist()
            pts = [
                np.full((k, WIDTH), i, dtype=np.float32) for i, k in zip(ids, lengths, strict=True)
            ]
            writer.write_raw_data({"id": ids, "pts": pts})
    return path


@pytest.fixture(scope="module")
def server(big: Path) -> Iterator[ServerThread]:
    with ServerThread({"big": big}) as srv:
        assert srv.local_socket_path is not None
        yield srv


_CLIENT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from mrecord import RemoteDataset
    url, rows, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ds = RemoteDataset(url, "big", shuffle=False, transport="local")
    bad = seen = 0
    rows_out = ds.create_tuple_iterator(num_epochs=1, output_numpy=True, columns=["id", "pts"])
    for ident, pts in rows_out:
        i = int(ident)
        if (i != seen or pts.shape != (1 + i % 250, width)
                or pts[0, 0] != i or pts[-1, -1] != i):
            bad += 1
        seen += 1
        if seen % 2_000 == 0:
            time.sleep(0.02)  # a training step: the server gets ahead, the queue fills
    print(json.dumps({"bad": bad, "rows": seen}))
    """
)


def test_a_same_host_reader_in_a_memory_group_half_the_data_reads_every_row(
    server: ServerThread, big: Path
) -> None:
    """The client alone in a 200 MB group (the server outside it), 400 MB of rows in file
    order: every row, right, in order, and the client never killed."""
    need_memory_groups("a reader in a 200 MB memory group")
    data = big.stat().st_size
    assert data > 350 << 20
    result = run_in_memory_group(200 << 20, _CLIENT, server.url, str(ROWS), str(WIDTH))
    assert result == {"bad": 0, "rows": ROWS}
