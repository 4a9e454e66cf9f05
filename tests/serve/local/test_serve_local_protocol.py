"""The raw same-host protocol: what a hostile or broken peer gets.

The Unix socket must refuse what a hostile or broken peer sends (bad tokens, segments that
are not sealed memfds, too many descriptors or connections, broken or stalled frames) while
it keeps serving everyone else.
"""


from __future__ import annotations

import array
import fcntl
import mmap
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

import mrecord
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import MAX_MESSAGE_BYTES, VERSION, receive, send
from mrecord.serve.protocol.wire import decode_block_at
from mrecord.serve.server.local import MAX_SEGMENTS, LocalServer, default_socket_path
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread
from tests.serve.local.helpers import (
    MB,
    ROWS,
    _plain,
)

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)


# -- the raw protocol: what a hostile or broken peer gets ------------------------------------------

TOKEN = "tok-123"


@pytest.fixture(scope="module")
def raw_server(served: dict[str, ServedDataset]) -> Iterator[LocalServer]:
    limits = Limits(max_block_rows=50)
    with LocalServer(served, default_socket_path(), token=TOKEN, limits=limits) as srv:
        yield srv


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sock.connect(str(path))
    return sock


def _hello(sock: socket.socket, dataset: str = "mixed", token: Any = TOKEN) -> dict[str, Any]:
    send(sock, {"op": "hello", "version": VERSION, "dataset": dataset, "token": token})
    return receive(sock)[0]


def _session(path: Path) -> socket.socket:
    sock = _connect(path)
    assert _hello(sock).items() >= {"ok": True, "rows": ROWS}.items()
    return sock


def _memfd(nbytes: int, seals: int = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) -> int:
    fd = os.memfd_create("test-segment", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _ask(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> Any:
    send(sock, message, fds)
    return receive(sock)[0]


def _map(sock: socket.socket, number: Any, fd: int) -> Any:
    return _ask(sock, {"op": "map", "segment": number}, (fd,))


def _read(sock: socket.socket, ids: Any, columns: Any, number: int = 0) -> Any:
    data = np.asarray(ids, dtype="<i8").tobytes()
    return _ask(sock, {"op": "read", "ids": data, "columns": columns, "segment": number})


def _code(answer: Any) -> str:
    assert set(answer) == {"error"}, answer
    return str(answer["error"]["code"])


def _closed(sock: socket.socket) -> bool:
    """True when the server closed ``sock`` (end of stream, or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _shard_files(sock: socket.socket, header: dict[str, Any]) -> dict[int, np.ndarray]:
    """The shard files a block's header refers to, asked for and mapped as a client does."""
    wanted = list(header.get("files") or [])
    if not wanted:
        return {}
    answer, fds = _ask_fds(sock, {"op": "files", "files": wanted}, len(wanted))
    assert answer == {"ok": True, "files": wanted} and len(fds) == len(wanted)
    maps = {}
    for number, fd in zip(wanted, fds, strict=True):
        try:
            maps[number] = np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), np.uint8)
        finally:
            os.close(fd)
    return maps


def _ask_fds(sock: socket.socket, message: dict[str, Any], max_fds: int) -> Any:
    send(sock, message)
    return receive(sock, max_fds=max_fds)


def _decoded(sock: socket.socket, answer: Any, fd: int, nbytes: int) -> Any:
    """(rows, columns) of a read ``answer`` written into segment ``fd`` of ``nbytes``."""
    region = np.frombuffer(mmap.mmap(fd, nbytes), dtype=np.uint8)
    return decode_block_at(answer["block"], region, _shard_files(sock, answer["block"]))


def _serves(path: Path, truth: dict[str, list[Any]]) -> None:
    """A fresh client maps a segment and reads rows right: the server is alive and well."""
    with _session(path) as sock:
        fd = _memfd(1 * MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            answer = _read(sock, [3, 200, 3], ["blob", "points"])
            rows, cols = _decoded(sock, answer, fd, MB)
        finally:
            os.close(fd)
    assert rows == 3
    for c in ("blob", "points"):
        assert [_plain(v) for v in cols[c]] == [_plain(truth[c][i]) for i in (3, 200, 3)]


def _still_reads(sock: socket.socket) -> None:
    """``sock``'s session maps a fresh segment and gets a block into it."""
    fd = _memfd(MB)
    try:
        assert _map(sock, 0, fd) == {"ok": True}
        assert "block" in _read(sock, [5, 1], ["text", "id"])
    finally:
        os.close(fd)


def test_a_mapped_segment_gets_the_rows_written_into_it(
    raw_server: LocalServer, truth: dict[str, list[Any]]
) -> None:
    _serves(raw_server.path, truth)


@pytest.mark.parametrize("token", [None, "", "tok-12", "tok-1234", 123, ["tok-123"]], ids=repr)
def test_a_missing_or_wrong_token_is_unauthorized(raw_server: LocalServer, token: Any) -> None:
    with _connect(raw_server.path) as sock:
        assert _code(_hello(sock, token=token)) == "unauthorized"
        assert _closed(sock)


def test_hello_needs_a_known_dataset_and_this_version(raw_server: LocalServer) -> None:
    with _connect(raw_server.path) as sock:
        answer = _hello(sock, dataset="../mixed")
        assert _code(answer) == "unknown_dataset" and "'mixed'" in answer["error"]["message"]
        assert _closed(sock)
    with _connect(raw_server.path) as sock:
        send(sock, {"op": "hello", "version": VERSION + 1, "dataset": "mixed", "token": TOKEN})
        assert _code(receive(sock)[0]) == "bad_request"
    with _connect(raw_server.path) as sock:  # a read before hello
        assert _code(_read(sock, [0], None)) == "bad_request"


def _regular_file(tmp_path: Path) -> int:
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * 4096)
    return os.open(path, os.O_RDWR)


def _pipe(tmp_path: Path) -> int:
    read, write = os.pipe()
    os.close(write)
    return read


@pytest.mark.parametrize(
    "make",
    [
        lambda _tmp: _memfd(MB, seals=0),
        lambda _tmp: _memfd(MB, seals=fcntl.F_SEAL_GROW),
        lambda _tmp: os.memfd_create("unsealable"),
        lambda _tmp: _memfd(0),
        _regular_file,
        _pipe,
    ],
    ids=["unsealed", "grow_seal_only", "no_sealing", "empty", "regular_file", "pipe"],
)
def test_a_segment_that_is_not_a_sealed_memfd_is_refused(
    raw_server: LocalServer, truth: dict[str, list[Any]], tmp_path: Path, make: Any
) -> None:
    """A file the client could shrink while the server writes would kill the server
    (SIGBUS); every such fd is refused, and the connection and server go on."""
    fd = make(tmp_path)
    with _session(raw_server.path) as sock:
        try:
            assert _code(_map(sock, 0, fd)) == "bad_request"
        finally:
            os.close(fd)
        assert _code(_read(sock, [1], ["id"])) == "bad_request"  # segment 0 is not mapped
        _still_reads(sock)  # the same connection still works
    _serves(raw_server.path, truth)


def test_map_needs_exactly_one_fd_and_a_segment_number(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        assert _code(_ask(sock, {"op": "map", "segment": 0})) == "bad_request"
        fd = _memfd(MB)
        try:
            for number in (-1, True, "0", None, 1.5):
                assert _code(_map(sock, number, fd)) == "bad_request"
            assert _code(_ask(sock, {"op": "unmap-all", "segment": 0})) == "bad_request"
            assert _map(sock, 0, fd) == {"ok": True}
        finally:
            os.close(fd)


def test_at_most_max_segments_per_connection(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fds = [_memfd(4096) for _ in range(MAX_SEGMENTS + 1)]
        try:
            for number, fd in enumerate(fds[:MAX_SEGMENTS]):
                assert _map(sock, number, fd) == {"ok": True}
            answer = _map(sock, MAX_SEGMENTS, fds[-1])
            assert _code(answer) == "bad_request"
            assert f"at most {MAX_SEGMENTS}" in answer["error"]["message"]
            assert _map(sock, 3, fds[-1]) == {"ok": True}  # replacing one is fine
            # unmapping one makes room
            send(sock, {"op": "map", "segment": 99, "unmap": [0]}, (fds[-1],))
            assert receive(sock)[0] == {"ok": True}
        finally:
            for fd in fds:
                os.close(fd)


def test_a_segment_too_small_gets_need(
    raw_server: LocalServer, truth: dict[str, list[Any]]
) -> None:
    ids = list(range(40))
    with _session(raw_server.path) as sock:
        small, big = _memfd(64), _memfd(MB)
        try:
            assert _map(sock, 0, small) == {"ok": True}
            answer = _read(sock, ids, ["blob", "text", "points"], 0)
            assert set(answer) == {"need"}
            need = int(answer["need"])
            # text and points are copied into the segment (blob may lie in the files)
            copied = [len(truth["text"][i].encode()) + truth["points"][i].nbytes for i in ids]
            assert sum(copied) < need <= MB
            assert _map(sock, 1, big) == {"ok": True}
            answer = _read(sock, ids, ["blob", "text", "points"], 1)
            rows, cols = _decoded(sock, answer, big, MB)
        finally:
            os.close(small)
            os.close(big)
    assert rows == 40
    assert [bytes(v) for v in cols["blob"]] == [truth["blob"][i] for i in ids]
    assert list(cols["text"]) == [truth["text"][i] for i in ids]
    assert [_plain(v) for v in cols["points"]] == [_plain(truth["points"][i]) for i in ids]


def test_shard_files_are_given_read_only_and_only_the_datasets(
    raw_server: LocalServer, mixed: Path
) -> None:
    """A reader gets the shard files its blocks refer to as read-only descriptors of the
    very files served; nothing else, whatever number it asks for."""
    shards = sorted(mixed.parent.glob("mixed.mrecord[0-9]"))
    with _session(raw_server.path) as sock:
        answer, fds = _ask_fds(sock, {"op": "files", "files": [0, 2]}, 2)
        try:
            assert answer == {"ok": True, "files": [0, 2]} and len(fds) == 2
            for fd, shard in zip(fds, (shards[0], shards[2]), strict=True):
                assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
                assert os.fstat(fd).st_ino == os.stat(shard).st_ino
                with pytest.raises(OSError):
                    os.write(fd, b"x")
                with pytest.raises((OSError, PermissionError)):
                    mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            for fd in fds:
                os.close(fd)
        for wanted in ([3], [-1], ["0"], [None], [], "0", None, list(range(65))):
            answer, fds = _ask_fds(sock, {"op": "files", "files": wanted}, 4)
            assert fds == [] and _code(answer) == "bad_request", wanted
        _still_reads(sock)


def test_bad_requests_get_the_http_api_codes(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fd = _memfd(MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            for ids in ([ROWS], [-1], [0, ROWS + 5]):
                answer = _read(sock, ids, ["id"])
                assert _code(answer) == "bad_ids" and str(ids[-1]) in answer["error"]["message"]
            assert _code(_read(sock, [0], ["id", "nope"])) == "unknown_column"
            answer = _read(sock, list(range(51)), ["id"])
            assert _code(answer) == "bad_request" and "at most 50" in answer["error"]["message"]
            assert _code(_read(sock, [0], "id")) == "bad_request"
            send(sock, {"op": "read", "ids": b"\0" * 7, "columns": None, "segment": 0})
            assert _code(receive(sock)[0]) == "bad_request"
            assert "block" in _read(sock, list(range(50)), ["id"])  # still serving
        finally:
            os.close(fd)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack("<I", 3) + b"\xc1\xc1\xc1",  # not MessagePack
        struct.pack("<I", 2) + b"\x92\x01",  # MessagePack, but not a map
        struct.pack("<I", MAX_MESSAGE_BYTES + 1),  # longer than any message may be
        struct.pack("<I", 0xFFFFFFFF),
    ],
    ids=["garbage", "not_a_map", "too_long", "huge_length"],
)
@pytest.mark.parametrize("after_hello", [False, True])
def test_a_broken_frame_closes_only_that_connection(
    raw_server: LocalServer, truth: dict[str, list[Any]], frame: bytes, after_hello: bool
) -> None:
    other = _session(raw_server.path)  # a reader in the middle of its work
    with _connect(raw_server.path) as sock:
        if after_hello:
            assert _hello(sock).items() >= {"ok": True, "rows": ROWS}.items()
        sock.sendall(frame)
        assert _closed(sock)
    with other:
        _still_reads(other)
    _serves(raw_server.path, truth)


def test_a_client_stalled_mid_message_does_not_stall_the_others(
    served: dict[str, ServedDataset],
) -> None:
    with LocalServer(served, default_socket_path(), token=None, limits=Limits()) as srv:
        staller = _connect(srv.path)
        assert _hello(staller, token=None)["ok"]
        payload = msgpack.packb({"op": "read", "ids": b"\0" * 8, "columns": None, "segment": 0})
        staller.sendall(struct.pack("<I", len(payload)) + payload[:3])  # the rest never comes
        time.sleep(0.2)  # the server has seen the first bytes
        with _connect(srv.path) as other:
            assert _hello(other, token=None)["ok"]  # answered while the staller stalls
            staller.setblocking(False)
            try:
                still_open = staller.recv(1) != b""
            except BlockingIOError:
                still_open = True  # nothing to read, no end of stream: the server waits on
            except ConnectionResetError:
                still_open = False
        staller.close()
        assert still_open  # the other reader was answered while the staller still stalled


def test_more_fds_than_a_message_allows_are_closed(raw_server: LocalServer) -> None:
    with _session(raw_server.path) as sock:
        fds = [_memfd(4096) for _ in range(3)]
        try:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            payload = msgpack.packb({"op": "map", "segment": 0})
            sock.sendmsg([struct.pack("<I", len(payload)) + payload], ancillary)
            assert receive(sock)[0] == {"ok": True}  # the first fd; the others are dropped
        finally:
            for fd in fds:
                os.close(fd)


def test_more_connections_than_allowed_are_told_busy(
    served: dict[str, ServedDataset], truth: dict[str, list[Any]]
) -> None:
    with LocalServer(
        served, default_socket_path(), token=None, limits=Limits(), max_connections=2
    ) as srv:
        first = _connect(srv.path)
        assert _hello(first, token=None)["ok"]
        with _connect(srv.path) as second:
            assert _hello(second, token=None)["ok"]
            with _connect(srv.path) as third:
                answer = receive(third)[0]
                assert _code(answer) == "busy" and "2 connections" in answer["error"]["message"]
                assert _closed(third)
        first.close()
        # Once the others are gone, a client is served again (the server notices
        # the closed connections on its own threads: wait for it, a bounded time).
        for _ in range(200):
            if _try_hello(srv.path).get("ok"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the server stayed busy after every client left")
        assert _try_hello(srv.path).get("ok")


def test_a_busy_socket_is_waited_for_like_a_busy_http_server(mixed: Path) -> None:
    import threading

    with ServerThread({"mixed": mixed}) as srv:
        assert srv._local is not None
        srv._local._max_connections = 1  # what `mrecord serve --max-connections 1` means
        other = _connect(srv._local.path)  # another reader holds the only connection
        assert _hello(other, token=None)["ok"]
        threading.Timer(0.5, other.close).start()  # and finishes soon after
        ds = mrecord.RemoteDataset(srv.url, "mixed", transport="local", retries=4)
        assert [int(v) for v in ds.read_rows([4, 2], ["id"]).columns["id"]] == [4, 2]


def test_a_refused_client_trickling_its_hello_stalls_no_one(
    served: dict[str, ServedDataset],
) -> None:
    import threading

    with LocalServer(
        served, default_socket_path(), token=None, limits=Limits(), max_connections=1
    ) as srv:
        first = _connect(srv.path)
        assert _hello(first, token=None)["ok"]
        stop = threading.Event()
        trickled_all = threading.Event()
        frame = struct.pack("<I", 60) + b"\x80" * 60  # a hello-sized message, slowly

        def trickle() -> None:
            with _connect(srv.path) as refused:
                for byte in frame:
                    if stop.wait(0.3):
                        return
                    try:
                        refused.send(bytes([byte]))
                    except OSError:
                        return  # the server closed it: fine, it is refused
                trickled_all.set()

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            time.sleep(0.5)  # the server has accepted the trickler and refused it
            with first:
                _still_reads(first)  # answered at once...
                answered_while_trickling = not trickled_all.is_set()  # ...not after 19 s
        finally:
            stop.set()
            trickler.join(timeout=30)
        assert answered_while_trickling


def test_descriptors_sent_without_a_whole_message_are_bounded(
    served: dict[str, ServedDataset],
) -> None:
    with LocalServer(served, default_socket_path(), token=TOKEN, limits=Limits()) as srv:
        before = len(os.listdir("/proc/self/fd"))
        fd = _memfd(4096)
        sock = _connect(srv.path)
        try:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
            sock.sendmsg([struct.pack("<I", 1000)], ancillary)
            for _ in range(300):
                sock.sendmsg([b"\x80"], ancillary)  # the message never ends
            _wait_read_by_server(sock)
            held = len(os.listdir("/proc/self/fd")) - before
        finally:
            sock.close()
            os.close(fd)
        assert held < 10, f"the server holds {held} descriptors a client sent"
        _serves(srv.path, _truth_of(served))


def _wait_read_by_server(sock: socket.socket) -> None:
    """Wait (a bounded time) until the server has received everything sent on ``sock``."""
    import termios

    for _ in range(400):
        unread = struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0" * 4))[0]
        if unread == 0:
            return
        time.sleep(0.01)
    raise AssertionError("the server did not read what was sent")


def _truth_of(served: dict[str, ServedDataset]) -> dict[str, list[Any]]:
    reader = served["mixed"].reader
    block = reader.read_rows(np.arange(reader.num_rows))
    return {c: list(v) for c, v in block.columns.items()}


def _shmem_kb() -> int:
    """Shared memory this process has touched (``RssShmem``), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssShmem:"):
            return int(line.split()[1])
    raise AssertionError("no RssShmem in /proc/self/status")


def test_mapping_a_segment_allocates_none_of_its_pages(raw_server: LocalServer) -> None:
    size = 128 * MB
    with _session(raw_server.path) as sock:
        fd = _memfd(size)
        try:
            before = _shmem_kb()
            assert _map(sock, 0, fd) == {"ok": True}
            grown = (_shmem_kb() - before) * 1024
            small = _memfd(MB)
            assert _map(sock, 0, small) == {"ok": True}  # unmaps the big one
            os.close(small)
        finally:
            os.close(fd)
    assert grown < size // 4, f"mapping an untouched {size}-byte segment took {grown} bytes"


@pytest.mark.parametrize("unmap", [5, "ab", {"a": 1}, 1.5, True])
def test_a_non_list_unmap_is_a_bad_request(raw_server: LocalServer, unmap: Any) -> None:
    with _session(raw_server.path) as sock:
        fd = _memfd(MB)
        try:
            assert _map(sock, 0, fd) == {"ok": True}
            data = np.array([1, 2], dtype="<i8").tobytes()
            answer = _ask(
                sock, {"op": "read", "ids": data, "columns": ["id"], "segment": 0, "unmap": unmap}
            )
            assert _code(answer) == "bad_request" and "unmap" in answer["error"]["message"]
            assert "block" in _read(sock, [5, 1], ["text", "id"])  # still serving
        finally:
            os.close(fd)


def _try_hello(path: Path) -> dict[str, Any]:
    """The answer to a hello, or {} when the server closed the connection first."""
    with _connect(path) as sock:
        try:
            return _hello(sock, token=None)
        except OSError:
            return {}
