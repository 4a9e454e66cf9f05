"""File descriptors: room for a dataset's shards, and a reserve left to the rest of the
process.

A shard holds up to three descriptors: its memory map's (CPython's ``mmap`` keeps a
duplicate of the descriptor it mapped) and, once it reads cold data, one for ``pread``
and one opened ``O_DIRECT``. A dataset of 1,000 shards read in GLOBAL order held 2,006.
Under the usual soft limit of 1,024 (``ulimit -n``) the reader quietly fell back to its
maps where a descriptor could not be opened, and left the process none: the training
script's next ``open`` (a checkpoint, a log, a DataLoader worker's pipe, a socket) failed
with ``EMFILE``.

- :func:`make_room` (before a dataset's shards are opened) raises the process's soft
  limit toward its hard one when the shards would otherwise leave less than the reserve,
  as ``ulimit -n`` would (the hard limit is never raised), and warns once,
  :class:`~mrecord.errors.DescriptorLimitWarning`, where even the hard limit leaves too
  little room.
- :func:`take_optional` / :func:`give_back_optional` count the descriptors a shard opens
  only to read faster (``pread``, ``O_DIRECT``): one is refused, and the shard reads
  through its map, where it would leave the process less than the reserve.
"""

from __future__ import annotations

import os
import threading
import warnings

from mrecord.errors import DescriptorLimitWarning

__all__ = ["give_back_optional", "make_room", "reserve", "take_optional"]

_PER_SHARD = 3
"""Descriptors one shard may hold: its map's, ``pread``'s and ``O_DIRECT``'s."""

_RESERVE_MIN = 64
"""Descriptors always left to the rest of the process, at least."""

_lock = threading.Lock()
_headroom: int | None = None  # optional descriptors that may still be opened (refreshed)
_warned = False


def _after_fork_in_child() -> None:
    global _lock, _headroom
    _lock = threading.Lock()  # a fork may happen while another thread holds it
    _headroom = None  # the child's own descriptors: counted again when it opens one


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _limits() -> tuple[int, int] | None:
    """(soft, hard) limits on open descriptors, None where the platform has none."""
    try:
        import resource
    except ImportError:  # not Unix: no limit to manage
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinity = resource.RLIM_INFINITY
    return (
        soft if soft != infinity else 1 << 30,
        hard if hard != infinity else 1 << 30,
    )


def _open_count() -> int | None:
    """Descriptors this process has open now (Linux, ``/proc/self/fd``), else None."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
    except OSError:
        return None


def reserve(soft: int) -> int:
    """Descriptors left to the rest of a process whose soft limit is ``soft``: a quarter
    of it, at least ``_RESERVE_MIN``."""
    return max(_RESERVE_MIN, soft // 4)


def make_room(shards: int) -> None:
    """Before opening ``shards`` shard files: raise the soft limit on open descriptors (up
    to the hard limit) so that their maps, ``pread`` and direct descriptors still leave
    :func:`reserve`; warn once where the hard limit is too low for that."""
    global _warned, _headroom
    limits = _limits()
    now = _open_count()
    if limits is None or now is None:
        return
    soft, hard = limits
    wanted = now + _PER_SHARD * shards
    if wanted + reserve(soft) <= soft:
        return
    target = max(wanted + _RESERVE_MIN, -(-4 * wanted // 3))  # wanted + reserve(target)
    if soft < hard:
        import resource

        new_soft = min(hard, target)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
        except (ValueError, OSError):
            new_soft = soft
        with _lock:
            _headroom = None  # worked out again under the new limit
        soft = new_soft
    if wanted + reserve(soft) > soft and not _warned:
        _warned = True
        warnings.warn(
            f"this process may open {soft} file descriptors and has {now} open; a dataset "
            f"of {shards} shards holds one a shard, and up to {_PER_SHARD} when it reads "
            f"cold data: raise the limit (`ulimit -n {target}`) or write the dataset in "
            "fewer shards. Until then the shards past the limit read through their memory "
            "maps (slower from a cold cache), and the rest of the process keeps "
            f"{reserve(soft)} descriptors",
            DescriptorLimitWarning,
            stacklevel=3,
        )


def take_optional() -> bool:
    """Whether a descriptor a shard opens only to read faster may be opened now (counted
    taken when True: give it back with :func:`give_back_optional` when it is closed)."""
    global _headroom
    with _lock:
        if _headroom is None or _headroom <= 0:
            _headroom = _room_now()
        if _headroom <= 0:
            return False
        _headroom -= 1
        return True


def give_back_optional() -> None:
    """A descriptor :func:`take_optional` allowed was closed."""
    global _headroom
    with _lock:
        if _headroom is not None:
            _headroom += 1


def _room_now() -> int:
    """Descriptors that may be opened before the process is left less than the reserve."""
    limits = _limits()
    now = _open_count()
    if limits is None or now is None:
        return 1 << 20
    soft = limits[0]
    return soft - reserve(soft) - now
