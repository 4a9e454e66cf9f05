"""Fusing a run of batchable ops into one vectorized pass, with the same result.

The pipeline runs batchable ops one after the other over a stacked chunk or batch; each op
reads and writes the whole array. Some runs can be done in one pass (e.g. flip + Normalize +
HWC2CHW writes the final CHW float array straight from the uint8 input). A *fuser* looks at
``ops[start:]`` and, when it recognises a run ``ops[start:end]``, returns ``(end, kernel)``:

    kernel(batch, seeds) -> array | None

``seeds[i]`` are the per-row seeds of ``ops[start + i]`` (what ``apply_batch`` would get).
The kernel returns exactly what applying the ops one by one returns, or None when it does not
handle this batch (dtype, shape): the caller then applies the ops one by one, which also
raises their usual errors. Fusers register with :func:`register_fuser` (``mrecord.vision``
registers its own when imported).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["BatchKernel", "Fuser", "fused_run", "register_fuser"]

BatchKernel = Callable[[np.ndarray, Sequence[np.ndarray]], np.ndarray | None]
"""``kernel(batch, seeds_per_op) -> result or None`` (see the module docstring)."""

Fuser = Callable[[Sequence[Any], int], tuple[int, BatchKernel] | None]
"""``fuser(ops, start) -> (end, kernel) or None``."""

_FUSERS: list[Fuser] = []


def register_fuser(fuser: Fuser) -> Fuser:
    """Add ``fuser`` to the fusers :func:`fused_run` asks (once; returns it, for decorating)."""
    if fuser not in _FUSERS:
        _FUSERS.append(fuser)
    return fuser


def fused_run(ops: Sequence[Any], start: int) -> tuple[int, BatchKernel] | None:
    """The first registered fusion of a run starting at ``ops[start]`` (``end > start + 1``)."""
    for fuser in _FUSERS:
        found = fuser(ops, start)
        if found is not None and found[0] > start + 1:
            return found
    return None
