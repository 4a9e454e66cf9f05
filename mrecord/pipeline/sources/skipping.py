"""``on_error="skip" | "warn"``: reading around damaged chunks instead of ending the epoch.

A read of a block of rows fails with :class:`~mrecord.errors.CorruptFileError` (a
:class:`~mrecord.errors.ChecksumError`, a chunk that does not decode, ...) when any of its
rows sits in a damaged chunk. :class:`SkipDamaged` then splits the block in halves and reads
each again, down to single rows: the rows whose read still fails are the damaged chunk's,
and they are dropped, recorded (``skipped_rows``, with the first errors) and, for
``"warn"``, announced with a ``RuntimeWarning``. A block with no damage costs one read, as
before; one damaged chunk of ``k`` rows costs about ``2 k log2(block)`` extra small reads.
The default, ``"raise"``, never comes here.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

import numpy as np

from mrecord.block import Block
from mrecord.errors import ArgumentError, CorruptFileError

__all__ = ["ON_ERROR", "SkipDamaged", "check_on_error"]

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
        good: list[np.ndarray] = []
        bad: list[int] = []
        first_error: list[str] = []
        self._split(ids, good, bad, first_error)
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
        kept = np.concatenate(good) if good else np.zeros(0, dtype=np.int64)
        return self._read_rows(kept)

    def _split(
        self, ids: np.ndarray, good: list[np.ndarray], bad: list[int], errors: list[str]
    ) -> None:
        try:
            self._read_rows(ids)
        except CorruptFileError as exc:
            if len(ids) == 1:
                bad.append(int(ids[0]))
                if not errors:
                    errors.append(str(exc))
                return
            half = len(ids) // 2
            self._split(ids[:half], good, bad, errors)
            self._split(ids[half:], good, bad, errors)
            return
        good.append(ids)
