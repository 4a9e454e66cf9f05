"""How many rows a RemoteDataset asks for at once: about 16 MiB of values, up to what
the server allows. Small rows went 8,192 to a request while the server takes 65,536
(tabular rows over HTTP: 0.87-0.95M against 1.86-1.89M rows/s in GLOBAL order)."""

from __future__ import annotations

from typing import Any

from mrecord.serve.client.dataset import _block_rows
from mrecord.serve.protocol.limits import Limits


def _info(row_bytes: dict[str, float], **limits: int) -> dict[str, Any]:
    defaults = Limits()
    return {
        "row_bytes": row_bytes,
        "limits": {
            "max_block_rows": limits.get("max_block_rows", defaults.max_block_rows),
            "max_block_bytes": limits.get("max_block_bytes", defaults.max_block_bytes),
        },
    }


def test_small_rows_go_as_many_to_a_request_as_the_server_takes() -> None:
    tabular = _info({"id": 8, "label": 4, "vector": 64})
    assert (
        _block_rows(tabular, ["id", "label", "vector"], None) == Limits().max_block_rows == 65_536
    )
    assert _block_rows(tabular, ["id"], None) == 65_536


def test_a_request_holds_about_16_mib_of_bigger_rows() -> None:
    assert _block_rows(_info({"image": 100_000}), ["image"], None) == (16 << 20) // 100_000
    assert _block_rows(_info({"image": 4 << 20}), ["image"], None) == 16  # at least 16 rows...
    # ...unless the server's bytes limit says fewer
    assert _block_rows(_info({"image": 4 << 20}, max_block_bytes=32 << 20), ["image"], None) == 8


def test_the_servers_row_limit_wins() -> None:
    assert _block_rows(_info({"id": 8}, max_block_rows=1000), ["id"], None) == 1000


def test_a_request_holds_at_most_a_32nd_of_the_memory_budget() -> None:
    """A client's blocks wait in its pipeline's queue (16 of them) in buffers of its own:
    under a memory budget each holds at most a 32nd of it, and never fewer than 16 rows."""
    images = _info({"image": 100_000})
    assert _block_rows(images, ["image"], 128 << 20) == (4 << 20) // 100_000
    assert _block_rows(images, ["image"], 1 << 40) == (16 << 20) // 100_000  # 16 MiB at most
    assert _block_rows(images, ["image"], 1 << 20) == 16
    assert _block_rows(_info({"vec": 256}), ["vec"], 64 << 20) == (2 << 20) // 256
