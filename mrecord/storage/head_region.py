"""The head index's regions being written (format 1.4, ``mrecord.format.head_index``).

A writer keeps a copy of each value table and head it writes (:class:`HeadRegion`) and
puts them, joined, after the shard's pages; pages it did not encode itself (a resumed
conversion's, pages a Ray publish moves from finished files) have theirs read back from
the file they are in (:func:`read_head_region`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import CorruptFileError
from mrecord.format.compression import checksum
from mrecord.format.head_index import HeadIndexEntry, part_lengths
from mrecord.format.schema import StoredSchema
from mrecord.format.value_crcs import FLAG_VALUE_CRCS

__all__ = ["HeadRegion", "read_head_region"]


class HeadRegion:
    """The tables and heads (and small chunks) written so far, in the order written."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def add(self, table: bytes, head: Any) -> None:
        """A chunk with a value table was written: its ``table`` and ``head`` bytes."""
        self._parts.append(table)
        self._parts.append(bytes(head))  # a copy: the caller may reuse its buffer

    def extend(self, region: bytes) -> None:
        """Parts laid end to end already: a small chunk's bytes, or several chunks'."""
        self._parts.append(region)

    def join(self) -> bytes:
        """The region's bytes."""
        return b"".join(self._parts)

    @staticmethod
    def entry(first_page: int, offset: int, region: bytes) -> HeadIndexEntry:
        """The metadata entry of ``region``, written at ``offset``, covering pages from
        ``first_page`` on."""
        return HeadIndexEntry(first_page, offset, len(region), checksum(region))


def read_head_region(
    path: Path, schema: StoredSchema, page_rows: np.ndarray, chunks: np.ndarray
) -> bytes:
    """The head index region of pages (``page_rows``, ``chunks``: their directory) as
    they lie in the file ``path``: each value table and the head after it, read from in
    front of its chunk, and each small chunk whole, page by page, field by field."""
    lengths = part_lengths(schema, page_rows, chunks)
    if not lengths.any():
        return b""
    pages, cols = np.nonzero(lengths)
    rows = page_rows.astype(np.int64)[pages]
    tabled = (chunks["flags"][pages, cols] & FLAG_VALUE_CRCS) != 0
    before = np.where(tabled, 4 * (rows + 1), 0)  # a table starts before its chunk
    starts = chunks["offset"][pages, cols].astype(np.int64) - before
    parts: list[bytes] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for start, n, table in zip(
            starts.tolist(), lengths[pages, cols].tolist(), before.tolist(), strict=True
        ):
            data = os.pread(fd, n, start)
            if len(data) != n or n < table:
                raise CorruptFileError(
                    f"{str(path)!r} ends inside a chunk's value table or head at byte "
                    f"{start}: it was cut short since it was written; write it again",
                    path=str(path),
                    offset=start,
                )
            parts.append(data)
    finally:
        os.close(fd)
    return b"".join(parts)
