"""Plain models of what a dataset should hold, and comparisons with what a reader returns.

:func:`expected_order` re-states ``FileWriter``'s documented row distribution as a
plain loop (each call of ``n`` rows is cut into ``shard_num`` contiguous runs in
shard order, sizes differing by at most one; the larger runs go to the shards
after the last one that got an extra row; global ids number shard 0's rows first).
It is written independently of the writer so tests can check the writer by it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.format.schema import NUMERIC_TYPES

__all__ = [
    "assert_rows_equal",
    "assert_value_equal",
    "expected_order",
    "rows_to_columns",
    "shard_sizes",
    "write_dataset",
]


def _split(n: int, shard_num: int, cursor: int) -> tuple[list[int], int]:
    base, extra = divmod(n, shard_num)
    sizes = [base] * shard_num
    for j in range(extra):
        sizes[(cursor + j) % shard_num] += 1
    return sizes, (cursor + extra) % shard_num


def expected_order(call_sizes: Sequence[int], shard_num: int) -> list[int]:
    """Positions (in write order, over all calls) of the rows with global ids 0, 1, ...."""
    per_shard: list[list[int]] = [[] for _ in range(shard_num)]
    cursor = 0
    position = 0
    for n in call_sizes:
        sizes, cursor = _split(n, shard_num, cursor)
        for shard, size in enumerate(sizes):
            per_shard[shard].extend(range(position, position + size))
            position += size
    return [p for rows in per_shard for p in rows]


def shard_sizes(call_sizes: Sequence[int], shard_num: int) -> list[int]:
    """Rows per shard file after writing calls of ``call_sizes`` rows."""
    totals = [0] * shard_num
    cursor = 0
    for n in call_sizes:
        sizes, cursor = _split(n, shard_num, cursor)
        totals = [t + s for t, s in zip(totals, sizes, strict=True)]
    return totals


def assert_value_equal(ftype: str, got: Any, want: Any, where: str) -> None:
    """Check one read value against the written one, bit for bit (NaN payloads included)."""
    if ftype == "bytes":
        if type(got) is not bytes or got != bytes(want):
            raise AssertionError(f"{where}: got {got[:40]!r}, wrote {bytes(want)[:40]!r}")
        return
    if ftype == "string":
        if type(got) is not str or got != want:
            raise AssertionError(f"{where}: got {got!r}, wrote {want!r}")
        return
    dtype = NUMERIC_TYPES[ftype]
    expected = np.asarray(want, dtype=dtype)
    if not isinstance(got, (np.ndarray, np.generic)):
        raise AssertionError(f"{where}: got {type(got).__name__}, expected a numpy value")
    if got.dtype != dtype or got.shape != expected.shape:
        raise AssertionError(
            f"{where}: got dtype {got.dtype} shape {got.shape}, expected {dtype} {expected.shape}"
        )
    if np.asarray(got).tobytes() != expected.tobytes():
        raise AssertionError(f"{where}: got {got!r}, wrote {expected!r}")


def assert_rows_equal(
    schema: Mapping[str, Mapping[str, Any]],
    got: Sequence[Mapping[str, Any]],
    want: Sequence[Mapping[str, Any]],
) -> None:
    """Check every read row against the written row in the same position."""
    if len(got) != len(want):
        raise AssertionError(f"read {len(got)} rows, expected {len(want)}")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if set(g) != set(schema):
            raise AssertionError(f"row {i} has columns {sorted(g)}, expected {sorted(schema)}")
        for name, spec in schema.items():
            assert_value_equal(spec["type"], g[name], w[name], f"row {i}, field {name!r}")


def rows_to_columns(
    schema: Mapping[str, Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The columnar form of ``rows``: fixed-shape numeric fields as one stacked array."""
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        values = [row[name] for row in rows]
        shape = spec.get("shape")
        fixed = spec["type"] in NUMERIC_TYPES and (shape is None or -1 not in shape)
        if fixed:
            dtype = NUMERIC_TYPES[spec["type"]]
            row_shape = () if shape is None else tuple(shape)
            out[name] = np.array(values, dtype=dtype).reshape((len(values), *row_shape))
        else:
            out[name] = values
    return out


def write_dataset(
    path: str | os.PathLike[str],
    schema: Mapping[str, Any],
    calls: Sequence[Sequence[Mapping[str, Any]]],
    shard_num: int = 1,
    page_size: int | None = None,
    index_fields: Sequence[str] = (),
    columnar: bool = False,
) -> list[Path]:
    """Write and commit a dataset (one ``write_raw_data`` per call); returns its shard files."""
    from mrecord.writer.file_writer import FileWriter

    writer = FileWriter(path, shard_num=shard_num)
    writer.add_schema(dict(schema))
    if index_fields:
        writer.add_index(list(index_fields))
    if page_size is not None:
        writer.set_page_size(page_size)
    for rows in calls:
        writer.write_raw_data(rows_to_columns(schema, rows) if columnar else list(rows))
    writer.commit()
    return writer.files
