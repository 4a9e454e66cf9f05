"""Turning row values into JSON: in full (``cat``) or summarized for people (``head``).

Full form: numbers as JSON numbers (NaN and infinities as ``null``), arrays as
nested lists, strings as strings, bytes as ``{"base64": "..."}``.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

__all__ = ["row_to_json", "value_to_json"]

_PREVIEW = 8


def _number(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else None


def _finite(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj if math.isfinite(obj) else None


def value_to_json(value: Any, *, full: bool = True) -> Any:
    """A JSON-able form of one value (see the module docstring)."""
    if isinstance(value, str):
        return value if full or len(value) <= 80 else value[:77] + "..."
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if full:
            return {"base64": base64.b64encode(data).decode("ascii")}
        return (
            f"<{len(data)} bytes: {data[:_PREVIEW].hex()}{'...' if len(data) > _PREVIEW else ''}>"
        )
    if isinstance(value, np.ndarray) and value.ndim > 0:
        if full:
            return _finite(value.tolist()) if value.dtype.kind == "f" else value.tolist()
        flat = value.reshape(-1)[:_PREVIEW].tolist()
        more = ", ..." if value.size > _PREVIEW else ""
        body = ", ".join(str(v) for v in flat)
        return f"<{value.dtype.name}{list(value.shape)}: [{body}{more}]>"
    if isinstance(value, (np.generic, int, float, bool)):
        return _number(value)
    return str(value)


def row_to_json(row: dict[str, Any], *, full: bool = True) -> str:
    """One row as a compact JSON object line."""
    return json.dumps(
        {k: value_to_json(v, full=full) for k, v in row.items()},
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":") if full else (", ", ": "),
    )
