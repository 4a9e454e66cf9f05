"""mrecord's cache folder on this host: where the remote cache keeps downloaded shards
(``mrecord.remote.cache``) and the device measurements are kept
(``mrecord.storage.device_profiles``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$MRECORD_CACHE_DIR``, else ``$XDG_CACHE_HOME/mrecord``, else ``~/.cache/mrecord``
    (read each call: a process may point it elsewhere before its first use)."""
    chosen = os.environ.get("MRECORD_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mrecord"
