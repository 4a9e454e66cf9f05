"""Response bodies written as many buffers (``serve/server/gather.py``): the bytes arrive
whole and in order, flow control pauses and resumes the writer, a close waits for what is
queued, a peer that goes away ends the connection; a served block of big values is sent
without being copied into one buffer, and over TLS it still is (TLS needs the bytes)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.certs import self_signed
from mrecord import FileWriter, RemoteDataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.serve.protocol import wire
from mrecord.serve.server.gather import GatheredBody, GatheringTransport, gathering
from mrecord.serve.server.run import ServerThread

TOKEN = "gather-token"


class _Recorder(asyncio.Protocol):
    """What the transport told its protocol, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.lost = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self.calls.append("pause")

    def resume_writing(self) -> None:
        self.calls.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


def _reader(sock: socket.socket, into: bytearray) -> threading.Thread:
    """A thread that reads ``sock`` into ``into`` until the peer closes it."""

    def run() -> None:
        sock.settimeout(30)
        while chunk := sock.recv(1 << 16):
            into.extend(chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _pieces(seed: int, count: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(n)) for n in rng.integers(1, 60_000, size=count)]


async def _connected(
    small_buffer: bool = True,
) -> tuple[GatheringTransport, _Recorder, socket.socket]:
    ours, theirs = socket.socketpair()
    if small_buffer:  # the socket takes a little at a time: the writer must wait for room
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 << 10)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_accepted_socket(_Recorder, ours)
    wrapped = gathering(transport, protocol)
    assert isinstance(wrapped, GatheringTransport)
    return wrapped, protocol, theirs


async def _until(condition: Callable[[], bool], seconds: float = 30) -> None:
    """Wait for ``condition``; a TimeoutError after ``seconds`` means it never came true
    (a hang bound, not a speed check)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), seconds)


def test_buffers_arrive_whole_and_in_order_with_flow_control() -> None:
    pieces = _pieces(1, 120)  # ~3.5 MB: far more than the socket takes at once
    got = bytearray()

    async def main() -> list[str]:
        transport, protocol, theirs = await _connected()
        try:
            transport.write(b"HEAD")
            transport.write(GatheredBody(pieces[:70]))
            # Nobody reads yet: the sockets take a few hundred KB, the rest is queued and
            # the writer told to wait. (A reader started first could drain the socket as
            # fast as the write filled it on the other core, and no pause came: CI, under
            # load, 2026-11-29.)
            assert protocol.calls == ["pause"]
            assert transport.get_write_buffer_size() > 0
            reading = _reader(theirs, got)
            transport.write(memoryview(b"-MID-"))
            transport.writelines(pieces[70:])
            await _until(lambda: transport.get_write_buffer_size() == 0)
            transport.close()
            await asyncio.wait_for(protocol.lost, 30)
            reading.join(30)
        finally:
            transport.abort()  # closed already when it went well; else no socket leaks
            theirs.close()
        return protocol.calls

    calls = asyncio.run(main())
    assert bytes(got) == b"HEAD" + b"".join(pieces[:70]) + b"-MID-" + b"".join(pieces[70:])
    assert calls == ["pause", "resume"]  # told to resume once the queue had drained


def test_close_sends_everything_queued_first() -> None:
    pieces = _pieces(2, 80)
    got = bytearray()

    async def main() -> bool:
        transport, protocol, theirs = await _connected()
        reading = _reader(theirs, got)
        transport.write(GatheredBody(pieces))
        transport.close()
        closing = transport.is_closing()
        transport.write(b"after close")  # dropped, as asyncio drops it
        await asyncio.wait_for(protocol.lost, 30)
        reading.join(30)
        theirs.close()
        return closing

    assert asyncio.run(main())
    assert bytes(got) == b"".join(pieces)


def test_write_eof_waits_for_what_is_queued() -> None:
    pieces = _pieces(4, 80)
    got = bytearray()

    async def main() -> None:
        transport, protocol, theirs = await _connected()
        reading = _reader(theirs, got)  # ends at the end of the stream
        transport.write(GatheredBody(pieces))
        transport.write_eof()
        await asyncio.wait_for(asyncio.to_thread(reading.join, 30), 35)
        transport.close()
        await asyncio.wait_for(protocol.lost, 30)
        theirs.close()

    asyncio.run(main())
    assert bytes(got) == b"".join(pieces)


def test_a_peer_that_goes_away_ends_the_connection() -> None:
    async def main() -> tuple[Any, int]:
        transport, protocol, theirs = await _connected()
        theirs.close()
        transport.write(GatheredBody(_pieces(3, 80)))  # EPIPE at once or once there is room
        lost = await asyncio.wait_for(protocol.lost, 30)
        return lost, transport.get_write_buffer_size()

    lost, queued = asyncio.run(main())
    assert lost is None  # aborted: the protocol learns the connection is gone
    assert queued == 0  # nothing kept for a socket that is closed


def _big_values(path: Path, rows: int = 48) -> Path:
    """Rows of 20-200 KB random bytes: blocks of megabytes, values bigger than the
    threshold from which the server sends them as they are."""
    rng = np.random.default_rng(5)
    writer = FileWriter(str(path), shard_num=2, overwrite=True)
    writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}}, "big")
    writer.write_raw_data(
        [{"id": i, "blob": rng.bytes(int(rng.integers(20_000, 200_000)))} for i in range(rows)]
    )
    writer.commit()
    return Path(f"{path}0")


@pytest.fixture
def count_joins(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times the server copied a block's big values into one buffer."""
    calls: list[int] = []
    joined = wire._join_into

    def counted(*args: Any) -> memoryview:
        calls.append(1)
        return joined(*args)

    monkeypatch.setattr(wire, "_join_into", counted)
    yield calls


def _remote_equals_local(url: str, shard: Path, **kw: Any) -> None:
    ids = np.random.default_rng(7).permutation(48)
    ds = RemoteDataset(url, "big", ["id", "blob"], token=TOKEN, transport="http", **kw)
    try:
        got = ds.read_rows(ids, ["id", "blob"])
    finally:
        ds.close()
    want = DatasetReader.open(str(shard)).read_rows(ids, ["id", "blob"])
    assert [int(v) for v in got.columns["id"]] == [int(v) for v in want.columns["id"]]
    assert [bytes(v) for v in got.columns["blob"]] == [bytes(v) for v in want.columns["blob"]]


def test_a_block_of_big_values_is_sent_without_joining_it(
    tmp_path: Path, count_joins: list[int]
) -> None:
    shard = _big_values(tmp_path / "big.mrecord")
    with ServerThread({"big": shard}, token=TOKEN, local_socket=False) as server:
        _remote_equals_local(server.url, shard)
    assert count_joins == []


def test_over_tls_big_values_are_joined_and_arrive_intact(
    tmp_path: Path, count_joins: list[int]
) -> None:
    shard = _big_values(tmp_path / "big.mrecord")
    cert, key = self_signed(tmp_path, "127.0.0.1")
    with ServerThread(
        {"big": shard}, token=TOKEN, local_socket=False, tls_cert=cert, tls_key=key
    ) as server:
        _remote_equals_local(server.url, shard, cafile=str(cert))
    assert count_joins  # TLS must see the bytes: the values went through one buffer
