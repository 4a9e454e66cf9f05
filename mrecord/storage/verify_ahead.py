"""Checksumming a shard's chunks ahead of its readers, on another core.

Under ``verify="once"`` the first read of each chunk pays its CRC-32C before any byte
of it is handed out. For big values (images) that checksum is most of a first epoch's
cost, and a random-order reader (``read_row``, a map-style DataLoader, a shuffled
iterator) pays it on its own thread, one chunk at a time. Once readers have checked a
few chunks cold, a background thread checks the remaining ones in file order, so that
later reads find them verified; the reading thread's own checks stay as they were, so
no byte is ever served unchecked (a chunk the thread finds damaged is left unverified
and the reader that asks for it raises ``ChecksumError`` as before).

The thread is paced by the readers: it checks at most ``LEAD`` chunks per chunk the
readers checked cold, plus ``SLACK``, so a program that reads a handful of rows from a
huge file does not pull the whole file through the page cache. It works from the page
after the last one a reader had to check itself, so a reader of one region (its shard of
a sequential read, a DataLoader worker's range) gets that region checked, not the file's
start. It stops when idle, when the shard closes, and is not inherited by forked
processes (a child starts its own).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np

__all__ = ["VerifyAhead"]

START_AFTER = 16  # cold checks by readers before the thread starts
LEAD = 2  # chunks the thread may check per chunk checked cold by a reader
SLACK = 64  # ... plus this many
_IDLE_SECONDS = 1.0  # over budget for this long with no reader progress: the thread ends
_POLL_SECONDS = 0.005


class VerifyAhead:
    """The background checker of one shard (see the module docstring).

    ``check(page, col) -> bool`` checksums one chunk without raising (True: intact);
    ``verified`` is the shard's ``(pages, columns)`` record, which this marks.
    """

    def __init__(self, verified: np.ndarray, check: Callable[[int, int], bool]) -> None:
        self._verified = verified
        self._check = check
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cold = 0  # chunks checked cold by readers
        self._columns: set[int] = set()  # the columns readers read: the thread checks only these
        self._jump: int | None = None  # the page after the last one a reader checked cold
        self._done = 0  # chunks checked by the thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def note_cold_check(self, page: int, col: int) -> None:
        """A reader just checksummed chunk (``page``, ``col``), which nobody had verified:
        maybe start the thread, let it check further, and from the next page on."""
        if self._pid != os.getpid():
            self._reset()  # a forked child: the parent's thread does not exist here
        self._cold += 1
        self._columns.add(col)
        self._jump = page + 1
        if self._cold < START_AFTER or self._stop.is_set():
            return
        thread = self._thread
        if thread is None or not thread.is_alive():
            if bool(self._verified[:, sorted(self._columns)].all()):
                return
            thread = threading.Thread(target=self._run, name="mrecord-verify-ahead", daemon=True)
            self._thread = thread
            thread.start()

    def _budget(self) -> int:
        return LEAD * self._cold + SLACK

    def _run(self) -> None:
        try:
            self._check_ahead()
        except Exception:  # the readers' own checks report any damage when they read
            return

    def _check_ahead(self) -> None:
        verified = self._verified
        pages = len(verified)
        # the page after the last one a reader checked cold: past the end after the last page
        page, seen = (self._jump or 0) % pages, 0  # seen: pages passed since the last jump
        self._jump = None
        idle = 0.0
        while seen < pages:
            if self._stop.is_set():
                return
            if self._jump is not None:  # a reader checked a page cold: work right after it
                page, seen, self._jump = self._jump % pages, 0, None
            pending = [c for c in sorted(self._columns) if not verified[page, c]]
            if pending:
                while self._done >= self._budget():
                    if self._stop.wait(_POLL_SECONDS):
                        return
                    idle += _POLL_SECONDS
                    if idle >= _IDLE_SECONDS:
                        return  # the readers stopped; a later cold check starts a new thread
                idle = 0.0
                for col in pending:
                    if self._stop.is_set():
                        return
                    if not verified[page, col] and self._check(page, col):
                        verified[page, col] = True
                    self._done += 1
            # on to the next page, also past a chunk found damaged (left unverified: the
            # reader that asks for it raises), which would otherwise be checked again and
            # again until the budget ran out
            page, seen = (page + 1) % pages, seen + 1

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the thread has ended (it ends when done, idle or stopped); True if
        no thread runs now."""
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def stop(self) -> None:
        """Stop the thread and wait for it (it finishes the chunk it is checking)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            thread.join()
