"""``Dataset.save``: a pipeline's rows written as a dataset, as MindSpore's ``save`` does.

The rows of one epoch go through :class:`mrecord.FileWriter` (shards, ``.db``, the atomic
commit): nothing is visible until every row is written, and a failure leaves nothing.
The schema comes from the first rows, with MindSpore's conversions
(``mindspore.dataset.Dataset.save``):

==========================================  ==========================
value in the pipeline                       stored as
==========================================  ==========================
bool, int8, int16, int32, uint8, uint16     ``int32``
int64, uint32                               ``int64``
float16, float32                            ``float32``
float64                                     ``float64``
uint64                                      refused (SchemaError)
str                                         ``string``
a uint8 array (any dimensions)              ``bytes`` (its raw bytes)
another array                               its converted dtype; its shape, ``-1`` where
                                            rows differ
==========================================  ==========================

The shape of an array column is read from the first :data:`SCHEMA_ROWS` rows (or 64 MiB of
them, :data:`SCHEMA_BYTES`); a later row
whose shape differs where those agreed fails the save (``RowValidationError`` naming the
row and column), and nothing is written.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.errors import ArgumentError, SchemaError, WrongTypeError
from mrecord.writer.file_writer import FileWriter

if TYPE_CHECKING:
    from mrecord.pipeline.dataset import Dataset

__all__ = ["MAX_FILES", "SCHEMA_BYTES", "SCHEMA_ROWS", "WRITE_BYTES", "save_dataset"]

MAX_FILES = 1000
"""MindSpore's largest ``num_files``."""
SCHEMA_ROWS = 1024
"""Rows read before the schema is fixed (their shapes decide which dimensions are ``-1``),
or fewer where they reach :data:`SCHEMA_BYTES`."""
SCHEMA_BYTES = 64 << 20
"""Bytes of values read before the schema is fixed, at most (at least one row)."""
_WRITE_ROWS = 1024
WRITE_BYTES = 16 << 20
"""Bytes of values handed to the writer in one call, at most (at least one row): each
call's rows are held twice over, as the pipeline's arrays and converted."""

_CAST = {
    "b": "int32",
    "i1": "int32",
    "i2": "int32",
    "i4": "int32",
    "u1": "int32",
    "u2": "int32",
    "i8": "int64",
    "u4": "int64",
    "f2": "float32",
    "f4": "float32",
    "f8": "float64",
}


def save_dataset(
    ds: Dataset, file_name: Any, num_files: Any = 1, file_type: Any = "mindrecord"
) -> None:
    """Write one epoch of ``ds`` as the dataset ``file_name`` in ``num_files`` shards."""
    _check_arguments(file_name, num_files, file_type)
    # (a generator: once the epoch ends it stays ended, where the iterator would complain)
    rows = (row for row in ds.create_dict_iterator(num_epochs=1, output_numpy=True))
    first = collections.deque(_take(rows, SCHEMA_ROWS, SCHEMA_BYTES))
    schema = _schema(list(first), ds.get_col_names())
    with FileWriter(file_name, shard_num=num_files) as writer:
        writer.add_schema(schema, "saved by mrecord Dataset.save")
        # the first rows let go of as they are written, not held to the end
        replayed = itertools.chain(_drained(first), rows)
        while chunk := _take(replayed, _WRITE_ROWS, WRITE_BYTES):
            writer.write_raw_data([_converted(row, schema) for row in chunk])
            del chunk


def _check_arguments(file_name: Any, num_files: Any, file_type: Any) -> None:
    if not isinstance(file_name, str):
        raise WrongTypeError(
            f"Argument file_name with value {file_name!r} is not of type [<class 'str'>]"
        )
    if not file_name:
        raise ArgumentError("file_name must be a non-empty path, got ''")
    if isinstance(num_files, bool) or not isinstance(num_files, int):
        raise WrongTypeError(
            f"Argument num_files with value {num_files!r} is not of type [<class 'int'>]"
        )
    if not 1 <= num_files <= MAX_FILES:
        raise ArgumentError(f"num_files should be between 1 and {MAX_FILES}, got {num_files!r}")
    if file_type != "mindrecord":
        raise ArgumentError(
            f"{file_type!r} dataset format is not supported; Dataset.save writes 'mindrecord'"
        )


def _take(rows: Iterator[dict[str, Any]], most: int, most_bytes: int) -> list[dict[str, Any]]:
    """The next rows, up to ``most`` of them or until they hold ``most_bytes``."""
    taken: list[dict[str, Any]] = []
    held = 0
    while len(taken) < most and held < most_bytes:
        row = next(rows, None)
        if row is None:
            break
        taken.append(row)
        held += sum(np.asarray(v).nbytes for v in row.values())
    return taken


def _drained(rows: collections.deque[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    while rows:
        yield rows.popleft()


def _schema(first: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    if not first:
        raise ArgumentError("the dataset has no rows to save")
    schema: dict[str, dict[str, Any]] = {}
    for name in names:
        values = [np.asarray(row[name]) for row in first]
        value = values[0]
        kind = value.dtype.kind
        if kind in "US":
            schema[name] = {"type": "string" if kind == "U" else "bytes"}
            continue
        if value.dtype == np.uint8 and value.ndim >= 1:
            schema[name] = {"type": "bytes"}
            continue
        code = value.dtype.str[1:] if kind != "b" else "b"
        if code not in _CAST:
            raise SchemaError(
                f"column {name!r} has type {value.dtype} ({value.dtype.name}), which MindRecord "
                "cannot store (it has no uint64, complex or object columns); cast it in a "
                "map first (e.g. to int64)"
            )
        spec: dict[str, Any] = {"type": _CAST[code]}
        if value.ndim:
            shapes = {v.shape for v in values}
            if len({len(s) for s in shapes}) > 1:
                raise SchemaError(
                    f"column {name!r} has arrays of {sorted({len(s) for s in shapes})} dimensions "
                    "in its first rows; a column keeps one number of dimensions"
                )
            spec["shape"] = [
                d if all(s[i] == d for s in shapes) else -1 for i, d in enumerate(value.shape)
            ]
        schema[name] = spec
    return schema


def _converted(row: dict[str, Any], schema: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        value = np.asarray(row[name])
        kind = spec["type"]
        if kind == "string":
            out[name] = str(value)
        elif kind == "bytes":
            out[name] = value.tobytes() if value.dtype.kind != "S" else bytes(value)
        elif "shape" in spec:
            out[name] = value.astype(kind, copy=False)
        else:
            out[name] = value.astype(kind).item() if value.ndim == 0 else value.astype(kind)
    return out
