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

from mrecord.format.chunks import encode_chunk
from mrecord.format.compression import checksum, compress
from mrecord.format.schema import Schema

__all__ = ["EncodedChunk", "encode_page"]


@dataclass(frozen=True)
class EncodedChunk:
    """A chunk ready to be written: stored bytes plus its directory entry fields."""

    stored: bytes
    raw_length: int
    crc32: int
    codec: int


def encode_page(
    schema: Schema, columns: Mapping[str, np.ndarray | Sequence[Any]], level: int = 3
) -> list[EncodedChunk]:
    """Encode validated ``columns`` (all the same length) into one chunk per field."""
    out: list[EncodedChunk] = []
    for field in schema.fields:
        raw = encode_chunk(field, columns[field.name])
        codec, stored = compress(raw, field.compression, level)
        out.append(EncodedChunk(stored, len(raw), checksum(stored), codec))
    return out
