"""Many direct reads in flight with two releases of the GIL: Linux's native AIO.

A reader's cold values come off the disk with ``O_DIRECT`` reads (``readahead.read_direct``).
Done by a pool of Python threads, each read gives the GIL back for its ``pread`` and must
take it again before its thread can start the next one. While any other thread runs Python
(the consumer's training step, the other reading thread gathering its block), taking it
back waits for that thread's switch interval (5 ms): measured on this machine, 16 threads
of 100 KB direct reads went from 13,178 reads/s to 2,067 with one Python thread spinning
beside them, and a cold random read of images in a 200 MB group spent a read's worth of
device time two to three times over waiting on its 64 values.

Here a whole batch goes to the kernel with one ``io_submit`` and comes back with
``io_getevents``: two system calls, so two waits for the GIL at most, whatever the number of
reads, and up to :data:`DEPTH` of them in flight at once on the device. No threads are
involved (the kernel queues the requests), so the I/O depth is not capped by the cores or
the GIL. Each thread has its own AIO context (``io_setup``), destroyed with the thread's
local storage, and a forked child makes new ones (a context belongs to the process that set
it up).

Only where the kernel's interface is known here: Linux on x86-64 or AArch64 (the system call
numbers and the little-endian ``struct iocb``). Elsewhere, where ``io_setup`` is refused (a
sandbox's seccomp, an exhausted ``fs.aio-max-nr``), where ``MRECORD_NATIVE_AIO=0``, or on
a file system that does the reads inside ``io_submit`` one after another (no asynchronous
direct I/O: only the file systems known to read asynchronously take this path), :func:`read_batch`
answers None and the caller reads on its threads as before.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import sys
import threading
from collections.abc import Sequence

import numpy as np

__all__ = ["DEPTH", "ENABLED", "read_batch"]

ENABLED = os.environ.get("MRECORD_NATIVE_AIO", "1") != "0"
"""``MRECORD_NATIVE_AIO=0`` reads direct values on the I/O threads instead (to compare)."""

DEPTH = int(os.environ.get("MRECORD_AIO_DEPTH", "256"))
"""Reads in flight at once per batch (a thread's context holds this many). A block's reads
all go at once up to it: beyond it, each refill of the window waits for the GIL again
(measured: images GLOBAL over 2.4 GB in an 800 MB group, 245 rows a block, second epoch
10.2-11.7K rows/s with 64, 14.6-15.8K with 512; then 12.3-16.4K with 256 against
13.1-16.0K with 512; `farm-bench`, alternating). Alone, 100 KB direct reads at random
places gave 10,249 / 12,460 / 12,644 / 14,314 reads/s at 8 / 16 / 32 / 64 on this
machine's virtual disk. The kernel counts
about twice this per context against ``fs.aio-max-nr`` (65,536 by default, for the whole
system): a thread whose ``io_setup`` is refused reads on the I/O threads."""

# System call numbers of io_setup, io_destroy, io_submit, io_getevents.
_SYSCALLS = {
    "x86_64": (206, 207, 209, 208),
    "aarch64": (0, 1, 2, 4),
}
_IOCB_CMD_PREAD = 0
# struct iocb (linux/aio_abi.h), little-endian: aio_key before aio_rw_flags.
_IOCB = np.dtype(
    {
        "names": ["data", "opcode", "fd", "buf", "nbytes", "offset"],
        "formats": [np.uint64, np.uint16, np.uint32, np.uint64, np.uint64, np.int64],
        "offsets": [0, 16, 20, 24, 32, 40],
        "itemsize": 64,
    }
)
# struct io_event: data, obj, res, res2.
_EVENT = np.dtype([("data", np.uint64), ("obj", np.uint64), ("res", np.int64), ("res2", np.int64)])

_ASYNC_FILE_SYSTEMS = {
    0xEF53: "ext2/3/4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0xF2F52010: "f2fs",
    0x6969: "nfs",
    0x794C7630: "overlayfs",
}
"""File systems (``statfs``'s ``f_type``) whose direct reads the kernel's AIO runs
asynchronously. Elsewhere (FUSE mounts of object stores among them) ``io_submit`` may do
the reads itself one after another, slower than the threads: they read as before."""


def _load() -> tuple[ctypes._CFuncPtr, tuple[int, int, int, int]] | None:  # type: ignore[name-defined]
    if not ENABLED or not sys.platform.startswith("linux") or sys.byteorder != "little":
        return None
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    libc = _libc()
    syscall = getattr(libc, "syscall", None) if libc is not None else None
    if syscall is None:
        return None
    syscall.restype = ctypes.c_long
    return syscall, numbers


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, loaded once (None where it cannot be)."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_KERNEL = _load()
_local = threading.local()
_asynchronous: dict[int, bool] = {}  # descriptor -> whether its file system reads asynchronously
_refused = False  # io_setup refused in this process: not asked again


class _Context:
    """One thread's AIO context (``handle``, from ``io_setup``), with room for
    :data:`DEPTH` requests."""

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.pid = os.getpid()
        self.iocbs = np.zeros(DEPTH, _IOCB)
        self.events = np.zeros(DEPTH, _EVENT)
        # The kernel takes an array of pointers to the iocbs: one slot each, fixed.
        self.pointers = (self.iocbs.ctypes.data + np.arange(DEPTH, dtype=np.uint64) * 64).astype(
            np.uint64
        )

    def close(self) -> None:
        """Destroy the context (the kernel waits for anything still in flight)."""
        if self.handle and self.pid == os.getpid() and _KERNEL is not None:
            syscall, (_, destroy, _, _) = _KERNEL
            syscall(ctypes.c_long(destroy), ctypes.c_ulong(self.handle))
        self.handle = 0

    def __del__(self) -> None:  # the thread's local storage went with the thread
        self.close()


def _context() -> _Context | None:
    """This thread's context, set up on its first batch; None where the kernel refuses."""
    global _refused
    if _KERNEL is None or _refused:
        return None
    context: _Context | None = getattr(_local, "context", None)
    if context is not None and context.pid == os.getpid():
        return context
    if getattr(_local, "refused_in", None) == os.getpid():
        return None
    # A forked child's first batch: the parent's context is not its own.
    syscall, (setup, _, _, _) = _KERNEL
    handle = ctypes.c_ulong(0)
    if syscall(ctypes.c_long(setup), ctypes.c_long(DEPTH), ctypes.byref(handle)) != 0:
        if ctypes.get_errno() == errno.EAGAIN:
            # fs.aio-max-nr taken by other contexts (other threads, processes): this
            # thread reads on the I/O threads; others may still get theirs.
            _local.refused_in = os.getpid()
        else:
            _refused = True  # ENOSYS, EPERM (a sandbox's seccomp): never here
        return None
    context = _local.context = _Context(handle.value)
    return context


def read_batch(
    fd: int, buffer: np.ndarray, places: Sequence[tuple[int, int, int, int]]
) -> bool | None:
    """Read ``(at, offset, span, need)``: ``span`` bytes of ``fd`` from ``offset`` into
    ``buffer[at:at + span]``, each needing at least ``need`` bytes, with up to
    :data:`DEPTH` in flight. True when every read got its bytes, False when one failed or
    came back short (the caller reads another way), None when native AIO is not
    available here or ``fd``'s file system does not read asynchronously (the caller reads
    on its threads). Never returns with a read still in flight: ``buffer`` is the
    caller's again when it returns, whatever happened."""
    if not places:
        return None
    context = _context()
    if context is None or not _reads_asynchronously(fd):
        return None
    table = np.asarray(places, dtype=np.int64).reshape(len(places), 4)
    base = buffer.ctypes.data
    got = np.zeros(len(places), dtype=np.int64)
    sent = done = 0
    free = list(range(DEPTH))  # iocb slots not in flight
    owner = np.zeros(DEPTH, dtype=np.int64)  # the place each slot reads
    try:
        while done < len(places):
            count = min(len(free), len(places) - sent)
            if count:
                slots = free[:count]
                del free[:count]
                rows = table[sent : sent + count]
                iocbs = context.iocbs  # fields not named here stay 0, as the kernel wants
                iocbs["data"][slots] = slots
                iocbs["opcode"][slots] = _IOCB_CMD_PREAD
                iocbs["fd"][slots] = fd
                iocbs["buf"][slots] = base + rows[:, 0]
                iocbs["nbytes"][slots] = rows[:, 2]
                iocbs["offset"][slots] = rows[:, 1]
                owner[slots] = np.arange(sent, sent + count)
                pointers = np.ascontiguousarray(context.pointers[slots])
                accepted = _submit(context, pointers)
                if accepted < count:  # not taken: their slots are free again
                    free += slots[max(0, accepted) :]
                if accepted <= 0 and sent == done:
                    return None if accepted < 0 else False  # nothing in flight: threads
                sent += max(0, accepted)
            # Every wait for the kernel is a wait for the GIL after it: wait for all the
            # reads in flight at once when none is left to send, else for half of them.
            pending = sent - done
            arrived = _get_events(
                context, pending if sent == len(places) else max(1, pending // 2), pending
            )
            if arrived is None:  # the kernel would not tell: wait out the rest, threads
                _drop(context)
                return None
            for slot, result in arrived:
                got[owner[slot]] = result
                free.append(slot)
            done += len(arrived)
    except BaseException:
        _drop(context)
        raise
    return bool(np.all(got >= table[:, 3]))


def _drop(context: _Context) -> None:
    """Give up this thread's context. Nothing may write into a batch's buffer after
    :func:`read_batch` returns: destroying the context waits for what is in flight."""
    context.close()
    _local.context = None


def _reads_asynchronously(fd: int) -> bool:
    """Whether ``fd``'s file system is one of :data:`_ASYNC_FILE_SYSTEMS` (asked once per
    descriptor; a descriptor number reused for another file keeps the first answer, which
    only decides how its reads are issued, never what they return)."""
    known = _asynchronous.get(fd)
    if known is None:
        if len(_asynchronous) > 4096:
            _asynchronous.clear()
        known = _asynchronous[fd] = _file_system_type(fd) in _ASYNC_FILE_SYSTEMS
    return known


def _file_system_type(fd: int) -> int | None:
    """``fstatfs(fd).f_type`` (the first field of ``struct statfs`` on 64-bit Linux)."""
    libc = _libc()
    fstatfs = getattr(libc, "fstatfs", None) if libc is not None else None
    if fstatfs is None:
        return None
    answer = ctypes.create_string_buffer(512)  # more than any struct statfs
    if fstatfs(ctypes.c_int(fd), answer) != 0:
        return None
    return ctypes.c_long.from_buffer(answer).value & 0xFFFFFFFF


def _submit(context: _Context, pointers: np.ndarray) -> int:
    """``io_submit`` of ``pointers``: how many the kernel took, or -1 when it refused the
    first (a retry after ``EINTR``/``EAGAIN`` with nothing taken is the caller's: threads)."""
    assert _KERNEL is not None
    syscall, (_, _, submit, _) = _KERNEL
    while True:
        taken = syscall(
            ctypes.c_long(submit),
            ctypes.c_ulong(context.handle),
            ctypes.c_long(len(pointers)),
            ctypes.c_void_p(pointers.ctypes.data),
        )
        if taken >= 0:
            return int(taken)
        if ctypes.get_errno() != errno.EINTR:
            return -1


def _get_events(context: _Context, least: int, most: int) -> list[tuple[int, int]] | None:
    """Wait for at least ``least`` of the context's reads: (slot, result) of each that
    ended (result: bytes read, or a negative errno); None when ``io_getevents`` fails."""
    assert _KERNEL is not None
    syscall, (_, _, _, getevents) = _KERNEL
    events = context.events
    while True:
        count = syscall(
            ctypes.c_long(getevents),
            ctypes.c_ulong(context.handle),
            ctypes.c_long(least),
            ctypes.c_long(min(most, DEPTH)),
            ctypes.c_void_p(events.ctypes.data),
            None,
        )
        if count >= 0:
            break
        if ctypes.get_errno() != errno.EINTR:
            return None
    ended = events[:count]
    return list(zip(ended["data"].tolist(), ended["res"].tolist(), strict=True))
