"""``on_error="skip" | "warn"``: reading around damaged chunks instead of ending the epoch.

A read of a block of rows fails with :class:`~mrecord.errors.CorruptFileError` (a
:class:`~mrecord.errors.ChecksumError`, a chunk that does not decode, ...) when any of its
rows sits in a damaged chunk. :class:`SkipDamaged` then splits the block in halves and reads
each again, down to single rows: the rows whose read still fails are the damaged chunk's,
and they are dropped, recorded (``skipped_rows``, with the first errors) and, for
``"warn"``, announced with a ``RuntimeWarning``. A block with no damage costs one read, as
before; one damaged chunk of ``k`` rows costs about ``2 k log2(block)`` extra small reads.
The default, ``"raise"``, never comes here.

:func:`find_damaged` is the search itself (which of some rows cannot be read, and why),
shared with the PyTorch adapter's datasets, which keep their own record of the
skipped rows across DataLoader worker processes.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, CorruptFileError

__all__ = ["ON_ERROR", "SkipDamaged", "check_on_error", "find_damaged"]

ON_ERROR = ("raise", "skip", "warn")
_KEPT_ERRORS = 10


def check_on_error(value: object) -> str:
    """``value`` if it is one of :data:`ON_ERROR`, else ArgumentError."""
    if value not in ON_ERROR:
        raise ArgumentError(f"on_error must be one of {ON_ERROR!r}, got {value!r}")
    return str(value)


class SkipDamaged:
    """Reads rows with ``read_rows`` and drops those of damaged chunks (thread-safe)."""

    def __init__(self, read_rows: Callable[[np.ndarray], Block], warn: bool) -> None:
        self._read_rows = read_rows
        self._warn = warn
        self._lock = threading.Lock()
        self._skipped: list[int] = []
        self.errors: list[str] = []
        """The first errors met (file, page and offset in each)."""

    def __getstate__(self) -> dict[str, object]:
        # A dataset travels to worker processes by pickle; a lock does not (a new one there).
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def skipped_rows(self) -> list[int]:
        """Row ids skipped so far, sorted."""
        with self._lock:
            return sorted(self._skipped)

    def report(self) -> str:
        """One line: how many rows were skipped, and the first errors."""
        rows = self.skipped_rows
        if not rows:
            return "no damaged rows skipped"
        return f"skipped {len(rows)} row(s) of damaged chunks: " + "; ".join(self.errors)

    def read(self, ids: np.ndarray) -> Block:
        """The rows ``ids`` that can be read, in their order."""
        try:
            return self._read_rows(ids)
        except CorruptFileError:
            pass
        kept, errors = find_damaged(self._read_rows, ids)
        bad = [int(i) for i in ids[~kept]]
        first_error = [next(iter(errors.values()))] if errors else []
        with self._lock:
            self._skipped.extend(bad)
            for message in first_error:
                if len(self.errors) < _KEPT_ERRORS:
                    self.errors.append(message)
        if self._warn and bad:
            warnings.warn(
                f"skipped {len(bad)} row(s) of a damaged chunk ({first_error[0]})",
                RuntimeWarning,
                stacklevel=2,
            )
        return self._read_rows(ids[kept])


def find_damaged(
    read_rows: Callable[[np.ndarray], object], ids: np.ndarray
) -> tuple[np.ndarray, dict[int, str]]:
    """Which of the rows ``ids`` can be read: ``(kept, errors)``.

    ``kept`` is a boolean mask over ``ids``; ``errors`` maps the index (into ``ids``) of
    each row that cannot be read to its error's text, which names the file, page and
    bytes of the damaged chunk (so rows of one chunk share one text). The block is
    halved until the failing reads are single rows.
    """
    ids = np.asarray(ids, dtype=np.int64)
    kept = np.ones(len(ids), dtype=bool)
    errors: dict[int, str] = {}
    _split(read_rows, ids, 0, kept, errors)
    return kept, errors


def _split(
    read_rows: Callable[[np.ndarray], object],
    ids: np.ndarray,
    at: int,
    kept: np.ndarray,
    errors: dict[int, str],
) -> None:
    try:
        read_rows(ids)
    except CorruptFileError as exc:
        if len(ids) == 1:
            kept[at] = False
            errors[at] = str(exc)
            return
        half = len(ids) // 2
        _split(read_rows, ids[:half], at, kept, errors)
        _split(read_rows, ids[half:], at + half, kept, errors)
