"""Building hostile shard files: valid checksums around lying metadata or chunks.

A hostile file is not damaged (every CRC matches); it lies. These helpers take a
committed shard and rewrite it with a changed metadata document
(:func:`rewrite_metadata`) or one chunk replaced (:func:`replace_chunk`), fixing
the trailer and checksums so that only mrecord's semantic checks can refuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE, Trailer, align

__all__ = ["read_metadata_doc", "replace_chunk", "rewrite_metadata"]


def read_metadata_doc(path: Path) -> tuple[bytes, dict[str, Any]]:
    """(bytes before the metadata, the metadata as a plain msgpack document)."""
    data = path.read_bytes()
    trailer = Trailer.parse(data[-TRAILER_SIZE:], len(data))
    body = data[trailer.metadata_offset : trailer.metadata_offset + trailer.metadata_length]
    return data[: trailer.metadata_offset], msgpack.unpackb(body, raw=False)


def _write(path: Path, pages: bytes, doc: dict[str, Any]) -> None:
    body = msgpack.packb(doc, use_bin_type=True)
    trailer = Trailer(len(pages), len(body), checksum(body)).encode()
    path.write_bytes(pages + body + trailer)


def rewrite_metadata(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to the metadata document and rewrite the file with a valid trailer."""
    pages, doc = read_metadata_doc(path)
    change(doc)
    _write(path, pages, doc)


def replace_chunk(
    path: Path,
    page: int,
    col: int,
    stored: bytes,
    raw_length: int,
    codec: int,
    crc: int | None = None,
) -> None:
    """Put ``stored`` in place of chunk (page, col), with the given directory entry.

    The chunk is appended after the existing pages (64-byte aligned); the others
    are untouched. ``crc`` defaults to the correct CRC-32 of ``stored``.
    """
    from mrecord.format.metadata import CHUNK_DTYPE

    pages, doc = read_metadata_doc(path)
    n_fields = len(doc["schema"])
    chunks = np.frombuffer(doc["chunks"], dtype=CHUNK_DTYPE).copy().reshape(-1, n_fields)
    start = max(HEADER_SIZE, align(len(pages)))
    pages = pages + bytes(start - len(pages)) + stored
    chunks[page, col]["offset"] = start
    chunks[page, col]["length"] = len(stored)
    chunks[page, col]["raw_length"] = raw_length
    chunks[page, col]["codec"] = codec
    chunks[page, col]["crc32"] = checksum(stored) if crc is None else crc
    doc["chunks"] = chunks.tobytes()
    _write(path, pages, doc)
