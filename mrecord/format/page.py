"""Pages: the rows of one page, encoded column by column into stored chunks.

A page is not a byte range of its own: it is the set of its chunks, one per
field, each placed at a 64-byte boundary by the writer and described by a
CHUNK_DTYPE record in the metadata (offset, stored length, raw length, crc32,
codec). This module only turns values into stored chunk bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrecord.format.chunks import encode_chunk_parts
from mrecord.format.compression import CODEC_IDS, checksum, checksum_update, compress
from mrecord.format.schema import StoredSchema
from mrecord.format.value_crcs import encode_value_crcs

__all__ = ["EncodedChunk", "encode_page"]


@dataclass(frozen=True)
class EncodedChunk:
    """A chunk ready to be written: its stored bytes (as buffers) plus its directory entry.

    ``parts`` concatenated are the stored bytes (``length`` of them): an uncompressed
    chunk of blobs is the offsets followed by the blobs themselves, never joined.
    """

    parts: tuple[Any, ...]
    length: int
    raw_length: int
    crc32: int
    codec: int
    value_crcs: bytes | None = None
    """The value table that goes right before the chunk (``mrecord.format.value_crcs``),
    or None."""

    @property
    def stored(self) -> bytes:
        """The stored bytes in one buffer (a copy; the writer uses ``parts``)."""
        return b"".join(self.parts)


def encode_page(
    schema: StoredSchema, columns: Mapping[str, np.ndarray | Sequence[Any]], level: int = 3
) -> list[EncodedChunk]:
    """Encode validated ``columns`` (all the same length) into one chunk per field; plain
    chunks of large variable-size values get their value table (format 1.3)."""
    out: list[EncodedChunk] = []
    for field in schema.fields:
        parts = encode_chunk_parts(field, columns[field.name])
        if field.compression != "none":
            raw = b"".join(parts)
            codec, stored = compress(raw, field.compression, level)
            # incompressible values (JPEG bytes) are stored plain: they get their table
            rows = len(columns[field.name])
            table = encode_value_crcs(field, parts, rows) if codec == CODEC_IDS["none"] else None
            out.append(
                EncodedChunk((stored,), len(stored), len(raw), checksum(stored), codec, table)
            )
            continue
        crc = 0
        length = 0
        for part in parts:
            crc = checksum_update(part, crc)
            length += len(part)
        table = encode_value_crcs(field, parts, len(columns[field.name]))
        out.append(EncodedChunk(tuple(parts), length, length, crc, CODEC_IDS["none"], table))
    return out
