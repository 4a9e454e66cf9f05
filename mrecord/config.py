"""Process-wide settings, MindSpore style: ``mrecord.config.set_seed(1)``.

Each setting has a setter that validates its argument and a getter. Values are
read when an iterator is created, so changing them affects later iterators only; the
default worker count is read when a source or op is constructed
(:func:`workers_or_default`). Layers above that keep state derived from the settings
register with :func:`on_reset`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mrecord.arguments import MAX_WORKERS, check_int
from mrecord.errors import ArgumentError, WrongTypeError

__all__ = [
    "get_auto_offload",
    "get_num_parallel_workers",
    "get_op_timeout",
    "get_prefetch_size",
    "get_seed",
    "on_reset",
    "reset",
    "set_auto_offload",
    "set_num_parallel_workers",
    "set_op_timeout",
    "set_prefetch_size",
    "set_seed",
    "workers_or_default",
]

_DEFAULT_SEED = 5489  # MindSpore's default seed (the mt19937 default).

_lock = threading.Lock()
_settings: dict[str, object] = {}
# Called after reset() and set_seed(): modules above config that keep state derived from
# the settings register here (config imports nothing above it, so it cannot call them).
_reset_listeners: list[Callable[[], None]] = []


def on_reset(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` after every :func:`reset` and :func:`set_seed` (in registration
    order; registering the same callback twice keeps one). Returns ``callback``, so it can
    decorate a function.

    For state derived from the settings in a layer above ``config``:
    ``transforms.seeding`` restarts its seedless eager sequence this way.
    """
    with _lock:
        if callback not in _reset_listeners:
            _reset_listeners.append(callback)
    return callback


def reset() -> None:
    """Restore every setting to its default."""
    with _lock:
        _settings.clear()
        _settings.update(
            seed=_DEFAULT_SEED,
            prefetch_size=16,
            num_parallel_workers=2,
            auto_offload=False,
            op_timeout=1900.0,
        )
    _notify_reset()


def _notify_reset() -> None:
    """Tell the :func:`on_reset` listeners (outside the lock: they may read settings)."""
    with _lock:
        listeners = list(_reset_listeners)
    for callback in listeners:
        callback()


reset()


def _int(name: str) -> int:
    value = _settings[name]
    assert isinstance(value, int)  # set only through the validating setters
    return value


def set_seed(seed: int) -> None:
    """Set the seed every shuffle, sampler and random transform derives from.

    All ranks of a distributed job that set the same seed compute the same
    global permutation, so their shards are disjoint.
    """
    with _lock:
        _settings["seed"] = check_int(seed, "seed", 0, 2**32 - 1)
    _notify_reset()


def get_seed() -> int:
    """Return the current seed (default 5489, as MindSpore)."""
    return _int("seed")


def set_prefetch_size(size: int) -> None:
    """Set how many items each pipeline queue may hold (bounds memory)."""
    with _lock:
        _settings["prefetch_size"] = check_int(size, "prefetch_size", 1, None)


def get_prefetch_size() -> int:
    """Return the queue size used between pipeline stages (default 16)."""
    return _int("prefetch_size")


def set_num_parallel_workers(num: int) -> None:
    """Set the default number of workers for ops that do not give their own."""
    with _lock:
        _settings["num_parallel_workers"] = check_int(num, "num_parallel_workers", 1, MAX_WORKERS)


def get_num_parallel_workers() -> int:
    """Return the default number of parallel workers (default 2)."""
    return _int("num_parallel_workers")


def workers_or_default(num: int | None) -> int:
    """``num``, or the default worker count when it is None.

    Every source and op reads the default here, when it is constructed: a dataset's
    definition is complete once built (``MindDataset`` sizes its read blocks from its
    worker count), and a later ``set_num_parallel_workers`` applies to datasets built
    after it, not to those already built. ``num`` is checked by
    :func:`mrecord.arguments.check_workers` first.
    """
    return get_num_parallel_workers() if num is None else num


def set_auto_offload(offload: bool) -> None:
    """Offload the tail transforms of every map (a map's own ``offload=`` wins)."""
    if not isinstance(offload, bool):
        raise WrongTypeError(f"offload must be a bool, got {offload!r}")
    with _lock:
        _settings["auto_offload"] = offload


def get_auto_offload() -> bool:
    """Return whether automatic offload is on (default False)."""
    return bool(_settings["auto_offload"])


def set_op_timeout(seconds: float) -> None:
    """Set how long the sink's ``get_next`` waits for a batch (default 1900 s)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise WrongTypeError(f"op_timeout must be a number of seconds, got {seconds!r}")
    if not seconds > 0:
        raise ArgumentError(f"op_timeout must be > 0, got {seconds!r}")
    with _lock:
        _settings["op_timeout"] = float(seconds)


def get_op_timeout() -> float:
    """Return the sink's ``get_next`` timeout in seconds."""
    return float(_settings["op_timeout"])  # type: ignore[arg-type]
