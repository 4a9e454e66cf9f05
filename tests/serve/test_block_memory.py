"""The server's blocks in flight within its memory budget (issue 28): a server started in a
300 MB memory group was OOM-killed holding blocks of 25 MB (their values and the encoded
copy) on every read thread, and idle buffers kept for the next ones."""

from __future__ import annotations

from pathlib import Path

import anyio
import numpy as np
import pytest
from starlette.testclient import TestClient

from mrecord import DatasetReader, FileWriter
from mrecord.serve.buffers import BufferPool
from mrecord.serve.protocol.wire import decode_block, encode_request
from mrecord.serve.server.app import create_app
from mrecord.serve.server.memory import BlockMemory
from mrecord.serve.server.registry import ServedDataset


def test_no_budget_admits_everything_at_once() -> None:
    async def run() -> None:
        memory = BlockMemory.for_budget(None)
        assert memory.capacity is None
        assert [await memory.acquire(1 << 40) for _ in range(3)] == [0, 0, 0]

    anyio.run(run)


def test_the_capacity_is_half_the_budget_and_at_least_32_mib() -> None:
    assert BlockMemory.for_budget(1 << 30).capacity == 1 << 29
    assert BlockMemory.for_budget(10 << 20).capacity == 32 << 20


def test_a_block_waits_until_the_ones_in_flight_are_sent() -> None:
    """60 + 60 > 100: the second waits for the first's release; a block bigger than the
    capacity is admitted alone (held as the capacity) and makes the next one wait."""
    order: list[str] = []

    async def run() -> None:
        memory = BlockMemory(100)
        first = await memory.acquire(60)
        assert first == 60 and memory.used == 60

        async def second() -> None:
            held = await memory.acquire(60)
            order.append("second admitted")
            await memory.release(held)

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await anyio.sleep(0)  # let it try
            await anyio.wait_all_tasks_blocked()
            order.append("first released")
            await memory.release(first)
        assert order == ["first released", "second admitted"]
        assert memory.used == 0
        big = await memory.acquire(500)
        assert big == 100 and memory.used == 100
        with anyio.move_on_after(0.2) as waited:
            await memory.acquire(1)
        assert waited.cancelled_caught  # nothing else fits beside it
        await memory.release(big)
        assert await memory.acquire(1) == 1

    anyio.run(run)


def test_idle_buffers_kept_stay_within_keep_bytes() -> None:
    pool = BufferPool(keep=4, keep_bytes=4 << 20)
    a = pool.take(3 << 20)  # rounded to 3 MiB: kept
    b = pool.take(3 << 20)  # another 3 MiB would make 6: handed out, not kept
    del a, b
    again = pool.take(3 << 20)
    assert again.base is not None and again.base.size == 3 << 20  # the kept one, reused
    other = pool.take(3 << 20)  # the kept one is in use: a fresh one
    assert other.base is None or other.base is not again.base


def test_the_server_gives_back_what_each_answer_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a budget the blocks endpoint holds about twice a block's bytes while it answers
    and nothing once the answers are sent (a leak would stop the server admitting any)."""
    path = tmp_path / "d.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.write_raw_data([{"id": i, "blob": bytes([i]) * 50_000} for i in range(40)])
    made: list[BlockMemory] = []
    real = BlockMemory.for_budget

    def spy(budget: int | None) -> BlockMemory:
        made.append(real(64 << 20))  # as if the server had 64 MiB to fill
        return made[-1]

    monkeypatch.setattr(BlockMemory, "for_budget", staticmethod(spy))
    served = ServedDataset("d", path, DatasetReader.open(path))
    held: list[int] = []
    acquire = BlockMemory.acquire

    async def watch(self: BlockMemory, nbytes: int) -> int:
        got = await acquire(self, nbytes)
        held.append(got)
        return got

    monkeypatch.setattr(BlockMemory, "acquire", watch)
    try:
        app = create_app({"d": served})
        with TestClient(app, base_url="http://127.0.0.1:8750") as client:
            for ids in (np.arange(10), np.arange(10, 40)):
                body = encode_request(ids, None)
                answer = client.post("/api/datasets/d/blocks", content=body)
                assert answer.status_code == 200
                rows, block = decode_block(answer.content)
                assert rows == len(ids)
                assert [bytes(v) for v in block["blob"]] == [bytes([i]) * 50_000 for i in ids]
    finally:
        served.close()
    assert len(made) == 1 and made[0].used == 0
    # 10 and 30 rows of 50 KB values and an 8-byte id, twice (the average value size
    # comes from the page directory: a few bytes of offsets more)
    for got, rows in zip(held, (10, 30), strict=True):
        assert 2 * rows * 50_008 <= got <= 2 * rows * 50_008 + 64, (got, rows)
