"""Row values as JSON for the HTTP API (``/rows``, ``/search``): what ``mrecord cat`` writes,
with arrays described.

- numbers: JSON numbers (NaN and infinities as ``null``); booleans as booleans;
- strings: strings;
- bytes: ``{"base64": "..."}`` (``view=summary``: ``{"bytes": length}``);
- arrays: ``{"dtype": "float32", "shape": [16], "data": [...]}`` with ``data`` nested
  lists (``view=summary``: the first few values in ``"head"``, no ``"data"``).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from mrecord.block import Block

__all__ = ["SUMMARY_HEAD", "block_to_json", "iter_json_rows", "value_json"]

SUMMARY_HEAD = 8
"""Values shown of an array in the summary view."""


def _plain(arr: np.ndarray) -> Any:
    """Nested lists of Python numbers; non-finite floats become None."""
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        finite = np.isfinite(arr)
        objects = arr.astype(object)
        objects[~finite] = None
        return objects.tolist()
    return arr.tolist()


def value_json(value: Any, *, summary: bool = False) -> Any:
    """One value as JSON (see the module docstring)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if summary:
            return {"bytes": len(data)}
        return {"base64": base64.b64encode(data).decode("ascii")}
    if isinstance(value, np.ndarray) and value.ndim > 0:
        out: dict[str, Any] = {"dtype": value.dtype.name, "shape": list(value.shape)}
        if summary:
            out["head"] = _plain(value.reshape(-1)[:SUMMARY_HEAD])
        else:
            out["data"] = _plain(value)
        return out
    if isinstance(value, str):
        return value
    scalar = value.item() if isinstance(value, np.generic) else value
    if isinstance(scalar, float) and not math.isfinite(scalar):
        return None
    return scalar


def block_to_json(block: Block, *, summary: bool = False) -> list[dict[str, Any]]:
    """Every row of ``block`` as ``{"id": global id, "values": {column: value}}``."""
    return list(iter_json_rows(block, summary=summary))


def iter_json_rows(block: Block, *, summary: bool = False) -> Iterator[dict[str, Any]]:
    """:func:`block_to_json`'s rows one at a time (a caller that stops early converts no
    more values than it keeps)."""
    ids = block.row_ids.tolist()
    for row_id, row in zip(ids, block.iter_rows(), strict=True):
        yield {"id": row_id, "values": {k: value_json(v, summary=summary) for k, v in row.items()}}
