"""Shard metadata: a MessagePack map stored before the trailer of every shard.

Keys (all required)::

    format_version  [major, minor]
    dataset_id      str, 32 hex digits, shared by every shard of the dataset
    dataset_name    str, basename the dataset was created with (names the lock/journal)
    generation      int, commit generation (the .db carries the same number)
    shard_index     int, this shard's position in ``shard_names``
    shard_names     [str], basenames of all shards in order (never paths)
    schema          [{"name", "type", "shape" (list or nil), "compression"}], in field order
    desc            str or nil
    index_fields    [str]
    page_size       int, the writer's target page size in bytes
    num_rows        int, rows in this shard
    next_shard      int, the shard that receives the next row (row distribution)
    page_rows       bin: u32 little-endian, rows of each page
    chunks          bin: CHUNK_DTYPE records, page by page, field by field
    previous_ends   [int] (format 1.1, optional on read): the file's length after each
                    earlier commit, oldest first; each is where an append's tail began
    head_index      [[first_page, offset, length, crc32c]] (format 1.4, optional on
                    read): the regions holding a copy of every value table and head
                    (``mrecord.format.head_index``)

A CHUNK_DTYPE record is 32 bytes::

    [offset: u64] [stored length: u64] [raw length: u64] [crc32c of stored bytes: u32]
    [codec: u8 (0 none, 1 zstd)] [flags: u8] [zeros: 2]

Flags (format 1.3; zero before): bit 0, a table of value checksums precedes the chunk
(``mrecord.format.value_crcs``); only plain variable-size chunks may set it.

MessagePack is read with explicit size limits; pickle is never used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
import numpy as np

from mrecord.errors import MetadataError
from mrecord.format.head_index import HeadIndexEntry
from mrecord.format.layout import FORMAT_MAJOR, FORMAT_MINOR, HEADER_SIZE
from mrecord.format.schema import FieldKind, StoredSchema, parse_schema
from mrecord.format.value_crcs import FLAG_VALUE_CRCS

__all__ = ["CHUNK_DTYPE", "MetadataError", "ShardMetadata", "check_basename"]

CHUNK_DTYPE = np.dtype(
    [
        ("offset", "<u8"),
        ("length", "<u8"),
        ("raw_length", "<u8"),
        ("crc32", "<u4"),
        ("codec", "u1"),
        ("flags", "u1"),
        ("pad", "V2"),
    ]
)
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


_NAME_MAX = 255  # bytes in one file name on Linux and macOS (longer: ENAMETOOLONG)


def check_basename(name: object) -> str:
    """Return ``name`` if it is a plain file name; refuse paths and traversal."""
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(name.encode("utf-8", "surrogatepass")) > _NAME_MAX
    ):
        raise MetadataError(f"sibling name {name!r} is not a plain file name")
    return name


@dataclass(frozen=True)
class ShardMetadata:
    """Everything a shard says about itself and its dataset."""

    dataset_id: str
    dataset_name: str
    generation: int
    shard_index: int
    shard_names: tuple[str, ...]
    schema: StoredSchema
    desc: str | None
    index_fields: tuple[str, ...]
    page_size: int
    num_rows: int
    next_shard: int
    page_rows: np.ndarray = field(compare=False)
    chunks: np.ndarray = field(compare=False)
    format_version: tuple[int, int] = (FORMAT_MAJOR, FORMAT_MINOR)
    previous_ends: tuple[int, ...] = ()
    head_index: tuple[HeadIndexEntry, ...] = ()

    @property
    def num_pages(self) -> int:
        """Number of pages in the shard."""
        return len(self.page_rows)

    def with_pages(
        self, page_rows: np.ndarray, chunks: np.ndarray, **changes: Any
    ) -> ShardMetadata:
        """A copy with a new page directory (and other changed fields)."""
        return replace(self, page_rows=page_rows, chunks=chunks, **changes)

    def raw_bytes(self, col: int, *, values_only: bool = False) -> int:
        """Decompressed bytes of field ``col`` over every page, from the chunk directory
        (no data is read): what reading the whole column decodes.

        A variable-size chunk (bytes, string, variable shape) starts with its offsets, one
        u64 per row plus one (``mrecord.format.chunks``). ``values_only`` leaves out the
        8 bytes per row of those offsets, so what remains is about the values themselves
        (the page's extra offset and a variable shape's shapes stay in: small).
        """
        if not self.num_pages:
            return 0
        raw = int(self.chunks[:, col]["raw_length"].sum())
        if values_only and self.schema.fields[col].kind is not FieldKind.FIXED:
            raw -= 8 * self.num_rows
        return raw

    def encode(self) -> bytes:
        """MessagePack bytes of this metadata."""
        doc = {
            "format_version": list(self.format_version),
            "dataset_id": self.dataset_id,
            "dataset_name": self.dataset_name,
            "generation": self.generation,
            "shard_index": self.shard_index,
            "shard_names": list(self.shard_names),
            "schema": [
                {
                    "name": f.name,
                    "type": f.type,
                    "shape": None if f.shape is None else list(f.shape),
                    "compression": f.compression,
                }
                for f in self.schema.fields
            ],
            "desc": self.desc,
            "index_fields": list(self.index_fields),
            "page_size": self.page_size,
            "num_rows": self.num_rows,
            "next_shard": self.next_shard,
            "page_rows": np.ascontiguousarray(self.page_rows, dtype="<u4").tobytes(),
            "chunks": np.ascontiguousarray(self.chunks, dtype=CHUNK_DTYPE).tobytes(),
            "previous_ends": list(self.previous_ends),
            "head_index": [list(entry) for entry in self.head_index],
        }
        return msgpack.packb(doc, use_bin_type=True)  # type: ignore[no-any-return]

    @classmethod
    def decode(cls, data: bytes, data_end: int) -> ShardMetadata:
        """Parse and validate metadata; ``data_end`` is where the pages end in the file."""
        limit = max(len(data), 1)
        try:
            doc = msgpack.unpackb(
                data,
                raw=False,
                strict_map_key=True,
                max_bin_len=limit,
                max_str_len=limit,
                max_array_len=limit,
                max_map_len=limit,
                max_ext_len=0,
            )
        except Exception as exc:  # msgpack raises several unrelated types
            raise MetadataError(f"metadata is not valid MessagePack: {exc}") from exc
        if not isinstance(doc, dict):
            raise MetadataError(f"metadata must be a map, got {type(doc).__name__}")
        return _from_doc(doc, data_end)


def _get(doc: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in doc:
        raise MetadataError(f"metadata lacks {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise MetadataError(f"metadata {key!r} has the wrong type: {value!r}")
    return value


_SHARD_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}
_SHARD_NAMES_KEPT = 64
"""Lists of shard names kept for the metadata decoded next (:func:`_shard_names`)."""


def _shard_names(names: list[Any]) -> tuple[str, ...]:
    """Every shard's metadata lists every shard's name: a dataset of ``n`` shards decodes
    ``n`` lists of ``n`` names. Kept once per process for all the shards that list the
    same names (a dataset of 1,000 shards held 1M name strings, 59 MB, in every reading
    process: 300 MB in a DataLoader of four workers); a list seen before is not checked
    again."""
    if all(type(name) is str for name in names):
        kept = _SHARD_NAMES.get(tuple(names))
        if kept is not None:
            return kept
    checked = tuple(check_basename(name) for name in names)
    if len(_SHARD_NAMES) >= _SHARD_NAMES_KEPT:
        # Start again (one call: safe while another thread decodes); the next shards of a
        # dataset keep their list again, checked once more.
        _SHARD_NAMES.clear()
    _SHARD_NAMES[checked] = checked
    return checked


def _from_doc(doc: dict[str, Any], data_end: int) -> ShardMetadata:
    version = _get(doc, "format_version", list)
    if len(version) != 2 or version[0] != FORMAT_MAJOR or not isinstance(version[1], int):
        raise MetadataError(f"unsupported format version {version!r}")
    dataset_id = _get(doc, "dataset_id", str)
    if not _HEX32.fullmatch(dataset_id):
        raise MetadataError(f"dataset_id {dataset_id!r} is not 32 hex digits")
    shard_names = _shard_names(_get(doc, "shard_names", list))
    shard_index = _get(doc, "shard_index", int)
    if not 0 <= shard_index < len(shard_names):
        raise MetadataError(f"shard_index {shard_index} is outside 0..{len(shard_names) - 1}")
    schema = _schema_from_doc(_get(doc, "schema", list))
    index_fields = tuple(_get(doc, "index_fields", list))
    for name in index_fields:
        if not isinstance(name, str) or name not in schema:
            raise MetadataError(f"index field {name!r} is not in the schema")
    desc = doc.get("desc")
    if desc is not None and not isinstance(desc, str):
        raise MetadataError(f"desc must be a string, got {desc!r}")
    num_rows = _get(doc, "num_rows", int)
    generation = _get(doc, "generation", int)
    next_shard = _get(doc, "next_shard", int)
    page_size = _get(doc, "page_size", int)
    page_rows, chunks = _directory(doc, len(schema.fields), num_rows, data_end)
    _check_fixed_sizes(schema, page_rows, chunks)
    _check_flags(schema, page_rows, chunks)
    if num_rows < 0 or generation < 0 or not 0 <= next_shard < len(shard_names) or page_size <= 0:
        raise MetadataError("metadata has a negative or out-of-range count")
    return ShardMetadata(
        dataset_id=dataset_id,
        dataset_name=check_basename(_get(doc, "dataset_name", str)),
        generation=generation,
        shard_index=shard_index,
        shard_names=shard_names,
        schema=schema,
        desc=desc,
        index_fields=index_fields,
        page_size=page_size,
        num_rows=num_rows,
        next_shard=next_shard,
        page_rows=page_rows,
        chunks=chunks,
        format_version=(int(version[0]), int(version[1])),
        previous_ends=_previous_ends(doc, data_end),
        head_index=_head_index(doc, len(page_rows), data_end),
    )


def _previous_ends(doc: dict[str, Any], data_end: int) -> tuple[int, ...]:
    """File lengths of this shard's earlier generations (format 1.1; absent in 1.0)."""
    if "previous_ends" not in doc:
        return ()
    ends = _get(doc, "previous_ends", list)
    last = HEADER_SIZE
    for end in ends:
        if not isinstance(end, int) or isinstance(end, bool) or not last < end <= data_end:
            raise MetadataError(f"previous_ends {ends!r} must increase inside the pages")
        last = end
    return tuple(ends)


def _head_index(doc: dict[str, Any], num_pages: int, data_end: int) -> tuple[HeadIndexEntry, ...]:
    """The head index's regions (format 1.4; absent before): each inside the pages,
    their first pages increasing."""
    if "head_index" not in doc:
        return ()
    raw = _get(doc, "head_index", list)
    entries: list[HeadIndexEntry] = []
    last_page = -1
    for item in raw:
        if (
            not isinstance(item, list)
            or len(item) != 4
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            raise MetadataError(f"head_index entry {item!r} is not four integers")
        entry = HeadIndexEntry(*item)
        if not (
            last_page < entry.first_page <= num_pages
            and entry.offset >= HEADER_SIZE
            and entry.length >= 0
            and entry.offset + entry.length <= data_end
            and 0 <= entry.crc32 < 2**32
        ):
            raise MetadataError(f"head_index entry {item!r} lies outside the pages or out of order")
        last_page = entry.first_page
        entries.append(entry)
    return tuple(entries)


def _schema_from_doc(entries: list[Any]) -> StoredSchema:
    spec: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise MetadataError(f"schema entry {entry!r} is malformed")
        item: dict[str, Any] = {"type": entry.get("type"), "compression": entry.get("compression")}
        if entry.get("shape") is not None:
            item["shape"] = entry["shape"]
        spec[entry["name"]] = item
    try:
        schema = parse_schema(spec)
    except ValueError as exc:
        raise MetadataError(f"stored schema is invalid: {exc}") from exc
    if len(schema.fields) != len(entries):
        raise MetadataError("stored schema repeats a field name")
    return schema


def _check_fixed_sizes(schema: StoredSchema, page_rows: np.ndarray, chunks: np.ndarray) -> None:
    """A fixed-shape chunk holds exactly rows * row bytes: checked before anything is allocated,
    so a schema claiming 10**12 elements per row cannot make a reader allocate terabytes."""
    for col, f in enumerate(schema.fields):
        if f.kind is not FieldKind.FIXED:
            continue
        per_row = math.prod(f.row_shape) * f.dtype.itemsize  # Python ints: no overflow
        if per_row > 2**30:  # keeps rows * per_row (rows < 2**32) inside int64
            raise MetadataError(
                f"field {f.name!r} declares {per_row} bytes per row (shape {list(f.row_shape)})"
            )
        if not len(page_rows):
            continue
        expected = page_rows.astype(np.int64) * per_row
        if np.any(chunks[:, col]["raw_length"].astype(np.int64) != expected):
            page = int(np.flatnonzero(chunks[:, col]["raw_length"].astype(np.int64) != expected)[0])
            raise MetadataError(
                f"page {page}, field {f.name!r}: raw length {int(chunks[page, col]['raw_length'])} "
                f"is not {int(page_rows[page])} rows of {per_row} bytes"
            )


def _check_flags(schema: StoredSchema, page_rows: np.ndarray, chunks: np.ndarray) -> None:
    """A value table (format 1.3) belongs to a plain variable-size chunk and lies after
    the header, before the chunk. Other flag bits are ignored (a later minor version may
    only use them for what a reader can do without, as 1.2 readers ignore this one)."""
    if not chunks.size:
        return
    flags = chunks["flags"]
    tables = (flags & FLAG_VALUE_CRCS) != 0
    if not tables.any():
        return
    fixed = np.array([f.kind is FieldKind.FIXED for f in schema.fields])
    table_start = chunks["offset"].astype(np.int64) - 4 * (page_rows.astype(np.int64)[:, None] + 1)
    bad = tables & (fixed[None, :] | (chunks["codec"] != 0) | (table_start < HEADER_SIZE))
    if bad.any():
        page, col = (int(i) for i in np.argwhere(bad)[0])
        raise MetadataError(
            f"page {page}, field {schema.fields[col].name!r}: a value table on a chunk "
            "that cannot have one (fixed-width, compressed, or no room before it)"
        )


def _directory(
    doc: dict[str, Any], n_fields: int, num_rows: int, data_end: int
) -> tuple[np.ndarray, np.ndarray]:
    rows_raw = _get(doc, "page_rows", bytes)
    chunks_raw = _get(doc, "chunks", bytes)
    if len(rows_raw) % 4 or len(chunks_raw) % CHUNK_DTYPE.itemsize:
        raise MetadataError("page directory has a partial record")
    page_rows = np.frombuffer(rows_raw, dtype="<u4")
    chunks = np.frombuffer(chunks_raw, dtype=CHUNK_DTYPE)
    if len(chunks) != len(page_rows) * n_fields:
        raise MetadataError(
            f"page directory has {len(chunks)} chunks for {len(page_rows)} pages of {n_fields} "
            "fields"
        )
    if int(page_rows.sum(dtype=np.int64)) != num_rows:
        raise MetadataError(f"pages hold {int(page_rows.sum())} rows, metadata says {num_rows}")
    ends = chunks["offset"].astype(np.float64) + chunks["length"].astype(np.float64)
    if len(chunks) and (
        ends.max() > data_end or chunks["offset"].min() < HEADER_SIZE or chunks["codec"].max() > 1
    ):
        raise MetadataError("a chunk points past the pages or has an unknown codec")
    return page_rows, chunks.reshape(len(page_rows), n_fields)
