"""Which input files a checkpoint's rows came from, and whether they are still the same.

A resumed conversion must end with the bytes a clean run writes from the input as it is
now. The rows written before the checkpoint came from files read then: if one of those
files changed since, its row is stale and the resume is refused. A file not converted
yet may change freely: the resumed run reads it as it is.

So a source of many files (``imagefolder``) notes each file's size and modification time
as it reads it (``fstat`` of the descriptor it reads through: no second pass over a
million files), batch by batch. The converter reads a few batches ahead of what it has
written, so the digest's state after each batch is kept until a checkpoint says which
batches are written (:meth:`ConvertedFiles.state`). On resume,
:meth:`ConvertedFiles.restore` states those files again (on threads: cold, a million
files are a million small reads) and compares the digest.

A digest, not a list: a checkpoint of a million-file conversion is rewritten every
minute. When it differs, the files modified since the first run started are named (and
files gone); a change that kept its time and size is not seen, as ``make``'s is not.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from mrecord.convert.base import stat_files
from mrecord.errors import ArgumentError, CheckpointError

__all__ = ["NOT_STATED", "ConvertedFiles", "FileStat", "size_and_time"]

FileStat = tuple[str, int, int]
"""``(name relative to the source, size, st_mtime_ns)`` of one file as it was read."""

NOT_STATED = -1
"""Size and time of a file that could not be stated (gone, or its folder unreadable)."""

_NAMED = 5  # changed files named in an error


def size_and_time(st: os.stat_result | None) -> tuple[int, int]:
    """What a file's stat adds to the record: its size and ``st_mtime_ns`` (``NOT_STATED``
    twice when it could not be stated). The one rule for the reads that note a file and
    the resume that states it again, so that an unchanged file gives the same digest."""
    if st is None:
        return NOT_STATED, NOT_STATED
    return st.st_size, st.st_mtime_ns


def _lines(files: Sequence[FileStat]) -> bytes:
    text = "".join(f"{name}\0{size}\0{mtime}\n" for name, size, mtime in files)
    return text.encode("utf-8", "surrogateescape")  # file names need not be UTF-8


class ConvertedFiles:
    """The files behind the rows written so far (see the module docstring)."""

    def __init__(self, since_ns: int | None = None) -> None:
        """``since_ns``: when the first run of this conversion started (now if None)."""
        self._digest = hashlib.sha256()
        self._files = 0
        # (files, digest) after each batch noted and not yet checkpointed, keyed by the
        # batches before that point: a copy of the hash's state (~200 bytes), not the
        # batch's lines, so that a minute without a checkpoint holds little memory.
        self._after: dict[int, tuple[int, Any]] = {0: (0, self._digest.copy())}
        self._batches = 0
        self.since_ns = time.time_ns() if since_ns is None else since_ns

    def note(self, batch: int, files: Sequence[FileStat]) -> None:
        """Batch ``batch``'s files as they were read, in row order; batches are noted in
        order, each once (from the thread that collects them)."""
        if batch != self._batches:
            raise ArgumentError(
                f"batch {batch} noted after {self._batches} batches: batches are noted in order"
            )
        self._digest.update(_lines(files))
        self._files += len(files)
        self._batches = batch + 1
        self._after[self._batches] = (self._files, self._digest.copy())

    def state(self, position: int) -> dict[str, Any]:
        """What a checkpoint after batch ``position - 1`` keeps (JSON-able): the digest
        of the files of every batch before ``position``, each noted already."""
        files, digest = self._after[position]
        for before in [k for k in list(self._after) if k < position]:
            del self._after[before]
        return {
            "batches": position,
            "files": files,
            "digest": digest.hexdigest(),
            "since_ns": self.since_ns,
        }

    @classmethod
    def restore(
        cls,
        state: dict[str, Any] | None,
        first_files: Callable[[int], Sequence[tuple[str, str]]],
        where: str,
    ) -> ConvertedFiles:
        """The record of a checkpoint's ``state``, after checking that its files are
        unchanged. ``first_files(n)``: the source's first ``n`` files as ``(name, path)``
        in row order; ``where``: the source, for messages. Raises
        :class:`~mrecord.errors.CheckpointError` naming the files that changed."""
        if not isinstance(state, dict) or not {"files", "digest", "batches"} <= set(state):
            raise CheckpointError(
                f"the checkpoint does not record which files of {where!r} it converted "
                "(written by an older mrecord); rerun without --resume to start over"
            )
        count = int(state["files"])
        files = list(first_files(count))
        stats = stat_files([path for _, path in files])
        now = [(name, *size_and_time(st)) for (name, _), st in zip(files, stats, strict=True)]
        record = cls(int(state.get("since_ns", 0)))
        record._digest.update(_lines(now))
        if len(files) != count or record._digest.hexdigest() != state["digest"]:
            raise CheckpointError(_changed_message(now, count, record.since_ns, where))
        record._files, record._batches = count, int(state["batches"])
        record._after = {record._batches: (count, record._digest.copy())}
        return record


def _changed_message(now: Sequence[FileStat], count: int, since_ns: int, where: str) -> str:
    gone = [name for name, size, _ in now if size == NOT_STATED]
    touched = [name for name, size, mtime in now if size != NOT_STATED and mtime >= since_ns]
    suspects = [*gone, *touched]
    if suspects:
        shown = ", ".join(repr(n) for n in suspects[:_NAMED])
        more = f" and {len(suspects) - _NAMED} more" if len(suspects) > _NAMED else ""
        which = f": {shown}{more} (gone, or modified after the conversion started)"
    else:
        which = " (their sizes or modification times differ from when they were read)"
    return (
        f"cannot resume: of the {count:,} files of {where!r} already converted, some "
        f"changed since{which}; the rows written from them would differ from a new run's. "
        "Rerun without --resume to convert again"
    )
