"""Shared segments of the same-host transport: reuse, servers that go away, damage, fork.

Values a caller keeps must never change when later blocks reuse the shared segments; the
server's maps stay bounded; a server that goes away must fall back to HTTP (``auto``) or say
so (``local``); a damaged page is a ``CorruptFileError``; a forked child reads through its
own connections.
"""


from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle
from mrecord.errors import (
    CorruptFileError,
    DatasetServerError,
)
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import receive
from mrecord.serve.server.local import MAX_SEGMENTS, LocalServer
from mrecord.serve.server.registry import open_datasets
from mrecord.serve.server.run import ServerThread
from tests.serve.local.helpers import (
    BIG_ROWS,
    COLUMNS,
    MB,
    ROWS,
    TRANSPORTS,
    _block,
    _plain,
    _remote,
    _rows,
    _write_mixed,
)

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)


# -- block sizes and reused segments ---------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_blocks_bigger_than_the_first_guess_come_back_whole(
    server: ServerThread, sizes: Path, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three 2 MB values among tiny ones: the segment sized from the mean row is far too
    small for the array values (copied into it), the server answers {"need": n}, and the
    client asks again with a bigger one; big bytes values may lie in the shared files."""
    from mrecord.serve.client.transports import local as local_client

    needs: list[int] = []

    def spy(sock: socket.socket, **kwargs: Any) -> tuple[dict[str, Any], list[int]]:
        message, fds = receive(sock, **kwargs)
        if "need" in message:
            needs.append(int(message["need"]))
        return message, fds

    monkeypatch.setattr(local_client, "receive", spy)
    ds = _remote(server, transport, name="sizes")
    ids = [*BIG_ROWS, 0, 1, BIG_ROWS[0], 47]
    cols = ["arr", "blob", "id"]
    with DatasetReader.open(sizes) as reader:
        want = _block(reader.read_rows(ids, cols), cols)
        small = _block(reader.read_rows([2, 3, 4], cols), cols)
        again = _block(reader.read_rows([7, BIG_ROWS[2]], cols), cols)
    assert _block(ds.read_rows(ids, cols), cols) == want
    assert _block(ds.read_rows([2, 3, 4], cols), cols) == small
    assert _block(ds.read_rows([7, BIG_ROWS[2]], cols), cols) == again  # after a small block
    if transport == "local":
        assert needs and max(needs) > 4 * 2 * MB  # the retry path was taken
    assert _rows(ds) == _rows(MindDataset(sizes, shuffle=Shuffle.GLOBAL))
    assert ds.transport == transport


def test_kept_values_never_change_while_segments_are_reused(images: Path) -> None:
    """Keep every 5th value over 3 epochs of small blocks: each kept value pins its
    segment, so the client makes many more segments than the server maps at once, and
    the free ones are written again."""
    with ServerThread({"imgs": images}, limits=Limits(max_block_rows=8)) as srv:
        remote = _remote(srv, "local", name="imgs", shuffle=Shuffle.GLOBAL)
        local = MindDataset(images, shuffle=Shuffle.GLOBAL)
        kept: list[tuple[np.ndarray, bytes]] = []
        remote_it = remote.create_tuple_iterator(num_epochs=3, output_numpy=True)
        local_it = local.create_tuple_iterator(num_epochs=3, output_numpy=True)
        for _epoch in range(3):
            for i, (got, want) in enumerate(zip(remote_it, local_it, strict=True)):
                assert bytes(got[0]) == bytes(want[0]) and int(got[1]) == int(want[1])
                if i % 5 == 0:
                    kept.append((got[0], bytes(want[0])))
        assert len(kept) == 54
        assert [bytes(value) for value, _ in kept] == [expected for _, expected in kept]
        assert remote.transport == "local"


def _memfd_maps() -> int:
    """Mappings of the transport's segments in this process (client's and server's)."""
    with open("/proc/self/maps") as maps:
        return sum("memfd:mrecord-block" in line for line in maps)


def test_many_epochs_keep_the_server_maps_bounded(images: Path) -> None:
    """Forty epochs of small blocks, keeping the last value of each of the last two epochs
    (so segments are pinned, then dropped): the server is never asked to map more than
    MAX_SEGMENTS per connection, and the mappings and fds do not grow with the epochs."""
    from mrecord.serve.client.session import default_session

    with ServerThread({"imgs": images}, limits=Limits(max_block_rows=8)) as srv:
        remote = _remote(srv, "local", name="imgs", shuffle=Shuffle.GLOBAL)
        local = MindDataset(images, shuffle=Shuffle.GLOBAL)
        remote_it = remote.create_tuple_iterator(num_epochs=40, output_numpy=True)
        local_it = local.create_tuple_iterator(num_epochs=40, output_numpy=True)
        kept: list[tuple[np.ndarray, bytes]] = []
        counts, fds = [], []
        targets: list[dict[str, int]] = []
        for _epoch in range(40):
            last: tuple[np.ndarray, bytes] | None = None
            for got, want in zip(remote_it, local_it, strict=True):
                assert bytes(got[0]) == bytes(want[0])
                last = (got[0], bytes(want[0]))
            assert last is not None
            kept = [*kept[-1:], last]
            # Server-side maps: every mapping of a segment less the client's own one.
            counts.append(_memfd_maps() - len(default_session().segments))
            fds.append(len(os.listdir("/proc/self/fd")))
            targets.append(_fd_targets())
        assert all(bytes(v) == e for v, e in kept)
        assert remote.transport == "local"
        connections = 4 + 2  # num_parallel_workers + 2 idle ones at most
        assert max(counts) <= MAX_SEGMENTS * connections
        # Not growing with the epochs (a segment pinned then dropped each epoch would
        # add one map per epoch if the server were never told to unmap it).
        assert max(counts[-10:]) <= 2 * max(counts[:10])
        # Nor do the open file descriptors (a dropped segment's memfd is closed).
        grown = {
            what: n - targets[9].get(what, 0)
            for what, n in targets[-1].items()
            if n > targets[9].get(what, 0)
        }
        assert max(fds[-10:]) <= max(fds[:10]) + 20, f"new descriptors: {grown}"


def _fd_targets() -> dict[str, int]:
    """This process's open descriptors by what they point at (files by name, sockets,
    pipes and memfds by kind)."""
    found: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":")[0] if ":" in target else target
        found[kind] = found.get(kind, 0) + 1
    return found


# -- a server that goes away -----------------------------------------------------------------------


def test_auto_falls_back_to_http_when_the_socket_stops(
    mixed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        ds = mrecord.RemoteDataset(srv.url, "mixed", shuffle=Shuffle.GLOBAL)
        assert ds.transport == "local"
        want = _rows(MindDataset(mixed, shuffle=Shuffle.GLOBAL), 2)
        got: list[tuple[Any, ...]] = []
        it = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
        with caplog.at_level(logging.WARNING, logger="mrecord.serve"):
            for _ in range(2):
                for row in it:
                    got.append(tuple(_plain(v) for v in row))
                    if len(got) == 50:
                        assert srv._local is not None
                        srv._local.stop()
        assert got == want
        assert ds.transport == "http"
        assert "reading over HTTP" in caplog.text


def test_local_says_the_socket_stopped_answering(mixed: Path) -> None:
    with ServerThread({"mixed": mixed}, limits=Limits(max_block_rows=16)) as srv:
        ds = mrecord.RemoteDataset(srv.url, "mixed", shuffle=False, transport="local")
        assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=False), 1)
        assert srv._local is not None
        srv._local.stop()
        with pytest.raises(DatasetServerError, match="stopped answering"):
            _rows(ds, 1)
        with pytest.raises(DatasetServerError, match="stopped answering"):
            ds.read_rows([1, 2])


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("first_read", ["before", "after"])
def test_a_dataset_replaced_on_disk_is_served_as_it_was_opened(
    mixed: Path, tmp_path: Path, transport: str, first_read: str
) -> None:
    """Writing a new dataset over the served one (new files at the same paths) changes
    nothing for readers: the server serves, and shares, the files it opened."""
    path = tmp_path / "mixed.mrecord"
    first = _write_mixed(path)
    with ServerThread({"m": first}) as srv:
        ds = _remote(srv, transport, name="m")
        ids = np.arange(0, ROWS, 7)
        if first_read == "before":
            ds.read_rows(ids, ["blob"])
        with DatasetReader.open(first) as reader:
            want = _block(reader.read_rows(ids, ["blob", "text"]), ["blob", "text"])
        with FileWriter(path, shard_num=3, overwrite=True) as writer:
            writer.add_schema({"blob": {"type": "bytes"}, "text": {"type": "string"}})
            writer.write_raw_data(
                {"blob": [bytes([i % 251]) * 300 for i in range(ROWS)], "text": ["new"] * ROWS}
            )
        assert _block(ds.read_rows(ids, ["blob", "text"]), ["blob", "text"]) == want
        assert ds.transport == transport


def test_a_server_restarted_on_the_same_socket_with_new_files_is_read_right(
    mixed: Path, tmp_path: Path
) -> None:
    v2 = tmp_path / "v2" / "mixed.mrecord"
    v2.parent.mkdir()
    with FileWriter(v2, shard_num=3, overwrite=True) as writer:
        writer.add_schema({"blob": {"type": "bytes"}, "id": {"type": "int64"}})
        writer.write_raw_data(
            {
                "blob": [bytes([i % 251]) * (i % 7 + 1) for i in range(ROWS)],
                "id": np.arange(ROWS, dtype=np.int64),
            }
        )
    ids = np.arange(0, ROWS, 5)
    with DatasetReader.open(Path(str(v2) + "0")) as reader:
        want = [bytes(v) for v in reader.read_rows(ids, ["blob"]).columns["blob"]]
    with ServerThread({"m": mixed}) as srv:
        ds = _remote(srv, "local", name="m")
        ds.read_rows(ids, ["blob"])  # the old files are mapped here now
        assert srv._local is not None
        path = srv._local.path
        srv._local.stop()  # `mrecord serve` restarted on the same socket, new files
        opened = open_datasets({"m": Path(str(v2) + "0")})
        try:
            with LocalServer(opened, path, token=None, limits=Limits()):
                got = [bytes(v) for v in ds.read_rows(ids, ["blob"]).columns["blob"]]
        finally:
            for served in opened.values():
                served.close()
    assert got == want


def test_connections_the_server_closed_when_idle_are_replaced(
    mixed: Path, truth: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training job that pauses (evaluation, a checkpoint) longer than the server keeps
    idle connections goes on reading through the socket, not over HTTP."""
    from mrecord.serve.server import local as local_server

    monkeypatch.setattr(local_server, "IDLE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(local_server, "_IDLE_CHECK_S", 0.1)
    with ServerThread({"mixed": mixed}) as srv:
        ds = _remote(srv, "local", name="mixed", shuffle=False)
        want = [tuple(_plain(truth[c][i]) for c in COLUMNS) for i in range(ROWS)]
        local = srv._local
        assert local is not None
        for _pause in range(3):
            assert _rows(ds, 1) == want
            assert local._connections  # this process's connections, idle now
            for _ in range(600):  # until the server has closed them (a bounded wait)
                if not local._connections:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the server never closed the idle connections")
        assert ds.transport == "local"


# -- a damaged file --------------------------------------------------------------------------------


def _damaged_copy(mixed: Path, tmp_path: Path, column: str, page: int) -> tuple[Path, list[int]]:
    """A copy of ``mixed`` with one byte flipped in ``page`` of ``column`` of its first
    shard; the global ids of that page's rows."""
    from mrecord.storage.shard import ShardFile

    for f in mixed.parent.glob("mixed.mrecord*"):
        if not f.name.endswith("-lock"):
            shutil.copy(f, tmp_path / f.name)
    first = tmp_path / mixed.name
    with ShardFile(first) as shard:
        chunk = shard.meta.chunks[page, shard.field_index(column)]
        offset = int(chunk["offset"]) + int(chunk["length"]) // 2
        ids = list(range(int(shard.page_starts[page]), int(shard.page_starts[page + 1])))
    data = bytearray(first.read_bytes())
    data[offset] ^= 0xFF
    first.write_bytes(bytes(data))
    return first, ids


def test_a_corrupt_page_is_a_corrupt_file_error_through_the_socket(
    mixed: Path, tmp_path: Path
) -> None:
    first, ids = _damaged_copy(mixed, tmp_path, "blob", 1)
    with ServerThread({"bad": first}) as srv:
        ds = mrecord.RemoteDataset(srv.url, "bad", transport="local", shuffle=False)
        with pytest.raises(CorruptFileError, match="corrupt_file"):
            ds.read_rows([0, ids[1]], ["blob"])
        with pytest.raises(CorruptFileError, match="checksum"):
            _rows(ds, 1)
        # the same connection still serves what is intact
        ok = ds.read_rows([ids[1], 0], ["id", "text"])
        assert [int(v) for v in ok.columns["id"]] == [ids[1], 0]
        assert ds.transport == "local"


def test_a_corrupt_first_page_still_lets_the_dataset_open(mixed: Path, tmp_path: Path) -> None:
    first, ids = _damaged_copy(mixed, tmp_path, "blob", 0)
    MindDataset(first)  # opens: only reading the damaged rows fails
    with ServerThread({"bad": first}) as srv:
        ds = mrecord.RemoteDataset(srv.url, "bad", transport="local", shuffle=False)
        with pytest.raises(CorruptFileError):
            ds.read_rows(ids[:2], ["blob"])
        assert [int(v) for v in ds.read_rows(ids[:2], ["id"]).columns["id"]] == ids[:2]


# -- fork ------------------------------------------------------------------------------------------


def _digest(ds: mrecord.RemoteDataset, epochs: int) -> list[tuple[int, str]]:
    out = []
    for _ in range(epochs):
        for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            blob = bytes(row[COLUMNS.index("blob")]) + str(row[COLUMNS.index("text")]).encode()
            out.append((int(row[COLUMNS.index("id")]), hashlib.sha256(blob).hexdigest()))
    return out


def _values(block: Any) -> list[tuple[bytes, str]]:
    pairs = zip(block.columns["blob"], block.columns["text"], strict=True)
    return [(bytes(b), str(t)) for b, t in pairs]


def _read_in_child(
    ds: mrecord.RemoteDataset, truth: dict[str, list[Any]], go: Any, out: Any
) -> None:
    try:
        if not go.wait(60):
            raise TimeoutError("the parent never said go")
        # Blocks kept alive: they take every free segment of this process's pool, so
        # one shared with the parent would be written here while the parent uses it.
        rng = np.random.default_rng(3)
        kept = [(ids, ds.read_rows(ids, ["blob", "text"])) for ids in rng.permuted(
            np.tile(np.arange(ROWS), (12, 1)), axis=1
        )]  # fmt: skip
        rows = _digest(ds, 3)
        intact = all(
            _values(block) == [(truth["blob"][i], truth["text"][i]) for i in ids]
            for ids, block in kept
        )
        local = ds._transport._local
        link = local._link if local is not None else None
        own = link is not None and all(c.pid == os.getpid() for c in link._idle)
        out.put((rows, intact, ds.transport, own))
    except BaseException as exc:
        out.put(repr(exc))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_reads_through_its_own_connections_and_memory(
    server: ServerThread, truth: dict[str, list[Any]]
) -> None:
    """A DataLoader worker forks after the parent has read: the child's reads and the
    parent's, at the same time, must each get their own rows and keep them (a shared
    connection would mix the answers up; a shared segment would overwrite values)."""
    import multiprocessing

    ds = _remote(server, "local", shuffle=False)
    want = _digest(mrecord.RemoteDataset(server.url, "mixed", shuffle=False, transport="http"), 1)
    everything = [(truth["blob"][i], truth["text"][i]) for i in range(ROWS)]
    before = ds.read_rows(np.arange(ROWS), ["blob", "text"])  # kept across the fork
    assert _digest(ds, 1) == want  # the link has idle connections, the pool free segments
    ctx = multiprocessing.get_context("fork")
    out, go = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_read_in_child, args=(ds, truth, go, out))
    child.start()
    try:
        after = ds.read_rows(np.arange(ROWS), ["blob", "text"])  # in a segment from before
        go.set()
        parent_rows = _digest(ds, 3)
        answer = out.get(timeout=120)
    finally:
        go.set()
        child.join(60)
    assert child.exitcode == 0
    assert not isinstance(answer, str), answer
    rows, intact, transport, own = answer
    assert rows == want * 3 and intact
    assert transport == "local" and own
    assert parent_rows == want * 3
    assert _values(before) == everything
    assert _values(after) == everything
    assert ds.transport == "local"
