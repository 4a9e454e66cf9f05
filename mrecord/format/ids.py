"""Sorted distinct values of an integer array (row ids, page numbers, shard numbers).

``numpy.unique`` does the same, but in numpy 2.4 its first call imports ``numpy.ma`` (to
ask whether the array is masked): 40 ms of CPU with the GIL held, more with a cold
page cache, inside the first block a reader reads. :func:`sorted_unique` is a sort and
one comparison, and faster than ``numpy.unique`` on the small arrays of a block."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def sorted_unique(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values of the 1-d integer array ``values``, ascending (what
    ``numpy.unique(values)`` returns, without importing ``numpy.ma``)."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
