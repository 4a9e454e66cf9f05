"""``on_error="skip" | "warn"`` for the torch datasets: reading around damaged chunks.

A read of rows that meets a damaged chunk (:class:`~mrecord.errors.ChecksumError`, a chunk
that does not decode: any :class:`~mrecord.errors.CorruptFileError`) raises by default, as
``MindDataset`` does. With ``on_error="skip"`` (``"warn"`` also warns, once per damaged
chunk and process) the rows of the damaged chunk are found by
:func:`~mrecord.pipeline.sources.skipping.find_damaged` and left out, and
:class:`SkipLog` records them.

**Counts never change** (the lockstep policy, docs/TORCH.md "Damaged data"): every rank of
a DDP job must run the same number of steps, or the ranks that have more wait forever in
``all_reduce``. So a skipped row never removes a batch, nor a sample from a stream that is
batched later:

- a batch that keeps at least one good row is delivered without its damaged rows (it is
  shorter); this is the case of ``StreamingDataLoader`` (workers send whole batches) and
  of ``MapDataset.__getitems__`` (DataLoader's batched fetch);
- where a count must hold (a batch whose every row is damaged; a sample stream, which
  DataLoader batches later; ``MapDataset[i]``), each damaged row is replaced by a good
  row of the rank's own (see :func:`substitutes`), and the replacement is recorded too.

:class:`SkipLog` lives in shared memory, so the skips of DataLoader worker processes reach
``dataset.skipped_rows`` / ``dataset.skip_report()`` in the main process (the first
``MAX_IDS`` row ids and ``MAX_MESSAGES`` error texts are kept; the count is exact).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from mrecord.block import Block
from mrecord.errors import CorruptFileError
from mrecord.pipeline.sources.skipping import check_on_error, find_damaged
from mrecord.torch._common import torch

__all__ = ["MAX_IDS", "MAX_MESSAGES", "SkipLog", "scan_windows", "substitutes"]

MAX_IDS = 1 << 16
"""Skipped row ids kept for ``skipped_rows`` (the count goes on beyond)."""
MAX_MESSAGES = 16
"""Distinct damage messages kept (one per damaged chunk: file, page, bytes)."""
_MESSAGE_BYTES = 1024
_SCAN = 64
"""Rows read per step while looking for good rows to substitute."""


class SkipLog:
    """Rows skipped as damaged by a torch dataset and its DataLoader workers (thread- and
    process-safe; the buffers are shared memory, made only when ``on_error`` is not
    ``"raise"``)."""

    def __init__(self, on_error: str) -> None:
        self.on_error = check_on_error(on_error)
        self._ids: Any = None
        self._text: Any = None
        self._lock: Any = None
        self._warned: set[str] = set()  # per process: messages beyond MAX_MESSAGES
        if self.on_error != "raise":
            # [skipped rows, stored ids, stored messages, ids...]
            self._ids = torch.zeros(3 + MAX_IDS, dtype=torch.int64).share_memory_()  # type: ignore[no-untyped-call]
            self._text = torch.zeros(MAX_MESSAGES * _MESSAGE_BYTES, dtype=torch.uint8)
            self._text.share_memory_()
            self._lock = _FileLock()

    @property
    def skipping(self) -> bool:
        """Whether damaged rows are skipped (``on_error`` is ``"skip"`` or ``"warn"``)."""
        return self.on_error != "raise"

    def read(
        self, read_rows: Callable[[np.ndarray], Block], ids: np.ndarray
    ) -> tuple[Block, np.ndarray, dict[int, str]]:
        """``(block, lost, errors)``: the readable rows of ``ids`` in order, a boolean mask
        over ``ids`` of the rows left out, and each left-out index's error text.

        With ``on_error="raise"`` the error propagates (naming file, page and bytes).
        """
        try:
            return read_rows(ids), np.zeros(len(ids), dtype=bool), {}
        except CorruptFileError:
            if not self.skipping:
                raise
        kept, errors = find_damaged(read_rows, ids)
        self.record(ids[~kept], list(errors.values()))
        return read_rows(ids[kept]), ~kept, errors

    def record(self, ids: np.ndarray, messages: list[str]) -> None:
        """Count rows ``ids`` as skipped; warn (``"warn"``) for each chunk not seen before."""
        if not len(ids):
            return
        fresh: list[str] = []
        with self._lock:
            state = self._ids.numpy()
            total, stored, kept_messages = (int(v) for v in state[:3])
            room = min(len(ids), MAX_IDS - stored)
            state[3 + stored : 3 + stored + room] = ids[:room]
            state[0] = total + len(ids)
            state[1] = stored + room
            known = self._messages(kept_messages)
            for message in dict.fromkeys(messages):
                if message in known or message in self._warned:
                    continue
                fresh.append(message)
                if kept_messages < MAX_MESSAGES:
                    raw = message.encode()[: _MESSAGE_BYTES - 1]
                    start = kept_messages * _MESSAGE_BYTES
                    text = self._text.numpy()
                    text[start : start + _MESSAGE_BYTES] = 0
                    text[start : start + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
                    kept_messages += 1
                else:
                    self._warned.add(message)
            state[2] = kept_messages
        if self.on_error == "warn":
            for message in fresh:
                warnings.warn(
                    f"skipped the rows of a damaged chunk ({message})", RuntimeWarning,
                    stacklevel=3,
                )

    def _messages(self, count: int) -> list[str]:
        text = self._text.numpy()
        out = []
        for k in range(count):
            raw = bytes(text[k * _MESSAGE_BYTES : (k + 1) * _MESSAGE_BYTES])
            out.append(raw.split(b"\0", 1)[0].decode(errors="replace"))
        return out

    @property
    def skipped_count(self) -> int:
        """Rows skipped so far, by this process and its DataLoader workers."""
        return 0 if self._ids is None else int(self._ids.numpy()[0])

    @property
    def skipped_rows(self) -> list[int]:
        """Row ids skipped so far (sorted; the first ``MAX_IDS`` skips)."""
        if self._ids is None:
            return []
        with self._lock:
            state = self._ids.numpy()
            return sorted(int(i) for i in state[3 : 3 + int(state[1])])

    @property
    def errors(self) -> list[str]:
        """The damage met, one text per damaged chunk (file, page, bytes)."""
        if self._ids is None:
            return []
        with self._lock:
            return self._messages(int(self._ids.numpy()[2]))

    def report(self) -> str:
        """One line: how many rows were skipped, and where the damage is."""
        count = self.skipped_count
        if not count:
            return "no damaged rows skipped"
        return f"skipped {count} row(s) of damaged chunks: " + "; ".join(self.errors)


class _FileLock:
    """A lock between the threads of a process and its DataLoader workers, whatever their
    start method (a ``multiprocessing`` lock made in one context refuses to travel to
    ``spawn`` or ``forkserver`` workers): a thread lock, then ``flock`` on a temporary
    file that each process opens for itself. The process that made it removes the file
    when the lock is garbage collected (a forked worker never does)."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="mrecord-skips-", suffix=".lock")
        os.close(fd)
        self._reset()
        weakref.finalize(self, _remove, self.path, os.getpid())

    def _reset(self) -> None:
        self._fd: int | None = None
        self._pid = os.getpid()
        self._threads = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._reset()

    def __enter__(self) -> None:
        if self._pid != os.getpid():  # a forked worker: its own descriptor and thread lock
            self._reset()
        self._threads.acquire()
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()


def _remove(path: str, owner: int) -> None:
    if os.getpid() == owner:
        with contextlib.suppress(OSError):
            os.unlink(path)


def substitutes(
    read_rows: Callable[[np.ndarray], Block],
    candidates: Callable[[int], np.ndarray],
    need: int,
    what: str,
) -> np.ndarray:
    """``need`` readable row ids, found by reading ``candidates(k)`` for k = 0, 1, ...

    ``candidates(k)`` gives the k-th window of row ids to try (empty when there are no
    more). Used where a count must hold and a batch has no good row of its own; fails
    with :class:`~mrecord.errors.CorruptFileError` naming ``what`` when no good row exists.
    """
    found: list[np.ndarray] = []
    have = 0
    k = 0
    while have < need:
        ids = candidates(k)
        if not len(ids):
            raise CorruptFileError(
                f"on_error skipped every row of {what}: no readable row is left to keep the "
                "sample count (`mrecord verify` lists every damaged page)"
            )
        kept, _ = find_damaged(read_rows, ids)
        good = ids[kept]
        found.append(good)
        have += len(good)
        k += 1
    return np.concatenate(found)[:need]


def scan_windows(
    count: int, start: int, ids_at: Callable[[np.ndarray], np.ndarray]
) -> Callable[[int], np.ndarray]:
    """Windows over ``count`` candidates from index ``start`` on, wrapping around once;
    ``ids_at(indexes)`` gives their row ids (for :func:`substitutes`)."""

    def window(k: int) -> np.ndarray:
        first = k * _SCAN
        if first >= count:
            return np.zeros(0, dtype=np.int64)
        local = np.arange(first, min(count, first + _SCAN), dtype=np.int64)
        return np.asarray(ids_at((start + local) % count), dtype=np.int64)

    return window
