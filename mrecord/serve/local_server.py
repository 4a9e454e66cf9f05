"""The same-host transport's server: blocks written straight into the reader's memory.

A ``RemoteDataset`` on the same machine as ``mrecord serve`` connects to a Unix socket
(only the server's user can: the socket is 0600 in a 0700 folder) and hands the server
shared-memory segments (sealed memfds). The server answers a block request by writing
the block's buffers into one of them: every byte is copied once, from the file's map into
the reader's memory, instead of twice through a TCP socket. Requests, limits and error
codes are the HTTP API's (:mod:`~mrecord.serve.answers`); docs/SERVE.md, "Same-host
readers", has the protocol and the security model.

::

    with LocalServer(datasets, default_socket_path(), token=None, limits=Limits()) as server:
        ...   # server.path is what GET /api/datasets/{name} advertises as "local_socket"
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import mmap
import os
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
from mrecord.serve.answers import ApiError, Limits, classify, plan_block
from mrecord.serve.local_protocol import VERSION, receive, send
from mrecord.serve.registry import ServedDataset
from mrecord.serve.security import token_matches
from mrecord.serve.wire import BytesRefs, NeedsRoom, encode_block_into, request_fields

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
_MESSAGE_TIMEOUT_S = 10.0
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
    ``max_connections`` connections; more are told ``busy`` and closed).
    """

    def __init__(
        self,
        datasets: dict[str, ServedDataset],
        path: Path,
        *,
        token: str | None,
        limits: Limits,
        max_connections: int = 64,
    ) -> None:
        self.datasets = datasets
        self.path = path
        self._token = token
        self._limits = limits
        self._max_connections = max_connections
        self._mapped: dict[str, _SharedFiles] = {}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()

    # -- lifetime ----------------------------------------------------------------------------------

    def start(self) -> LocalServer:
        """Bind the socket (0600; a stale file of a dead server is replaced) and accept."""
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                listener.bind(str(self.path))
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._thread = threading.Thread(target=self._loop, name="mrecord-local", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, remove the socket."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")  # the loop is in select(): wake it
        if self._thread is not None:
            self._thread.join(timeout=2 * _MESSAGE_TIMEOUT_S)
        if self._listener is not None:
            self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        with self._lock:
            shared, self._mapped = list(self._mapped.values()), {}
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
        """Accept and answer every connection, one message at a time, in this one thread.

        One thread rather than one per connection: on few cores, threads answering at
        once mostly hand the GIL to each other (futex wake-ups were a sixth of the
        server's CPU per MB, measured with perf), and an answer is short: the values
        themselves are not copied (files shared) or are copied once.
        """
        listener = self._listener
        assert listener is not None
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, None)
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stopping:
                for key, _ in selector.select(timeout=_IDLE_CHECK_S):
                    if key.data == "wake":
                        break
                    if key.data is None:
                        self._accept(listener, selector)
                    elif not self._step(key.data):
                        selector.unregister(key.fileobj)
                        self._drop(key.data)
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    if isinstance(key.data, _Connection) and now - key.data.active > IDLE_TIMEOUT_S:
                        selector.unregister(key.fileobj)
                        self._drop(key.data)
        finally:
            for key in list(selector.get_map().values()):
                if isinstance(key.data, _Connection):
                    self._drop(key.data)
            selector.close()

    def _accept(self, listener: socket.socket, selector: selectors.BaseSelector) -> None:
        try:
            sock, _ = listener.accept()
        except OSError:
            return  # closed by stop(), or the client gave up
        with self._lock:
            busy = len(self._connections) >= self._max_connections
            if not busy:
                self._connections.add(sock)
        if busy:
            self._refuse(sock)
            return
        # A message is read whole once its first byte is here; a client that stops
        # half-way is dropped after this long.
        sock.settimeout(_MESSAGE_TIMEOUT_S)
        selector.register(sock, selectors.EVENT_READ, _Connection(sock))

    def _refuse(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.settimeout(1.0)
            message = f"more than {self._max_connections} connections at once; try again"
            send(sock, {"error": {"code": "busy", "message": message}})
        sock.close()

    def _step(self, conn: _Connection) -> bool:
        """Answer the next message of ``conn``; False when the connection is over."""
        conn.active = time.monotonic()
        try:
            if conn.dataset is None:
                conn.dataset = self._hello(conn.sock)
                return conn.dataset is not None
            message, fds = receive(conn.sock, max_fds=1)
            give: tuple[int, ...] = ()
            try:
                reply, give = self._answer(conn.dataset, message, fds, conn.segments)
            except Exception as exc:
                code, text = classify(exc, self.datasets.values())
                reply = {"error": {"code": code, "message": text}}
            finally:
                for fd in fds:
                    os.close(fd)
            send(conn.sock, reply, give)
            return True
        except (OSError, DatasetServerError) as exc:  # gone, too slow, or not our protocol
            _log.debug("same-host connection ended: %s", exc)
            return False

    def _drop(self, conn: _Connection) -> None:
        for mapped in conn.segments.values():
            _unmap(mapped)
        conn.segments = {}
        with self._lock:
            self._connections.discard(conn.sock)
        conn.sock.close()

    def _hello(self, conn: socket.socket) -> ServedDataset | None:
        message, _ = receive(conn)
        error = None
        ds = self.datasets.get(str(message.get("dataset")))
        token = message.get("token")
        if message.get("op") != "hello" or message.get("version") != VERSION:
            error = ("bad_request", f"expected hello version {VERSION}, got {message!r:.200}")
        elif self._token and not token_matches(token, self._token):
            error = ("unauthorized", "missing or wrong token")
        elif ds is None:
            names = sorted(self.datasets)
            error = ("unknown_dataset", f"no dataset named {message.get('dataset')!r}: {names}")
        if error is not None:
            send(conn, {"error": {"code": error[0], "message": error[1]}})
            return None
        assert ds is not None
        send(conn, {"ok": True, "rows": ds.reader.num_rows})
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
        for number in message.get("unmap") or ():
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
        region = np.frombuffer(mapped, dtype=np.uint8)
        try:
            header = encode_block_into(values, plan.kinds, len(ids), region)
        except NeedsRoom as exc:
            return {"need": exc.nbytes}
        finally:
            del region
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
            shared = self._mapped.get(ds.name)
            if shared is None:
                shared = self._mapped[ds.name] = _SharedFiles(ds)
            return shared


class _Connection:
    """One client's socket, its dataset (after hello) and the segments mapped for it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.dataset: ServedDataset | None = None
        self.segments: dict[int, mmap.mmap] = {}
        self.active = time.monotonic()


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
        # Populated at once: one pass over the page tables instead of a fault per page
        # on the first block written into it.
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(fd, size, flags, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:
        raise ApiError("bad_request", f"cannot map the segment for writing ({exc})") from exc


def _unmap(mapped: mmap.mmap) -> None:
    with contextlib.suppress(BufferError):  # a view still alive: the collector closes it
        mapped.close()
