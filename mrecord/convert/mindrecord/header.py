"""The MindRecord shard header, parsed and validated (pure: bytes in, dataclasses out).

Layout at offset 0 of every shard file::

    [L: 8, little-endian uint64] [JSON: L bytes, compact] [zeros up to header_size]

The JSON holds ``header_size``, ``page_size``, ``version``, ``shard_id``,
``shard_addresses`` (the sibling files), ``schema`` (a list with one entry:
``{"schema": {...}, "blob_fields": [...], "desc": ...}``), ``index_fields`` and
``page`` (one entry per page). Page ``page_id`` starts at
``header_size + page_id * page_size`` and uses its entry's ``page_size`` bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mrecord.errors import ConversionError, CorruptFileError

__all__ = [
    "MINDRECORD_TYPES",
    "FieldSpec",
    "MindRecordHeader",
    "PageInfo",
    "parse_header",
    "read_header_length",
]

MINDRECORD_TYPES = ("int32", "int64", "float32", "float64", "string", "bytes")
"""The field types MindSpore's FileWriter accepts."""

RAW_PAGE = "RAW_DATA"
BLOB_PAGE = "BLOB_DATA"

# A header larger than this is certainly not a MindRecord header (MindSpore's
# maximum header_size is 128 MiB); refuse it before allocating.
_MAX_HEADER = 1 << 27


@dataclass(frozen=True)
class FieldSpec:
    """One schema field: name, MindRecord type and optional shape."""

    name: str
    type: str
    shape: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        """The field as a schema entry: ``{"type": ..., "shape": [...]}``."""
        out: dict[str, Any] = {"type": self.type}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out


@dataclass(frozen=True)
class PageInfo:
    """One page entry of the header."""

    page_id: int
    page_type: str
    page_type_id: int
    start_row_id: int
    end_row_id: int
    used: int


@dataclass(frozen=True)
class MindRecordHeader:
    """A parsed shard header (see the module docstring)."""

    version: str
    header_size: int
    page_size: int
    shard_id: int
    shard_addresses: tuple[str, ...]
    fields: tuple[FieldSpec, ...]
    blob_fields: tuple[str, ...]
    desc: str
    index_fields: tuple[str, ...]
    pages: tuple[PageInfo, ...]

    @property
    def raw_fields(self) -> tuple[str, ...]:
        """Names of the fields stored in raw (MessagePack) records."""
        blobs = set(self.blob_fields)
        return tuple(f.name for f in self.fields if f.name not in blobs)

    def pages_of(self, page_type: str) -> list[PageInfo]:
        """Pages of one type (``"RAW_DATA"`` or ``"BLOB_DATA"``) in write order."""
        return sorted(
            (p for p in self.pages if p.page_type == page_type), key=lambda p: p.page_type_id
        )


def read_header_length(prefix: bytes, *, path: str, file_size: int) -> int:
    """Validate the 8-byte length at offset 0 and return it."""
    if len(prefix) < 8:
        raise ConversionError(
            f"{path!r} is not a MindRecord file: it has {file_size} bytes, too short for a header"
        )
    length = int.from_bytes(prefix[:8], "little")
    if length == 0 or length > min(file_size - 8, _MAX_HEADER):
        raise ConversionError(
            f"{path!r} is not a MindRecord file (or its header was never written): the "
            f"header length at byte 0 is {length}, file size {file_size}"
        )
    return length


def parse_header(data: bytes, *, path: str) -> MindRecordHeader:
    """Parse the header JSON (the ``L`` bytes after the length) into a header."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(
            f"{path!r} is not a MindRecord file: its header at byte 8 is not JSON ({exc})"
        ) from exc
    if not isinstance(raw, dict) or "version" not in raw or "schema" not in raw:
        raise ConversionError(
            f"{path!r} is not a MindRecord file: its header has no 'version' and 'schema'"
        )
    return _Parser(raw, path).header()


class _Parser:
    def __init__(self, raw: dict[str, Any], path: str):
        self.raw = raw
        self.path = path

    def fail(self, what: str, value: object) -> CorruptFileError:
        return CorruptFileError(
            f"{self.path!r}: MindRecord header field {what} is invalid, got {value!r}; "
            "the file is damaged or not written by MindSpore",
            path=self.path,
            offset=8,
        )

    def int_(self, obj: dict[str, Any], key: str, where: str = "", minimum: int = 0) -> int:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(f"{where}{key!r}", value)
        return value

    def str_(self, obj: dict[str, Any], key: str, where: str = "") -> str:
        value = obj.get(key)
        if not isinstance(value, str):
            raise self.fail(f"{where}{key!r}", value)
        return value

    def list_(self, obj: dict[str, Any], key: str, where: str = "") -> list[Any]:
        value = obj.get(key)
        if not isinstance(value, list):
            raise self.fail(f"{where}{key!r}", value)
        return value

    def header(self) -> MindRecordHeader:
        raw = self.raw
        version = self.str_(raw, "version")
        header_size = self.int_(raw, "header_size", minimum=16)
        page_size = self.int_(raw, "page_size", minimum=1)
        shard_id = self.int_(raw, "shard_id")
        compression = raw.get("compression_size", 0)
        if compression not in (0, None):
            raise ConversionError(
                f"{self.path!r}: compressed MindRecord files (compression_size="
                f"{compression!r}) are not supported; rewrite it uncompressed with MindSpore"
            )
        addresses = self.list_(raw, "shard_addresses")
        if not addresses or not all(isinstance(a, str) and a for a in addresses):
            raise self.fail("'shard_addresses'", addresses)
        schemas = self.list_(raw, "schema")
        if len(schemas) != 1 or not isinstance(schemas[0], dict):
            raise ConversionError(
                f"{self.path!r}: expected exactly one schema in the MindRecord header, "
                f"found {len(schemas)}"
            )
        fields, blob_fields, desc = self.schema(schemas[0])
        entries = raw.get("index_fields") or []
        if not isinstance(entries, list):
            raise self.fail("'index_fields'", entries)
        index_fields = tuple(self.index_field(entry) for entry in entries)
        pages = tuple(self.page(i, p) for i, p in enumerate(self.list_(raw, "page")))
        return MindRecordHeader(
            version=version,
            header_size=header_size,
            page_size=page_size,
            shard_id=shard_id,
            shard_addresses=tuple(addresses),
            fields=fields,
            blob_fields=blob_fields,
            desc=desc,
            index_fields=index_fields,
            pages=pages,
        )

    def schema(self, entry: dict[str, Any]) -> tuple[tuple[FieldSpec, ...], tuple[str, ...], str]:
        body = entry.get("schema")
        if not isinstance(body, dict) or not body:
            raise self.fail("'schema'", body)
        fields: list[FieldSpec] = []
        for name, spec in body.items():
            if not isinstance(spec, dict):
                raise self.fail(f"schema[{name!r}]", spec)
            type_name = spec.get("type")
            if type_name not in MINDRECORD_TYPES:
                raise self.fail(f"schema[{name!r}]['type']", type_name)
            shape = spec.get("shape")
            if shape is not None:
                ok = isinstance(shape, list) and all(
                    isinstance(d, int) and not isinstance(d, bool) and (d == -1 or d >= 0)
                    for d in shape
                )
                if not ok or type_name in ("string", "bytes"):
                    raise self.fail(f"schema[{name!r}]['shape']", shape)
                shape = tuple(shape)
            fields.append(FieldSpec(name, type_name, shape))
        names = {f.name for f in fields}
        blob_fields = self.list_(entry, "blob_fields", "schema ")
        if not all(isinstance(b, str) and b in names for b in blob_fields):
            raise self.fail("'blob_fields'", blob_fields)
        expected_blobs = {f.name for f in fields if f.type == "bytes" or f.shape is not None}
        if set(blob_fields) != expected_blobs:
            raise self.fail("'blob_fields'", blob_fields)
        desc = entry.get("desc")
        return tuple(fields), tuple(blob_fields), desc if isinstance(desc, str) else ""

    def index_field(self, entry: object) -> str:
        if not isinstance(entry, dict) or not isinstance(entry.get("index_field"), str):
            raise self.fail("'index_fields'", entry)
        name: str = entry["index_field"]
        return name

    def page(self, i: int, entry: object) -> PageInfo:
        if not isinstance(entry, dict):
            raise self.fail(f"'page'[{i}]", entry)
        where = f"'page'[{i}]."
        page_type = self.str_(entry, "page_type", where)
        if page_type not in (RAW_PAGE, BLOB_PAGE):
            raise self.fail(f"{where}'page_type'", page_type)
        return PageInfo(
            page_id=self.int_(entry, "page_id", where),
            page_type=page_type,
            page_type_id=self.int_(entry, "page_type_id", where),
            start_row_id=self.int_(entry, "start_row_id", where),
            end_row_id=self.int_(entry, "end_row_id", where),
            used=self.int_(entry, "page_size", where),
        )
