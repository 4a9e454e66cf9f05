"""The same-host transport's server: blocks written straight into the reader's memory.

A ``RemoteDataset`` on the same machine as ``mrecord serve`` connects to a Unix socket
(only the server's user can: the socket is 0600 in a 0700 folder) and hands the server
shared-memory segments (sealed memfds). The server answers a block request with the
places of its bytes values in the shard files (the reader maps the same files, from
read-only descriptors the server passes once: those values are never copied) and writes
the other columns into one of the reader's segments (copied once, instead of twice
through a TCP socket). Requests, limits and error codes are the HTTP API's
(:mod:`~mrecord.serve.server.answers`); docs/SERVE.md, "Same-host readers", has the protocol and
the security model.

::

    with LocalServer(datasets, default_socket_path(), token=None, limits=Limits()) as server:
        ...   # server.path is what GET /api/datasets/{name} advertises as "local_socket"
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import logging
import mmap
import os
import secrets
import selectors
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError
from mrecord.serve.protocol.errors import ErrorCode
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.local import VERSION, Inbox, encode, send_fds_with
from mrecord.serve.protocol.wire import BytesRefs, NeedsRoom, encode_block_into, request_fields
from mrecord.serve.server.answers import ApiError, check_answer_bytes, classify, plan_block
from mrecord.serve.server.metrics import Metrics
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.security import token_matches

__all__ = ["MAX_SEGMENTS", "MAX_SEGMENT_BYTES", "LocalServer", "default_socket_path"]

_log = logging.getLogger("mrecord.serve")

MAX_SEGMENTS = 16
"""Segments one connection may have mapped at once."""
MAX_SEGMENT_BYTES = 1 << 30
"""Largest segment the server maps (a block is at most ``Limits.max_block_bytes`` anyway)."""
MAX_FILES_PER_MESSAGE = 64
"""Shard file descriptors sent with one ``files`` answer."""
IDLE_TIMEOUT_S = 300.0
"""A connection that sends nothing for this long is closed (its maps freed)."""
_IDLE_CHECK_S = 10.0
_REFUSE_TIMEOUT_S = 0.5
"""A refused client's hello must come within this time (the whole of it, not per read)."""
_MAX_REFUSING = 256
"""Refused connections kept at once until their hello comes (more are closed at once)."""
_ACCEPT_PAUSE_S = 0.5
"""Accepting stops this long when the process is out of descriptors."""
_counter = itertools.count()


def default_socket_path() -> Path:
    """A fresh socket path in this user's private folder.

    ``$XDG_RUNTIME_DIR`` when it is this user's, else ``<tmp>/mrecord-<uid>`` (created
    0700). Raises ArgumentError when that folder exists but others could write to it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.stat(runtime).st_uid == os.getuid():
        folder = Path(runtime)
    else:
        folder = Path(tempfile.gettempdir()) / f"mrecord-{os.getuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise ArgumentError(
            f"{folder} is not a private folder of this user (owner, mode); "
            "pass --local-socket PATH in a folder only you can write to, or --local-socket off"
        )
    return folder / f"mrecord-serve-{os.getpid()}-{next(_counter)}.sock"


class LocalServer:
    """Serve ``datasets`` to same-host readers on the Unix socket ``path``, in threads.

    One thread accepts and answers every connection, a message at a time (at most
    ``max_connections`` connections; more are told ``busy`` and closed). ``metrics``:
    where the blocks it answers are counted (the HTTP app's, so ``GET /metrics`` shows
    both transports): rows, and the bytes of the values delivered (:func:`_value_bytes`).
    """

    def __init__(
        self,
        datasets: dict[str, ServedDataset],
        path: Path,
        *,
        token: str | None,
        limits: Limits,
        max_connections: int = 64,
        metrics: Metrics | None = None,
    ) -> None:
        self.datasets = datasets
        self.metrics = metrics
        self.path = path
        self._token = token
        self._limits = limits
        self._max_connections = max_connections
        self._shared: dict[str, _SharedFiles] = {}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._refused: set[socket.socket] = set()
        """Connections told ``busy``, until their hello has come (or their time is up)."""
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self.instance = secrets.token_hex(8)
        """Told to every client in hello: a reader that sees a new one (a restarted server)
        forgets the shard files it mapped from the old one."""

    # -- lifetime ----------------------------------------------------------------------------------

    def start(self) -> LocalServer:
        """Bind the socket (0600) and answer in a thread; ArgumentError naming the path
        when it cannot be used. A socket file left by a server that is gone is replaced;
        one where a server still answers, or any other file, is left alone."""
        self._clear_stale_socket()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                listener.bind(str(self.path))
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            listener.listen(128)
        except OSError as exc:
            listener.close()
            raise ArgumentError(
                f"--local-socket {self.path}: cannot listen there ({exc.strerror or exc}); "
                "give a path in an existing folder of yours, shorter than 108 bytes, or "
                "--local-socket off"
            ) from exc
        listener.setblocking(False)
        self._listener = listener
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=self._loop, name="mrecord-local", daemon=True)
        self._thread.start()
        return self

    def _clear_stale_socket(self) -> None:
        try:
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                return  # not a socket: bind fails and says so; never removed
        except OSError:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.path))
            except OSError:
                os.unlink(self.path)  # nobody listens: a server that is gone left it
                return
        raise ArgumentError(
            f"--local-socket {self.path}: another server is listening there; "
            "give another path, or --local-socket auto"
        )

    def stop(self) -> None:
        """Stop accepting, close every connection, remove the socket."""
        self._stopping = True
        if self._wake is not None:
            with contextlib.suppress(OSError):
                self._wake[1].send(b"x")  # the loop is in select(): wake it
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        if self._wake is not None:
            for end in self._wake:
                end.close()
        with self._lock:
            shared, self._shared = list(self._shared.values()), {}
        for files in shared:
            files.close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- connections -------------------------------------------------------------------------------

    def _loop(self) -> None:
        """Accept and answer every connection, in this one thread, without blocking.

        One thread rather than one per connection: on few cores, threads answering at
        once mostly hand the GIL to each other (futex wake-ups were a sixth of the
        server's CPU per MB, measured with perf), and an answer is short: the values
        themselves are not copied (files shared) or are copied once. Sockets are
        non-blocking and each connection keeps what it has received of a message, so a
        client that sends half a message and stops holds up no one; one that does not
        read its answers is not read from until it does. A refused client (``busy``) is
        one more such connection, closed once its hello has come or after
        ``_REFUSE_TIMEOUT_S``, whichever is first.
        """
        listener, wake = self._listener, self._wake
        assert listener is not None and wake is not None
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, None)
        selector.register(wake[0], selectors.EVENT_READ, "wake")
        paused_until: float | None = None
        try:
            while not self._stopping:
                for key, events in selector.select(timeout=self._next_check()):
                    if key.data == "wake":
                        break
                    if key.data is None:
                        if not self._accept(listener, selector):
                            # Out of descriptors: stop asking until some are freed, instead
                            # of waking at once for the same refused connection.
                            selector.unregister(listener)
                            paused_until = time.monotonic() + _ACCEPT_PAUSE_S
                        continue
                    conn = key.data
                    if self._service(conn, events):
                        wanted = selectors.EVENT_WRITE if conn.outbox else selectors.EVENT_READ
                        if wanted != key.events:
                            selector.modify(conn.sock, wanted, conn)
                    else:
                        selector.unregister(conn.sock)
                        self._drop(conn)
                now = time.monotonic()
                if paused_until is not None and now >= paused_until:
                    selector.register(listener, selectors.EVENT_READ, None)
                    paused_until = None
                for key in list(selector.get_map().values()):
                    if isinstance(key.data, _Connection) and key.data.expired(now):
                        selector.unregister(key.fileobj)
                        self._drop(key.data)
        finally:
            for key in list(selector.get_map().values()):
                if isinstance(key.data, _Connection):
                    self._drop(key.data)
            selector.close()

    def _next_check(self) -> float:
        """Seconds until the loop must look at its connections' deadlines again."""
        if self._refused:
            return _REFUSE_TIMEOUT_S / 4
        return _IDLE_CHECK_S

    def _accept(self, listener: socket.socket, selector: selectors.BaseSelector) -> bool:
        """Take one connection; False when the process is out of descriptors."""
        try:
            sock, _ = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                _log.warning("same-host socket: cannot accept a connection (%s)", exc)
                return False
            return True  # closed by stop(), or the client gave up
        with self._lock:
            busy = len(self._connections) >= self._max_connections
            if not busy:
                self._connections.add(sock)
        sock.setblocking(False)
        if busy:
            self._refuse(sock, selector)
            return True
        selector.register(sock, selectors.EVENT_READ, _Connection(sock))
        return True

    def _refuse(self, sock: socket.socket, selector: selectors.BaseSelector) -> None:
        """Tell the client ``busy`` now, and close once its hello has come (a socket closed
        before the client has written would fail its write instead of answering it), or
        after ``_REFUSE_TIMEOUT_S``. Never waits: the loop serves everyone meanwhile."""
        if len(self._refused) >= _MAX_REFUSING:
            sock.close()  # a flood: its descriptors are not kept (each is held 0.5 s)
            return
        conn = _Connection(sock, refused_until=time.monotonic() + _REFUSE_TIMEOUT_S)
        message = f"more than {self._max_connections} connections at once; try again"
        try:
            conn.queue({"error": {"code": ErrorCode.BUSY.value, "message": message}}, ())
        except OSError:
            sock.close()
            return
        self._refused.add(sock)
        wanted = selectors.EVENT_WRITE if conn.outbox else selectors.EVENT_READ
        selector.register(sock, wanted, conn)

    def _service(self, conn: _Connection, events: int) -> bool:
        """Send what is waiting, read what has come, answer every whole message; False
        when the connection is over."""
        conn.active = time.monotonic()
        try:
            if events & selectors.EVENT_WRITE:
                conn.flush()
            if conn.outbox:
                return True
            if events & selectors.EVENT_READ and not conn.inbox.fill(conn.sock):
                return False  # the client closed it
            if conn.refused_until is not None:
                return conn.inbox.next() is None  # told busy: done once the hello is in
            while not conn.outbox and not conn.closing:
                got = conn.inbox.next()
                if got is None:
                    break
                message, fds = got
                reply, give = self._reply(conn, message, fds)
                conn.queue(reply, give)
            return not (conn.closing and not conn.outbox)
        except BlockingIOError:
            return True
        except (OSError, DatasetServerError) as exc:  # gone, or not our protocol
            _log.debug("same-host connection ended: %s", exc)
            return False

    def _reply(
        self, conn: _Connection, message: dict[str, Any], fds: list[int]
    ) -> tuple[dict[str, Any], tuple[int, ...]]:
        """The answer to one message (hello first), and the descriptors to send with it."""
        try:
            if conn.dataset is None:
                conn.dataset = self._hello(message)
                conn.inbox.max_fds = 1  # a map carries one segment (a hello carries none)
                return {"ok": True, "rows": conn.dataset.reader.num_rows,
                        "instance": self.instance}, ()  # fmt: skip
            return self._answer(conn.dataset, message, fds, conn.segments)
        except Exception as exc:
            if conn.dataset is None:
                conn.closing = True  # a refused hello ends the connection
            code, text = classify(exc, self.datasets.values())
            return {"error": {"code": code, "message": text}}, ()
        finally:
            for fd in fds:
                os.close(fd)

    def _drop(self, conn: _Connection) -> None:
        for mapped in conn.segments.values():
            _unmap(mapped)
        conn.segments = {}
        conn.inbox.close()
        with self._lock:
            self._connections.discard(conn.sock)
        self._refused.discard(conn.sock)
        conn.sock.close()

    def _hello(self, message: dict[str, Any]) -> ServedDataset:
        ds = self.datasets.get(str(message.get("dataset")))
        if message.get("op") != "hello" or message.get("version") != VERSION:
            raise ApiError(
                "bad_request", f"expected hello version {VERSION}, got {message!r:.200}"
            )
        if self._token and not token_matches(message.get("token"), self._token):
            raise ApiError("unauthorized", "missing or wrong token")
        if ds is None:
            names = sorted(self.datasets)
            raise ApiError(
                "unknown_dataset", f"no dataset named {message.get('dataset')!r}: {names}"
            )
        return ds

    # -- requests ----------------------------------------------------------------------------------

    def _answer(
        self,
        ds: ServedDataset,
        message: dict[str, Any],
        fds: list[int],
        segments: dict[int, mmap.mmap],
    ) -> tuple[dict[str, Any], tuple[int, ...]]:
        """The reply to one message, and the descriptors to send with it."""
        op = message.get("op")
        unmap = message.get("unmap")
        if unmap is not None and not isinstance(unmap, list):
            raise ApiError(
                "bad_request", f'"unmap" must be a list of segment numbers, got {unmap!r:.80}'
            )
        for number in unmap or ():
            if isinstance(number, int) and number in segments:
                _unmap(segments.pop(number))
        if op == "map":
            number = _segment_number(message)
            if len(fds) != 1:
                raise ApiError("bad_request", "map needs exactly one file descriptor")
            if number not in segments and len(segments) >= MAX_SEGMENTS:
                raise ApiError("bad_request", f"at most {MAX_SEGMENTS} segments per connection")
            mapped = _map_segment(fds[0])
            if number in segments:
                _unmap(segments.pop(number))
            segments[number] = mapped
            return {"ok": True}, ()
        if op == "read":
            number = _segment_number(message)
            if number not in segments:
                raise ApiError("bad_request", f"segment {number} is not mapped; send map first")
            return self._read(ds, message, segments[number]), ()
        if op == "files":
            wanted = message.get("files")
            if not isinstance(wanted, list) or not 0 < len(wanted) <= MAX_FILES_PER_MESSAGE:
                raise ApiError(
                    "bad_request", f'"files" must list 1 to {MAX_FILES_PER_MESSAGE} file numbers'
                )
            shared = self._shared_files(ds)
            given = tuple(shared.descriptor(number) for number in wanted)
            return {"ok": True, "files": wanted}, given
        raise ApiError("bad_request", f"unknown op {op!r}; expected map, read or files")

    def _read(
        self, ds: ServedDataset, message: dict[str, Any], mapped: mmap.mmap
    ) -> dict[str, Any]:
        ids, columns = request_fields(message, self._limits.max_block_rows)
        plan = plan_block(ds, ids, columns, self._limits)
        values = self._columns(ds, ids, plan.columns, plan.kinds)
        check_answer_bytes(values, len(ids), self._limits)
        region = np.frombuffer(mapped, dtype=np.uint8)
        try:
            header = encode_block_into(values, plan.kinds, len(ids), region)
        except NeedsRoom as exc:
            return {"need": exc.nbytes}
        finally:
            del region
        if self.metrics is not None:
            self.metrics.served(ds.name, len(ids), _value_bytes(values, header))
        return {"ok": True, "block": header}

    def _columns(
        self,
        ds: ServedDataset,
        ids: np.ndarray,
        names: list[str],
        kinds: dict[str, tuple[str, str, list[int]]],
    ) -> dict[str, ColumnValues | BytesRefs]:
        """The block's columns; bytes columns as places in the shared files (values
        stored compressed, or in a file not shared, are read and sent inline)."""
        shared = self._shared_files(ds)
        by_place = [c for c in names if kinds[c][0] == "bytes" and shared.any]
        rest = [c for c in names if c not in by_place]
        read = ds.reader.read_rows(ids, columns=rest, bytes_as_arrays=True).columns if rest else {}
        out: dict[str, ColumnValues | BytesRefs] = {}
        for name in names:
            if name not in by_place:
                out[name] = read[name]
                continue
            files, offsets, lengths = ds.reader.locate_bytes(ids, name)
            files = shared.only_shared(files)
            inline: dict[int, Any] = {}
            elsewhere = np.flatnonzero(files < 0)
            if len(elsewhere):
                block = ds.reader.read_rows(ids[elsewhere], columns=[name], bytes_as_arrays=True)
                inline = dict(zip(elsewhere.tolist(), block.columns[name], strict=True))
            out[name] = BytesRefs(files, offsets, lengths, inline)
        return out

    def _shared_files(self, ds: ServedDataset) -> _SharedFiles:
        with self._lock:
            shared = self._shared.get(ds.name)
            if shared is None:
                shared = self._shared[ds.name] = _SharedFiles(ds)
            return shared


class _Connection:
    """One client's socket, what it has half sent or not yet read, its dataset (after
    hello) and the segments mapped for it."""

    def __init__(self, sock: socket.socket, refused_until: float | None = None) -> None:
        self.sock = sock
        self.inbox = Inbox(max_fds=0)
        self.refused_until = refused_until
        """For a connection told ``busy``: when it is closed if its hello has not come."""
        self.outbox = b""
        self.outbox_fds: tuple[int, ...] = ()
        self.closing = False
        self.dataset: ServedDataset | None = None
        self.segments: dict[int, mmap.mmap] = {}
        self.active = time.monotonic()

    def expired(self, now: float) -> bool:
        """True when the connection has used up its time: refused, or idle too long."""
        if self.refused_until is not None:
            return now >= self.refused_until
        return now - self.active > IDLE_TIMEOUT_S

    def queue(self, reply: dict[str, Any], fds: tuple[int, ...]) -> None:
        """Send ``reply`` (and ``fds``) as far as the socket takes it now."""
        self.outbox, self.outbox_fds = encode(reply), fds
        self.flush()

    def flush(self) -> None:
        """Send more of the waiting answer (the descriptors go with its first bytes)."""
        if not self.outbox:
            return
        try:
            if self.outbox_fds:
                sent = send_fds_with(self.sock, self.outbox, self.outbox_fds)
                self.outbox_fds = ()
            else:
                sent = self.sock.send(self.outbox)
        except BlockingIOError:
            return
        self.outbox = self.outbox[sent:]


class _SharedFiles:
    """The shard files of one dataset that same-host readers may map themselves.

    A shard is shared when its path still names the file the server mapped (same inode,
    not shorter): the reader then views the very bytes the server checksummed. Values in
    other shards (replaced since, or not local files) are copied into the segment.
    """

    def __init__(self, ds: ServedDataset) -> None:
        self._fds: dict[int, int] = {}
        for number, shard in enumerate(ds.reader.shards):
            fd = shard.open_mapped_file()
            if fd is not None:
                self._fds[number] = fd
        self._shared = np.zeros(len(ds.reader.shards) + 1, dtype=bool)  # [-1]: not shared
        self._shared[list(self._fds)] = True
        self.any = bool(self._fds)

    def only_shared(self, files: np.ndarray) -> np.ndarray:
        """``files`` with -1 for every file number that is not shared."""
        return np.where(self._shared[files], files, -1)

    def descriptor(self, number: Any) -> int:
        """The read-only descriptor of shared file ``number`` (ApiError if not shared)."""
        fd = self._fds.get(number) if isinstance(number, int) else None
        if fd is None:
            raise ApiError("bad_request", f"file {number!r} is not shared")
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


def _segment_number(message: dict[str, Any]) -> int:
    number = message.get("segment")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ApiError("bad_request", f'"segment" must be a non-negative integer, got {number!r}')
    return number


def _map_segment(fd: int) -> mmap.mmap:
    """Map a client's segment for writing, if it is a memfd sealed against shrinking.

    The seal is what makes writing safe: a file the client could shrink while the server
    writes would kill the server with SIGBUS.
    """
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as exc:
        raise ApiError("bad_request", "the segment is not a sealable memfd") from exc
    if not seals & fcntl.F_SEAL_SHRINK:
        raise ApiError("bad_request", "the segment must be sealed with F_SEAL_SHRINK")
    size = os.fstat(fd).st_size
    if not 0 < size <= MAX_SEGMENT_BYTES:
        raise ApiError("bad_request", f"segment of {size} bytes; 1 to {MAX_SEGMENT_BYTES}")
    try:
        # Not MAP_POPULATE: on a memfd that would allocate every page the client has not
        # touched yet (the server's memory, up to MAX_SEGMENT_BYTES a segment); the client
        # populates its segments itself, so writing here faults in mapped pages only.
        return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:
        raise ApiError("bad_request", f"cannot map the segment for writing ({exc})") from exc


def _unmap(mapped: mmap.mmap) -> None:
    with contextlib.suppress(BufferError):  # a view still alive: the collector closes it
        mapped.close()


def _value_bytes(values: dict[str, ColumnValues | BytesRefs], header: dict[str, Any]) -> int:
    """Bytes of the values of one same-host block: what the reader gets, whether written
    into its segment or mapped from a shared file. The offsets and shapes that frame
    variable-size values are not counted (over HTTP the whole answer is)."""
    total = 0
    for entry in header["columns"]:
        column = values[entry["name"]]
        if isinstance(column, BytesRefs):
            shared = column.files >= 0
            total += int(column.lengths[shared].sum())
            total += sum(_nbytes(v) for v in column.inline.values())
        else:  # fixed: [data]; bytes, string: [offsets, data]; vararray: [offsets, shapes, data]
            total += int(entry["sizes"][-1])
    return total


def _nbytes(value: Any) -> int:
    return int(value.nbytes) if isinstance(value, np.ndarray) else len(memoryview(value).cast("B"))
