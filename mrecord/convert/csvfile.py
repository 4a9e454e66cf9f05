"""CSV files as a conversion source: one row per record, one field per column.

The first line names the columns. Column types are either given (a schema
dict, JSON text, or a JSON file) or inferred from the whole file:

- ``int64`` if every non-empty value parses as an integer (Python's ``int()``);
- ``float64`` if every non-empty value parses as a number (``float()``; ``nan``
  and ``inf`` included), or the column is integers with some empty cells
  (empty cells become NaN);
- ``string`` otherwise (also for integers too large for int64: no silent rounding).

A value that does not fit its column's type raises :class:`ConversionError`
naming the file, line and column. Empty cells are NaN in float columns and an
error in integer columns.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.block import ColumnValues
from mrecord.convert.base import (
    DEFAULT_BATCH_ROWS,
    Batch,
    Source,
    check_batch_rows,
    check_field_name,
)
from mrecord.errors import ConversionError

__all__ = ["CSV_TYPES", "CsvSource", "infer_csv_schema", "load_schema"]

_INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16")
_FLOAT_TYPES = ("float16", "float32", "float64")
CSV_TYPES = (*_INT_TYPES, *_FLOAT_TYPES, "bool", "string", "bytes")
"""Types a CSV column may be given in a schema."""

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def load_schema(schema: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Return a schema dict from a dict, JSON text, or the path of a JSON file."""
    if isinstance(schema, Mapping):
        raw: object = dict(schema)
    else:
        text = str(schema)
        where = "schema"
        if not text.lstrip().startswith("{"):
            path = Path(text)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConversionError(f"cannot read schema file {str(path)!r}: {exc}") from exc
            where = f"schema file {str(path)!r}"
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConversionError(f"{where} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise ConversionError(f"a CSV schema must be a non-empty JSON object, got {raw!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in raw.items():
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict) or spec.get("type") not in CSV_TYPES:
            raise ConversionError(
                f"schema field {name!r}: type must be one of {list(CSV_TYPES)}, got {spec!r}"
            )
        if "shape" in spec:
            raise ConversionError(f"schema field {name!r}: CSV columns are scalars, no 'shape'")
        out[str(name)] = {"type": spec["type"]}
    return out


def _open(path: Path, encoding: str) -> Any:
    try:
        return open(path, newline="", encoding=encoding)
    except OSError as exc:
        raise ConversionError(f"cannot open CSV file {str(path)!r}: {exc}") from exc


def _read_header(reader: Any, path: Path) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise ConversionError(f"CSV file {str(path)!r} is empty (no header line)") from None
    for name in header:
        check_field_name(name, what=f"{str(path)!r} column")
    dupes = sorted({n for n in header if header.count(n) > 1})
    if dupes:
        raise ConversionError(f"{str(path)!r}: column names repeat: {dupes}")
    return list(header)


def _iter_chunks(
    path: Path, *, delimiter: str, encoding: str, batch_rows: int
) -> Iterator[tuple[list[str], list[list[str]], list[int]]]:
    """Yield ``(header, rows, line numbers)`` chunks, checking every row's width."""
    with _open(path, encoding) as fh:
        reader = csv.reader(fh, delimiter=delimiter, strict=True)
        try:
            header = _read_header(reader, path)
            rows: list[list[str]] = []
            lines: list[int] = []
            for row in reader:
                if not row:
                    continue  # blank line
                if len(row) != len(header):
                    raise ConversionError(
                        f"{str(path)!r} line {reader.line_num}: {len(row)} values, the header "
                        f"has {len(header)} columns"
                    )
                rows.append(row)
                lines.append(reader.line_num)
                if len(rows) == batch_rows:
                    yield header, rows, lines
                    rows, lines = [], []
            if rows:
                yield header, rows, lines
        except csv.Error as exc:
            raise ConversionError(f"{str(path)!r} line {reader.line_num}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConversionError(
                f"{str(path)!r} near line {reader.line_num + 1} is not {encoding} text ({exc})"
            ) from exc


def _kind_of(values: list[str]) -> tuple[str, bool]:
    """Narrowest of int/float/string fitting ``values``; and whether any is empty."""
    present = [v for v in values if v != ""]
    has_empty = len(present) != len(values)
    if not present:
        return "int", has_empty
    arr = np.asarray(present)
    try:
        arr.astype(np.int64)
        return "int", has_empty
    except OverflowError:
        return "string", has_empty
    except ValueError:
        pass
    try:
        arr.astype(np.float64)
        return "float", has_empty
    except (ValueError, OverflowError):
        return "string", has_empty


_RANK = {"int": 0, "float": 1, "string": 2}


def infer_csv_schema(
    src: str | os.PathLike[str], *, delimiter: str = ",", encoding: str = "utf-8-sig"
) -> tuple[dict[str, dict[str, Any]], int]:
    """Infer ``(schema, row count)`` of a CSV file (see the module docstring)."""
    path = Path(src)
    kinds: dict[str, str] = {}
    empties: dict[str, bool] = {}
    header: list[str] = []
    count = 0
    for header, rows, _ in _iter_chunks(
        path, delimiter=delimiter, encoding=encoding, batch_rows=DEFAULT_BATCH_ROWS
    ):
        count += len(rows)
        for j, name in enumerate(header):
            kind, empty = _kind_of([r[j] for r in rows])
            old = kinds.get(name, "int")
            kinds[name] = kind if _RANK[kind] > _RANK[old] else old
            empties[name] = empties.get(name, False) or empty
    if not header:
        with _open(path, encoding) as fh:
            header = _read_header(csv.reader(fh, delimiter=delimiter), path)
    schema: dict[str, dict[str, Any]] = {}
    for name in header:
        kind = kinds.get(name, "string" if count == 0 else "int")
        if kind == "int" and empties.get(name, False):
            kind = "float"
        schema[name] = {"type": {"int": "int64", "float": "float64", "string": "string"}[kind]}
    return schema, count


def _convert(
    values: list[str], type_name: str, *, path: Path, column: str, lines: list[int]
) -> ColumnValues:
    def fail(i: int, why: str) -> ConversionError:
        return ConversionError(
            f"{str(path)!r} line {lines[i]}, column {column!r}: {values[i]!r} {why}"
        )

    if type_name == "string":
        return values
    if type_name == "bytes":
        return [v.encode("utf-8") for v in values]
    if type_name == "bool":
        out = np.empty(len(values), dtype=np.bool_)
        for i, v in enumerate(values):
            low = v.strip().lower()
            if low not in _TRUE and low not in _FALSE:
                raise fail(i, "is not a bool (true/false, 1/0, yes/no)")
            out[i] = low in _TRUE
        return out
    if type_name in _FLOAT_TYPES:
        arr = np.asarray(["nan" if v == "" else v for v in values])
        try:
            return arr.astype(np.float64).astype(type_name)
        except (ValueError, OverflowError):
            for i, v in enumerate(values):
                try:
                    float(v or "nan")
                except ValueError:
                    raise fail(i, f"is not a number ({type_name} column)") from None
            raise ConversionError(f"{str(path)!r}: column {column!r} is not {type_name}") from None
    # integer types
    for i, v in enumerate(values):
        if v == "":
            raise fail(i, f"is empty; an {type_name} column needs a value (use float64 for NaN)")
    try:
        wide = np.asarray(values).astype(np.int64)
    except (ValueError, OverflowError):
        for i, v in enumerate(values):
            try:
                n = int(v)
            except ValueError:
                raise fail(i, f"is not an integer ({type_name} column)") from None
            if not -(2**63) <= n < 2**63:
                raise fail(i, "does not fit int64") from None
        raise ConversionError(f"{str(path)!r}: column {column!r} is not {type_name}") from None
    info = np.iinfo(np.dtype(type_name))
    bad = np.flatnonzero((wide < info.min) | (wide > info.max))
    if bad.size:
        raise fail(int(bad[0]), f"does not fit {type_name} [{info.min}, {info.max}]")
    return wide.astype(type_name)


class CsvSource(Source):
    """A CSV file → one row per record, columns typed by a given or inferred schema."""

    kind = "csv"

    def __init__(
        self,
        src: str | os.PathLike[str],
        *,
        schema: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        delimiter: str = ",",
        encoding: str = "utf-8-sig",
    ):
        self.path = Path(src)
        if not self.path.is_file():
            raise ConversionError(f"CSV file {str(self.path)!r} does not exist")
        self.delimiter = delimiter
        self.encoding = encoding
        num_rows: int | None = None
        if schema is None:
            resolved, num_rows = infer_csv_schema(self.path, delimiter=delimiter, encoding=encoding)
        else:
            resolved = load_schema(schema)
            with _open(self.path, encoding) as fh:
                header = _read_header(csv.reader(fh, delimiter=delimiter), self.path)
            missing = [n for n in resolved if n not in header]
            extra = [n for n in header if n not in resolved]
            if missing or extra:
                raise ConversionError(
                    f"{str(self.path)!r}: the schema does not match the header (schema fields "
                    f"not in the file: {missing}; columns not in the schema: {extra})"
                )
        desc = {"source": "csv", "file": self.path.name}
        super().__init__(name=str(src), schema=resolved, desc=json.dumps(desc), num_rows=num_rows)

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in file order, ``batch_rows`` at a time, typed by the schema."""
        check_batch_rows(batch_rows)
        for header, rows, lines in _iter_chunks(
            self.path, delimiter=self.delimiter, encoding=self.encoding, batch_rows=batch_rows
        ):
            batch: Batch = {}
            for name, spec in self.schema.items():
                j = header.index(name)
                batch[name] = _convert(
                    [r[j] for r in rows], spec["type"], path=self.path, column=name, lines=lines
                )
            yield batch
