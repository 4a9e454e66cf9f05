"""Process-wide settings, MindSpore style: ``mrecord.config.set_seed(1)``.

Each setting has a setter that validates its argument and a getter. Values are
read when an iterator is created, so changing them affects later iterators only.
"""

from __future__ import annotations

import threading

__all__ = [
    "get_auto_offload",
    "get_num_parallel_workers",
    "get_op_timeout",
    "get_prefetch_size",
    "get_seed",
    "reset",
    "set_auto_offload",
    "set_num_parallel_workers",
    "set_op_timeout",
    "set_prefetch_size",
    "set_seed",
]

_DEFAULT_SEED = 5489  # MindSpore's default seed (the mt19937 default).

_lock = threading.Lock()
_settings: dict[str, object] = {}


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
    _restart_eager_randomness()


def _restart_eager_randomness() -> None:
    """Seedless eager calls of random ops restart their sequence from the new seed."""
    import sys

    seeding = sys.modules.get("mrecord.transforms.seeding")
    if seeding is not None:  # not imported yet: it will read the seed when it is
        seeding.reset_eager_seeds()


reset()


def _check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f", {maximum}"
        raise ValueError(f"{name} must be in [{minimum}{upper}], got {value!r}")
    return value


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
        _settings["seed"] = _check_int("seed", seed, 0, 2**32 - 1)
    _restart_eager_randomness()


def get_seed() -> int:
    """Return the current seed (default 5489, as MindSpore)."""
    return _int("seed")


def set_prefetch_size(size: int) -> None:
    """Set how many items each pipeline queue may hold (bounds memory)."""
    with _lock:
        _settings["prefetch_size"] = _check_int("prefetch_size", size, 1)


def get_prefetch_size() -> int:
    """Return the queue size used between pipeline stages (default 16)."""
    return _int("prefetch_size")


def set_num_parallel_workers(num: int) -> None:
    """Set the default number of workers for ops that do not give their own."""
    with _lock:
        _settings["num_parallel_workers"] = _check_int("num_parallel_workers", num, 1, 1024)


def get_num_parallel_workers() -> int:
    """Return the default number of parallel workers (default 2)."""
    return _int("num_parallel_workers")


def set_auto_offload(offload: bool) -> None:
    """Offload the tail transforms of every map (a map's own ``offload=`` wins)."""
    if not isinstance(offload, bool):
        raise TypeError(f"offload must be a bool, got {offload!r}")
    with _lock:
        _settings["auto_offload"] = offload


def get_auto_offload() -> bool:
    """Return whether automatic offload is on (default False)."""
    return bool(_settings["auto_offload"])


def set_op_timeout(seconds: float) -> None:
    """Set how long the sink's ``get_next`` waits for a batch (default 1900 s)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"op_timeout must be a number of seconds, got {seconds!r}")
    if not seconds > 0:
        raise ValueError(f"op_timeout must be > 0, got {seconds!r}")
    with _lock:
        _settings["op_timeout"] = float(seconds)


def get_op_timeout() -> float:
    """Return the sink's ``get_next`` timeout in seconds."""
    return float(_settings["op_timeout"])  # type: ignore[arg-type]
