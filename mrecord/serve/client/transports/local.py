"""Blocks through the server's same-host socket, into this process's shared memory.

:class:`LocalTransport` is what a ``RemoteDataset`` reads through when the server runs
on the same machine and advertises its Unix socket (:mod:`~mrecord.serve.server.local`;
the messages: :mod:`~mrecord.serve.protocol.local`). No byte of a value crosses the
socket: a bytes value comes as its place in a shard file that this process maps
read-only (the server passes the file's descriptor once), and the other columns are
written by the server into a memfd segment of this process, from the session's
:class:`Segments` (a :class:`~mrecord.serve.buffers.BufferPool`). A segment is handed
out again only when no value of its last block is alive (the pool's rule); one that the
pool drops is closed when its last value dies, and the server is told to unmap it with
the next request.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import mmap
import os
import socket
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, DatasetServerError
from mrecord.serve.buffers import BufferPool
from mrecord.serve.client.transports.base import Transport, TransportBusy, TransportUnavailable
from mrecord.serve.protocol.errors import ErrorCode, error_for
from mrecord.serve.protocol.local import MAX_MESSAGE_BYTES, VERSION, receive, send
from mrecord.serve.protocol.wire import decode_block_at, encode_request_fields

__all__ = ["Links", "LocalLink", "LocalTransport", "Segments"]

_log = logging.getLogger("mrecord.serve")


class _Answered(Exception):
    """The server answered with an error (the connection is still good)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _Segment:
    number: int
    fd: int


_FILES_PER_MESSAGE = 64
_MAX_IDS = (MAX_MESSAGE_BYTES - (64 << 10)) // 8
"""Ids one request may carry (the rest of a message is its columns' names)."""
_MAX_MAPPED = 8
"""Segments one connection keeps mapped on the server (it accepts MAX_SEGMENTS)."""
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
_MAX_DEAD = 1024


class Segments:
    """This process's shared-memory segments (one per session): a pool of sealed memfds
    mapped here, which memfd each pooled array is, and the numbers of those closed since
    (each connection asks the server to unmap them). One forgotten here (beyond the last
    ``_MAX_DEAD``) stays mapped on the server only until that connection's
    least-recently-used rule unmaps it."""

    def __init__(self) -> None:
        self._numbers = itertools.count()
        self._by_array: dict[int, _Segment] = {}
        self.dead: OrderedDict[int, None] = OrderedDict()
        self.pool = BufferPool(keep=0, allocate=self._new)

    def __len__(self) -> int:
        """Segments alive (mapped here)."""
        return len(self._by_array)

    def take(self, nbytes: int) -> tuple[np.ndarray, _Segment]:
        """A region of at least ``nbytes`` and the segment it lies in."""
        buffer = self.pool.take(max(1, nbytes))
        region = buffer.base if buffer.base is not None else buffer
        return region, self._by_array[id(region)]

    def forget(self) -> None:
        """Start empty (in a forked child: the parent's segments are not this process's)."""
        self.pool.forget()

    def _new(self, nbytes: int) -> np.ndarray:
        """A sealed memfd of ``nbytes``, mapped here, as a uint8 array."""
        fd = os.memfd_create("mrecord-block", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            # Populated now, once: the pool reuses the segment, and a page first touched
            # later would cost a fault (and zeroing) in the middle of a read.
            mapped = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED | _POPULATE)
        except BaseException:
            os.close(fd)
            raise
        array = np.frombuffer(mapped, dtype=np.uint8)
        segment = _Segment(next(self._numbers), fd)
        self._by_array[id(array)] = segment
        weakref.finalize(array, self._release, id(array), segment)
        return array

    def _release(self, key: int, segment: _Segment) -> None:
        self._by_array.pop(key, None)
        self.dead[segment.number] = None
        while len(self.dead) > _MAX_DEAD:
            self.dead.popitem(last=False)
        with contextlib.suppress(OSError):
            os.close(segment.fd)


class _Connection:
    """One Unix-socket connection to the server, said hello to for one dataset."""

    def __init__(
        self, path: str, dataset: str, token: str | None, timeout: float, segments: Segments
    ) -> None:
        self.pid = os.getpid()
        self.segments = segments
        self.mapped: OrderedDict[int, None] = OrderedDict()
        """Segments the server has mapped for this connection, least recently used first."""
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(path)
            send(self.sock, {"op": "hello", "version": VERSION, "dataset": dataset, "token": token})
            reply, _ = receive(self.sock)
        except BaseException:
            self.sock.close()
            raise
        self.rows = int(reply.get("rows", -1))
        self.error = reply.get("error")
        self.instance = str(reply.get("instance", ""))
        self.files = _FileMaps()  # replaced by the link's maps for this server instance

    def close(self) -> None:
        self.sock.close()

    def _unmap(self, room: int) -> list[int]:
        """Segments the server should unmap now: the closed ones, and the least recently
        used beyond ``_MAX_MAPPED - room`` (values a caller keeps pin their segment, so
        the pool makes new ones; the server needs a map only while it writes)."""
        gone = [number for number in self.mapped if number in self.segments.dead]
        for number in gone:
            del self.mapped[number]
        while len(self.mapped) > _MAX_MAPPED - room:
            gone.append(self.mapped.popitem(last=False)[0])
        return gone

    def read(self, request: dict[str, Any], nbytes: int) -> tuple[int, dict[str, Any], int]:
        """Send one read, into a segment of at least ``nbytes`` (a bigger one if the server
        says so); (rows, columns) viewing the segment, and the segment bytes it used."""
        for _ in range(3):
            region, segment = self.segments.take(nbytes)
            if segment.number in self.mapped:
                self.mapped.move_to_end(segment.number)
            else:
                message = {"op": "map", "segment": segment.number, "unmap": self._unmap(1)}
                send(self.sock, message, (segment.fd,))
                reply, _ = receive(self.sock)
                if "error" in reply:
                    raise _Answered(reply["error"])
                self.mapped[segment.number] = None
            send(self.sock, {**request, "segment": segment.number, "unmap": self._unmap(0)})
            reply, _ = receive(self.sock)
            if "error" in reply:
                raise _Answered(reply["error"])
            if "need" in reply:
                nbytes = int(reply["need"])
                continue
            header = reply["block"]
            files = self.files
            missing = files.missing(header.get("files") or ())
            for lo in range(0, len(missing), _FILES_PER_MESSAGE):
                wanted = missing[lo : lo + _FILES_PER_MESSAGE]
                send(self.sock, {"op": "files", "files": wanted})
                answer, fds = receive(self.sock, max_fds=len(wanted))
                if "error" in answer:
                    for fd in fds:
                        os.close(fd)
                    raise _Answered(answer["error"])
                files.add(wanted, fds)  # takes the descriptors, closes them once mapped
            rows, columns = decode_block_at(header, region, files.maps)
            return rows, columns, _used(header)
        raise DatasetServerError("the server asked for a bigger segment three times in a row")


def _used(header: dict[str, Any]) -> int:
    """Segment bytes a block's header says its buffers take."""
    ends = [
        int(at) + int(size)
        for col in header["columns"]
        for at, size in zip(col["offsets"], col["sizes"], strict=True)
    ]
    return max(ends, default=0)


class _FileMaps:
    """The server's shard files, mapped read-only here (shared by a link's connections)."""

    def __init__(self) -> None:
        self.maps: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def missing(self, numbers: Any) -> list[int]:
        with self._lock:
            return [int(n) for n in numbers if int(n) not in self.maps]

    def add(self, numbers: list[int], fds: list[int]) -> None:
        try:
            if len(fds) != len(numbers):
                raise DatasetServerError(f"asked for {len(numbers)} files, got {len(fds)}")
            for number, fd in zip(numbers, fds, strict=True):
                size = os.fstat(fd).st_size
                mapped = np.frombuffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ), np.uint8)
                with self._lock:
                    self.maps.setdefault(number, mapped)
        finally:
            for fd in fds:
                os.close(fd)


class LocalLink:
    """Same-host reads of one dataset through ``path``, with a pool of connections.

    ``read`` raises :class:`~.base.TransportBusy` / :class:`~.base.TransportUnavailable`
    when the socket cannot be used now, and the server's own errors as mrecord errors.
    One link per (socket, dataset, token) is shared by a session (:class:`Links`): a new
    ``RemoteDataset`` (the next epoch's, say) reuses its connections, and with them the
    server's maps of this process's segments, instead of paying the page faults of
    mapping them again.
    """

    def __init__(
        self, path: str, dataset: str, token: str | None, rows: int, segments: Segments
    ) -> None:
        self.segments = segments
        self.path = path
        self.dataset = dataset
        self.token = token
        self.rows = rows
        self.timeout = 60.0
        self._keep = 2
        self._per_row: dict[tuple[str, ...], float] = {}
        """Segment bytes per row the last block of these columns took: bytes values in
        shared files take 24 (their place), far less than their size."""
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._files: dict[str, _FileMaps] = {}
        """The shard files mapped here, per server instance: a server restarted on the
        same socket may serve rewritten files under the same numbers."""

    def keep_at_least(self, connections: int, timeout: float) -> None:
        """Keep up to ``connections`` idle connections (one more user of the link)."""
        with self._lock:
            self._keep = max(self._keep, connections)
            self.timeout = max(self.timeout, timeout)
        self.segments.pool.keep_at_least(self._keep + 2)

    def read(
        self, ids: np.ndarray, columns: list[str], nbytes: int, where: str
    ) -> tuple[int, dict[str, Any]]:
        """(rows, columns) of ``ids``; ``nbytes`` is the block's size as values (the
        segment asked for is what the last block of these columns needed, per row)."""
        if len(ids) > _MAX_IDS:
            raise ArgumentError(
                f"asked for {len(ids)} rows in one request; at most {_MAX_IDS} through the "
                "same-host socket (ask in parts)"
            )
        request = {"op": "read", **encode_request_fields(ids, columns)}
        key = tuple(columns)
        learned = self._per_row.get(key)
        if learned is not None:
            nbytes = int(len(ids) * learned * 1.25) + (64 << 10)
        while True:
            conn, reused = self._connection()
            try:
                rows, values, used = conn.read(request, nbytes)
            except _Answered as answer:
                self._give_back(conn)
                code, text = str(answer.error.get("code")), str(answer.error.get("message"))
                raise error_for(where, code, text) from None
            except OSError as exc:
                conn.close()
                if reused:
                    continue  # the server closed an idle connection: try the next one
                raise TransportUnavailable(f"{type(exc).__name__}: {exc}") from exc
            except BaseException:
                conn.close()
                raise
            self._give_back(conn)
            if len(ids):
                self._per_row[key] = used / len(ids)
            return rows, values

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connection(self) -> tuple[_Connection, bool]:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if conn.pid == os.getpid():
                return conn, True
            conn.close()  # inherited through fork: the parent's, not ours
        try:
            conn = _Connection(self.path, self.dataset, self.token, self.timeout, self.segments)
        except OSError as exc:
            raise TransportUnavailable(f"cannot connect to {self.path}: {exc}") from exc
        except DatasetServerError as exc:
            raise TransportUnavailable(
                f"{self.path} does not speak this protocol: {exc}"
            ) from exc
        if conn.error is not None or conn.rows != self.rows:
            conn.close()
            if isinstance(conn.error, dict) and conn.error.get("code") == ErrorCode.BUSY:
                raise TransportBusy(f"{self.path}: {conn.error.get('message')}")
            why = conn.error or f"it serves {conn.rows} rows, the HTTP API said {self.rows}"
            raise TransportUnavailable(f"{self.path} refused the dataset: {why}")
        with self._lock:
            conn.files = self._files.setdefault(conn.instance, _FileMaps())
            if len(self._files) > 1:  # a restarted server: the old one's maps are done with
                for instance in [i for i in self._files if i != conn.instance]:
                    del self._files[instance]
        return conn, False

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        conn.close()


class Links:
    """A session's links, one per (socket, dataset, token), made on first use."""

    def __init__(self, segments: Segments) -> None:
        self._segments = segments
        self._links: dict[tuple[str, str, str | None], LocalLink] = {}
        self._lock = threading.Lock()

    def get(
        self,
        path: str,
        dataset: str,
        token: str | None,
        rows: int,
        connections: int,
        timeout: float,
    ) -> LocalLink:
        """The link to ``dataset`` through ``path`` (one more user: it keeps ``connections``)."""
        key = (path, dataset, token)
        with self._lock:
            link = self._links.get(key)
            if link is None or link.rows != rows:
                link = self._links[key] = LocalLink(path, dataset, token, rows, self._segments)
        link.keep_at_least(connections, timeout)
        return link

    def close_idle(self) -> None:
        """Close every idle connection (at exit: no socket is left to the collector)."""
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.close()

    def forget(self) -> None:
        """Start empty, with a fresh lock (in a forked child)."""
        self._links = {}
        self._lock = threading.Lock()


class LocalTransport(Transport):
    """Blocks of one dataset through the server's same-host socket (a :class:`LocalLink`)."""

    @property
    def name(self) -> str:
        return "local"

    def __init__(self, link: LocalLink, row_bytes: dict[str, float], where: str) -> None:
        self._link = link
        self._row_bytes = row_bytes
        self._where = where

    @property
    def in_flight(self) -> int:
        # A same-host answer takes a fraction of a millisecond: more requests in flight
        # only add threads that contend for the GIL (4 in flight read fewer rows/s than 2;
        # docs/SERVE.md, "Same-host readers").
        return 2

    def read(self, ids: np.ndarray, columns: list[str]) -> tuple[int, dict[str, Any]]:
        return self._link.read(ids, columns, self._block_bytes(len(ids), columns), self._where)

    def _block_bytes(self, rows: int, columns: list[str]) -> int:
        """A segment size that fits most blocks of ``rows`` rows: the mean row, with room
        for bigger ones (the server asks for more when a block does not fit)."""
        per_row = sum(self._row_bytes.get(c, 0.0) for c in columns)
        return int(rows * per_row * 1.25) + (64 << 10)
