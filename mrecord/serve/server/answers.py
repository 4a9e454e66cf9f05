"""What both block transports of the server share: checking a block request, bounding
its answer, and classifying errors into the protocol's codes.

``POST /api/datasets/{name}/blocks`` (HTTP, :mod:`~mrecord.serve.server.app`) and the
same-host socket (:mod:`~mrecord.serve.server.local`) answer the same requests with the
same rules (:class:`~mrecord.serve.protocol.limits.Limits`) and the same error codes
(:mod:`~mrecord.serve.protocol.errors`); this module imports no web framework.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from mrecord.block import BytesArray, ColumnValues
from mrecord.errors import CorruptFileError, DecodeError, MrecordError, SchemaError
from mrecord.format.schema import FieldKind
from mrecord.serve.protocol.errors import ERROR_CODES
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.wire import BytesRefs
from mrecord.serve.server.registry import ServedDataset

__all__ = [
    "ApiError",
    "BlockPlan",
    "check_answer_bytes",
    "classify",
    "plan_block",
    "row_bytes",
]

_log = logging.getLogger("mrecord.serve")



class ApiError(Exception):
    """An error answer: HTTP status from :data:`ERROR_CODES`, a stable code, a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = ERROR_CODES[code]
        self.message = message


def classify(exc: BaseException, datasets: Iterable[ServedDataset]) -> tuple[str, str]:
    """(code, message) for an exception raised while answering."""
    if isinstance(exc, ApiError):
        return exc.code, exc.message
    text = str(exc)
    for ds in datasets:  # name files, not the server's folders
        for path in ds.reader.files:
            text = text.replace(str(path.parent) + "/", "")
    if isinstance(exc, CorruptFileError):
        return "corrupt_file", text
    if isinstance(exc, DecodeError):
        return "not_an_image", text
    if isinstance(exc, SchemaError):
        return "unknown_column", text
    if isinstance(exc, (ValueError, TypeError)) and isinstance(exc, MrecordError):
        return "bad_request", text
    if isinstance(exc, MrecordError):
        return "dataset_error", text
    _log.error("internal error answering a request", exc_info=exc)
    return "internal", f"internal error ({type(exc).__name__}); the server log has the details"


@dataclass(frozen=True)
class BlockPlan:
    """A checked block request: the columns to read and how each goes on the wire."""

    columns: list[str]
    kinds: dict[str, tuple[str, str, list[int]]]
    """column -> (kind, dtype string, row shape), as
    :func:`~mrecord.serve.protocol.wire.encode_block` takes them."""
    fixed_bytes: int
    """The exact bytes of the fixed-shape columns of the answer (known before reading)."""


def plan_block(
    ds: ServedDataset, ids: np.ndarray, columns: list[str] | None, limits: Limits
) -> BlockPlan:
    """Check a block request against ``ds`` and ``limits``; ApiError saying what is wrong.

    The fixed-shape columns' bytes are exact before anything is read, and refused here
    when over ``limits.max_block_bytes``; the other columns' bytes are known once read:
    :func:`check_answer_bytes` refuses the answer before it is encoded.
    """
    names = ds.reader.column_names if columns is None else columns
    unknown = [c for c in names if c not in ds.reader.schema]
    if unknown:
        raise ApiError("unknown_column", f"{ds.name!r} has no column(s) {unknown!r}")
    n = ds.reader.num_rows
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise ApiError("bad_ids", f"row id {bad} is out of range: {ds.name!r} has {n} rows")
    kinds = {c: _wire_kind(ds, c) for c in names}
    fixed = len(ids) * sum(
        int(np.prod(shape)) * np.dtype(dtype).itemsize
        for kind, dtype, shape in kinds.values()
        if kind == "fixed"
    )
    _check_size(fixed, len(ids), names, limits)
    return BlockPlan(list(names), kinds, fixed)


def check_answer_bytes(
    values: Mapping[str, ColumnValues | BytesRefs], rows: int, limits: Limits
) -> int:
    """The real bytes of a block's values (what the answer carries, or what a same-host
    reader views in place); ApiError ``too_large`` over ``limits.max_block_bytes``."""
    total = sum(_column_bytes(v) for v in values.values())
    _check_size(total, rows, list(values), limits)
    return total


def _check_size(nbytes: int, rows: int, names: list[str], limits: Limits) -> None:
    if nbytes > limits.max_block_bytes:
        raise ApiError(
            "too_large",
            f"{rows} rows of {names!r} are {nbytes:,} bytes, more than "
            f"{limits.max_block_bytes:,} per request; ask for fewer ids",
        )


def _column_bytes(values: ColumnValues | BytesRefs) -> int:
    """Bytes of one column's values: arrays by their size, bytes and strings by their
    length (strings as UTF-8), plus the offsets (8 bytes a row) the wire adds."""
    if isinstance(values, BytesRefs):
        return int(values.lengths.sum()) + 24 * len(values.lengths)
    if isinstance(values, np.ndarray):
        return int(values.nbytes)
    total = 8 * (len(values) + 1)
    if not len(values):
        return total
    first = values[0]
    if isinstance(first, str):
        return total + int(sum(len(v.encode("utf-8")) for v in values))
    if isinstance(first, np.ndarray) and not isinstance(first, BytesArray):
        return total + int(sum(int(v.nbytes) + 8 * v.ndim for v in values))
    return total + int(sum(map(len, values)))  # bytes (or uint8 views of them): one C loop


def row_bytes(ds: ServedDataset, column: str) -> float:
    """Average stored bytes per row of ``column`` (from metadata; no data is read)."""
    col = ds.reader.schema.names.index(column)
    total = sum(shard.meta.raw_bytes(col) for shard in ds.reader.shards)
    return total / max(1, ds.reader.num_rows)


def _wire_kind(ds: ServedDataset, column: str) -> tuple[str, str, list[int]]:
    fld = ds.reader.schema[column]
    if fld.kind in (FieldKind.BYTES, FieldKind.STRING):
        dtype = "|u1"
    else:
        dtype = fld.dtype.newbyteorder("<").str
    return fld.kind.value, dtype, list(fld.shape or ())
