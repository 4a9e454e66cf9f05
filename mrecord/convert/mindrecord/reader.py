"""Read MindRecord files written by MindSpore, natively (no MindSpore needed).

:class:`MindRecordDataset` opens one shard file, finds its siblings through the
header's ``shard_addresses`` (basenames, looked up next to the given file), and
serves rows in MindSpore's order: shard 0 first, then shard 1, and so on; inside
a shard, in the order they were written. Each shard is memory-mapped; one pass
over the record lengths locates every record, and rows are then decoded in
batches into columns (see :mod:`mrecord.convert.mindrecord.codec` for the bytes).

The ``.db`` files are not needed to read the data. When one is present it is
checked against the data file (row count and every record's page and offsets),
so a stale or foreign index is reported rather than trusted.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

import msgpack
import numpy as np

from mrecord.block import ColumnValues
from mrecord.convert.mindrecord.codec import decode_array, split_blob, split_records
from mrecord.convert.mindrecord.header import (
    BLOB_PAGE,
    RAW_PAGE,
    FieldSpec,
    MindRecordHeader,
    PageInfo,
    parse_header,
    read_header_length,
)
from mrecord.errors import (
    ArgumentError,
    ConversionError,
    CorruptFileError,
    DatasetNotFoundError,
    ForeignShardError,
    IndexMismatchError,
)
from mrecord.storage.index_db import connect_foreign_db

__all__ = ["MindRecordDataset", "MindRecordShard", "RecordLocations"]

_NUMPY_TYPES: dict[str, type[np.number[Any]]] = {
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
}


@dataclass(frozen=True)
class RecordLocations:
    """Where each row's records are in one shard (absolute payload offsets).

    ``raw_page``/``blob_page`` are page ids; ``*_start``/``*_end`` are file offsets
    of the payload (after the 8-byte length).
    """

    raw_page: np.ndarray
    raw_start: np.ndarray
    raw_end: np.ndarray
    blob_page: np.ndarray
    blob_start: np.ndarray
    blob_end: np.ndarray

    def __len__(self) -> int:
        return len(self.raw_start)


class MindRecordShard:
    """One MindRecord shard file: its header, mapped bytes and record locations."""

    def __init__(self, path: Path, header: MindRecordHeader, data: mmap.mmap, file_size: int):
        self.path = path
        self.header = header
        self._mm = data
        self.file_size = file_size
        self.locations = self._locate()

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> MindRecordShard:
        """Open and map ``path``, parse its header and locate every record."""
        p = Path(path)
        name = str(p)
        if not p.is_file():
            raise DatasetNotFoundError(
                f"MindRecord file {name!r} does not exist (give the path of a shard file)"
            )
        size = p.stat().st_size
        with open(p, "rb") as fh:
            length = read_header_length(fh.read(8), path=name, file_size=size)
            header = parse_header(fh.read(length), path=name)
            if header.header_size > size or length + 8 > header.header_size:
                raise CorruptFileError(
                    f"{name!r}: header_size {header.header_size} does not fit the file "
                    f"({size} bytes) or its {length}-byte header JSON; the file is truncated",
                    path=name,
                    offset=0,
                )
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return cls(p, header, mm, size)
        except BaseException:
            mm.close()
            raise

    def close(self) -> None:
        """Unmap the file."""
        self._mm.close()

    def page_span(self, page: PageInfo) -> tuple[int, int]:
        """Return ``(file offset, used bytes)`` of a page, checking it lies inside the file."""
        h = self.header
        start = h.header_size + page.page_id * h.page_size
        if page.used > h.page_size or start + page.used > self.file_size:
            raise CorruptFileError(
                f"{str(self.path)!r}: page {page.page_id} spans bytes {start}.."
                f"{start + page.used} but the file has {self.file_size} bytes "
                f"(page_size {h.page_size}); the file is truncated",
                path=str(self.path),
                page=page.page_id,
                offset=start,
            )
        return start, page.used

    def _scan(self, page_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Page ids, payload starts and ends of the records of ``page_type``, in page order:
        each page's as arrays (Python lists of every row's ints were ~240 bytes a row)."""
        pages_ids: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        for page in self.header.pages_of(page_type):
            base, used = self.page_span(page)
            spans = split_records(self._mm, base, used, path=str(self.path), page_id=page.page_id)
            if page_type == BLOB_PAGE and page.end_row_id - page.start_row_id != len(spans):
                raise CorruptFileError(
                    f"{str(self.path)!r}: blob page {page.page_id} should hold rows "
                    f"{page.start_row_id}..{page.end_row_id} but has {len(spans)} records; "
                    "the file is damaged",
                    path=str(self.path),
                    page=page.page_id,
                    offset=base,
                )
            found = np.array(spans, dtype=np.int64).reshape(-1, 2)
            pages_ids.append(np.full(len(found), page.page_id, dtype=np.int64))
            starts.append(found[:, 0].copy())
            ends.append(found[:, 1].copy())
        return _joined(pages_ids), _joined(starts), _joined(ends)

    def _locate(self) -> RecordLocations:
        for page in sorted(self.header.pages, key=lambda p: p.page_id):
            self.page_span(page)  # report the first damaged page in file order
        raw = self._scan(RAW_PAGE)
        blob = self._scan(BLOB_PAGE)
        if len(raw[1]) != len(blob[1]):
            raise CorruptFileError(
                f"{str(self.path)!r}: {len(raw[1])} raw records but {len(blob[1])} blob "
                "records; the file is damaged",
                path=str(self.path),
            )
        return RecordLocations(*raw, *blob)

    @property
    def num_rows(self) -> int:
        """Rows in this shard."""
        return len(self.locations)

    def raw_record(self, row: int) -> dict[str, Any]:
        """Decode row ``row``'s MessagePack raw record."""
        loc = self.locations
        start, end = int(loc.raw_start[row]), int(loc.raw_end[row])
        try:
            value = msgpack.unpackb(self._mm[start:end], raw=False, strict_map_key=False)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise CorruptFileError(
                f"{str(self.path)!r}: raw record of row {row} at byte {start - 8} is not "
                f"valid MessagePack ({exc}); the file is damaged",
                path=str(self.path),
                page=int(loc.raw_page[row]),
                offset=start - 8,
            ) from exc
        if not isinstance(value, dict):
            raise CorruptFileError(
                f"{str(self.path)!r}: raw record of row {row} at byte {start - 8} is a "
                f"{type(value).__name__}, not a map; the file is damaged",
                path=str(self.path),
                page=int(loc.raw_page[row]),
                offset=start - 8,
            )
        return value

    def blob_record(self, row: int) -> tuple[int, bytes]:
        """Return ``(file offset, payload)`` of row ``row``'s blob record."""
        loc = self.locations
        start, end = int(loc.blob_start[row]), int(loc.blob_end[row])
        return start, self._mm[start:end]

    def check_index(self) -> bool:
        """Compare the ``.db`` next to the file with the located records.

        Returns False when there is no ``.db``; raises :class:`IndexMismatchError`
        when it disagrees with the data file.
        """
        db = Path(str(self.path) + ".db")
        if not db.is_file():
            return False
        query = (
            "SELECT ROW_ID, PAGE_ID_RAW, PAGE_OFFSET_RAW, PAGE_OFFSET_RAW_END, PAGE_ID_BLOB, "
            "PAGE_OFFSET_BLOB, PAGE_OFFSET_BLOB_END FROM INDEXES ORDER BY ROW_ID"
        )
        try:
            con = connect_foreign_db(db, ("INDEXES",), immutable=True)
            try:
                cursor = con.execute(query)
                seen = 0
                # A block of rows at a time: one fetchall of a 10M-row shard was 3.3 GB.
                while rows := cursor.fetchmany(_CHECK_ROWS):
                    self._check_index_rows(db, rows, seen)
                    seen += len(rows)
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise IndexMismatchError(
                f"{str(db)!r} is not a readable MindRecord index ({exc}); delete it "
                f"to import {str(self.path)!r} from the data file alone"
            ) from exc
        if seen != len(self.locations):
            raise self._index_mismatch(db, seen)
        return True

    def _check_index_rows(self, db: Path, rows: list[Any], first: int) -> None:
        """Compare ``.db`` rows ``first..`` with the located records."""
        if not all(type(v) is int and -(1 << 63) <= v < 1 << 63 for row in rows for v in row):
            raise IndexMismatchError(
                f"{str(db)!r} holds a location that is not an integer; delete it to import "
                f"{str(self.path)!r} from the data file alone"
            )
        got = np.asarray(rows, dtype=np.int64).reshape(-1, 7)
        stop = first + len(got)
        if stop > len(self.locations):
            raise self._index_mismatch(db, stop)
        loc = self.locations
        h = self.header

        def rel(page: np.ndarray, off: np.ndarray) -> np.ndarray:
            out: np.ndarray = off - (h.header_size + page * h.page_size)
            return out

        part = slice(first, stop)
        raw_page, blob_page = loc.raw_page[part], loc.blob_page[part]
        expect = np.stack(
            [
                np.arange(first, stop, dtype=np.int64),
                raw_page,
                rel(raw_page, loc.raw_start[part]) - 8,
                rel(raw_page, loc.raw_end[part]),
                blob_page,
                rel(blob_page, loc.blob_start[part]) - 8,
                rel(blob_page, loc.blob_end[part]),
            ],
            axis=1,
        )
        if not np.array_equal(got, expect):
            raise self._index_mismatch(db, None)

    def _index_mismatch(self, db: Path, index_rows: int | None) -> IndexMismatchError:
        count = "" if index_rows is None else f"{index_rows} index rows, "
        return IndexMismatchError(
            f"{str(db)!r} does not match {str(self.path)!r} ({count}{len(self.locations)} "
            "records in the file, or their offsets differ); delete the .db to import from "
            "the data file alone"
        )


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


_CHECK_ROWS = 1 << 14
"""Rows of a MindSpore ``.db`` compared at a time (:meth:`MindRecordShard.check_index`)."""


def _sibling_name(address: str, *, path: str) -> str:
    name = PurePosixPath(address.replace("\\", "/")).name
    if name in ("", ".", ".."):
        raise ForeignShardError(
            f"{path!r}: shard address {address!r} in the header does not name a file"
        )
    return name


class MindRecordDataset:
    """All shards of a MindRecord dataset, read natively (see the module docstring)."""

    def __init__(self, shards: Sequence[MindRecordShard]):
        if not shards:
            raise ConversionError("a MindRecord dataset needs at least one shard")
        self.shards = list(shards)
        first = self.shards[0].header
        self.fields: tuple[FieldSpec, ...] = first.fields
        self.blob_fields = first.blob_fields
        self.desc = first.desc
        self.index_fields = first.index_fields
        self.shard_rows = [s.num_rows for s in self.shards]
        self.indexed_shards = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, check_index: bool = True) -> MindRecordDataset:
        """Open the dataset that the shard file ``path`` belongs to.

        With ``check_index`` each shard's ``.db``, when present, is checked
        against the data (:class:`IndexMismatchError` if they disagree).
        """
        given = MindRecordShard.open(path)
        shards: list[MindRecordShard] = []
        try:
            header = given.header
            names = [_sibling_name(a, path=str(given.path)) for a in header.shard_addresses]
            if header.shard_id >= len(names):
                raise ForeignShardError(
                    f"{str(given.path)!r}: shard_id {header.shard_id} but the header lists "
                    f"{len(names)} shard(s)"
                )
            for i, name in enumerate(names):
                if i == header.shard_id:
                    shards.append(given)
                    continue
                sibling = MindRecordShard.open(given.path.parent / name)
                shards.append(sibling)
                _check_sibling(given, sibling, i, names)
            dataset = cls(shards)
            if check_index:
                dataset.indexed_shards = sum(s.check_index() for s in shards)
            return dataset
        except BaseException:
            given.close()
            for s in shards:
                if s is not given:
                    s.close()
            raise

    def close(self) -> None:
        """Unmap every shard."""
        for s in self.shards:
            s.close()

    def __enter__(self) -> MindRecordDataset:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def num_rows(self) -> int:
        """Rows over all shards."""
        return sum(self.shard_rows)

    @property
    def files(self) -> list[Path]:
        """The shard files, in shard order."""
        return [s.path for s in self.shards]

    def iter_batches(self, batch_rows: int = 1024) -> Iterator[dict[str, ColumnValues]]:
        """Yield every row in order, ``batch_rows`` at a time, as columns."""
        if batch_rows < 1:
            raise ArgumentError(f"batch_rows must be >= 1, got {batch_rows!r}")
        for shard in self.shards:
            for start in range(0, shard.num_rows, batch_rows):
                stop = min(start + batch_rows, shard.num_rows)
                yield decode_rows(shard, range(start, stop))

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Yield every row in order as a dict (slow path, for inspection and tests)."""
        for batch in self.iter_batches():
            n = len(next(iter(batch.values())))
            for i in range(n):
                yield {name: values[i] for name, values in batch.items()}


def _check_sibling(
    given: MindRecordShard, sibling: MindRecordShard, index: int, names: list[str]
) -> None:
    h, s = given.header, sibling.header
    s_names = [_sibling_name(a, path=str(sibling.path)) for a in s.shard_addresses]
    if s.shard_id != index or s_names != names or s.fields != h.fields:
        raise ForeignShardError(
            f"{str(sibling.path)!r} is not shard {index} of the dataset of "
            f"{str(given.path)!r} (its header says shard {s.shard_id} of {s_names}, "
            "or its schema differs)"
        )


def decode_rows(shard: MindRecordShard, rows: range) -> dict[str, ColumnValues]:
    """Decode rows ``rows`` of one shard into columns (arrays where the shape is fixed)."""
    header = shard.header
    path = str(shard.path)
    raw_names = header.raw_fields
    raw_values: dict[str, list[Any]] = {name: [] for name in raw_names}
    for row in rows:
        record = shard.raw_record(row)
        for name in raw_names:
            if name not in record:
                raise CorruptFileError(
                    f"{path!r}: raw record of row {row} has no field {name!r}; the file is damaged",
                    path=path,
                    offset=int(shard.locations.raw_start[row]) - 8,
                )
            raw_values[name].append(record[name])
    specs = {f.name: f for f in header.fields}
    blob_values: dict[str, list[Any]] = {name: [] for name in header.blob_fields}
    if header.blob_fields:
        for row in rows:
            offset, payload = shard.blob_record(row)
            parts = split_blob(payload, header.blob_fields, path=path, offset=offset)
            for name, data in parts.items():
                spec = specs[name]
                if spec.shape is None:
                    blob_values[name].append(data)
                else:
                    blob_values[name].append(
                        decode_array(
                            data, spec.type, spec.shape, path=path, field=name, offset=offset
                        )
                    )
    columns: dict[str, ColumnValues] = {}
    for spec in header.fields:
        if spec.name in raw_values:
            columns[spec.name] = _scalar_column(
                raw_values[spec.name], spec, path=path, first_row=rows.start
            )
        else:
            values = blob_values[spec.name]
            if spec.shape is None or -1 in spec.shape:
                columns[spec.name] = values
            elif values:
                columns[spec.name] = np.stack(values)
            else:
                columns[spec.name] = np.empty((0, *spec.shape), dtype=spec.type)
    return columns


def _scalar_column(
    values: list[Any], spec: FieldSpec, *, path: str, first_row: int
) -> ColumnValues:
    def bad(i: int, why: str) -> CorruptFileError:
        return CorruptFileError(
            f"{path!r}: row {first_row + i} field {spec.name!r} ({spec.type}) {why}, got "
            f"{values[i]!r}",
            path=path,
        )

    if spec.type == "string":
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise bad(i, "is not a string")
        return values
    dtype = _NUMPY_TYPES[spec.type]
    integer = spec.type.startswith("int")
    for i, v in enumerate(values):
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if not ok or isinstance(v, bool):
            raise bad(i, "has the wrong type")
    if not values:
        return np.empty(0, dtype=dtype)
    if integer:
        info = np.iinfo(np.dtype(dtype))
        for i, v in enumerate(values):
            if not info.min <= v <= info.max:
                raise bad(i, f"does not fit {spec.type} (MindSpore does not check this at write)")
    return np.asarray(values, dtype=dtype)
