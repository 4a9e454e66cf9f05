"""One shard being written: rows buffered, cut into pages near the target size, encoded.

A :class:`ShardWriter` encodes pages and hands them to its
:class:`~mrecord.storage.shard_output.ShardOutput`, which writes the shard's partial
file (chunks at aligned offsets, one vectored write per page, background
``fdatasync``); ``finish`` adds the metadata and trailer there. The commit
(``mrecord.storage.transaction``) publishes it. A new shard's partial is the whole
file; when appending it is only the *tail*, laid out as if it started at the shard's
committed end, where the commit writes it after its commit point. The committed bytes
are never modified, and appending costs the new rows only.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.format.chunks import value_nbytes
from mrecord.format.columnize import Columns
from mrecord.format.head_index import copied_whole, head_length
from mrecord.format.metadata import CHUNK_DTYPE, ShardMetadata
from mrecord.format.page import EncodedChunk, encode_page
from mrecord.format.schema import FieldKind, StoredSchema
from mrecord.format.value_crcs import FLAG_VALUE_CRCS, prefix_length
from mrecord.storage.head_region import HeadRegion, read_head_region
from mrecord.storage.shard_output import ShardOutput
from mrecord.storage.value_spill import ValueSpill

__all__ = ["ShardWriter"]

_ZEROS = bytes(64)
_OBJECT_BYTES = 96
"""A Python ``str``, ``bytes`` or per-row array's memory beyond its data, with its slot."""
_MERGE_PARTS = 32
"""Pending parts merged into one past this many (each a dict, column views and a sizes
array: a writer of many shards gives each a few rows a call)."""
HEAD_INDEX = True
"""Write the head index (format 1.4, ``mrecord.format.head_index``) after the pages;
tests of reading files without one (written by 1.3) turn it off."""


def _concat(parts: list[np.ndarray | list[Any]]) -> np.ndarray | list[Any]:
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)  # type: ignore[arg-type]
    out: list[Any] = []
    for p in parts:
        out.extend(p)
    return out


class ShardWriter:
    """Buffers rows of one shard and writes full pages to its partial file."""

    def __init__(
        self,
        partial: Path,
        schema: StoredSchema,
        page_size: int,
        level: int,
        committed_meta: ShardMetadata | None = None,
        base_length: int | None = None,
    ):
        self.partial = partial
        self.schema = schema
        self.page_size = page_size
        self.level = level
        self._pending: list[Columns] = []
        self._pending_sizes: list[np.ndarray] = []
        self._pending_bytes = 0
        self._pending_rows = 0
        # Index-field values wait for the commit's .db on disk, not in memory.
        self._index_values: dict[str, ValueSpill] = {}
        if committed_meta is not None and base_length is not None:
            # The partial is a tail: its byte 0 goes at the committed end of the shard.
            self.base_length: int | None = base_length
            self._previous_ends = committed_meta.previous_ends
            self._head_index = committed_meta.head_index
            self._page_rows: list[int] = committed_meta.page_rows.tolist()
            self._chunks: list[np.ndarray] = [committed_meta.chunks.reshape(-1)]
            self.first_new_row = committed_meta.num_rows
        else:
            self.base_length = None
            self._head_index = ()
            self._page_rows = []
            self._chunks = []
            self.first_new_row = 0
        self.num_rows = self.first_new_row
        self._first_new_page = len(self._page_rows)
        # This session's pages' tables and heads, for the head index (format 1.4).
        self._heads = HeadRegion()
        self._out = ShardOutput(partial, self.base_length)
        # A pending row's memory beyond its values' bytes: its size (8 bytes) and, for
        # each field not held in one array, the value's own object and list slot.
        self._row_overhead = 8 + _OBJECT_BYTES * sum(
            f.kind is not FieldKind.FIXED for f in schema.fields
        )

    def add(self, columns: Columns, n: int, index_fields: tuple[str, ...]) -> None:
        """Buffer ``n`` validated rows; write every page that is full."""
        if n == 0:
            return
        sizes = np.zeros(n, dtype=np.int64)
        for f in self.schema.fields:
            sizes += value_nbytes(f, columns[f.name])
        self._pending.append(columns)
        self._pending_sizes.append(sizes)
        self._pending_bytes += int(sizes.sum())
        self._pending_rows += n
        for name in index_fields:
            self._index_spill(name).append(columns[name])
        self.num_rows += n
        if self._pending_bytes >= self.page_size:
            self._write_full_pages(final=False)
        elif len(self._pending) >= _MERGE_PARTS:
            self._merge_pending()

    @property
    def held_bytes(self) -> int:
        """About how much memory the rows waiting for their page take (their values'
        bytes and each value object's own). A function of those rows alone, never of the
        calls that brought them: a resumed conversion, whose checkpoint gives the rows back
        in one call, cuts the same pages (``mrecord.writer.resume``)."""
        return self._pending_bytes + self._pending_rows * self._row_overhead

    def write_pending(self) -> None:
        """Write the rows waiting for their page now, as pages of up to ``page_size``
        (the last one short), and their index values to their spill: the writer of many
        shards keeps its memory so."""
        self._write_full_pages(final=True)
        for spill in self._index_values.values():
            spill.flush()

    def _write_full_pages(self, final: bool) -> None:
        """Cut pending rows into pages of about ``page_size`` bytes (each at least one row)."""
        if not self._pending:
            return
        merged, sizes = self._merge_pending()
        cum = np.cumsum(sizes)
        total = len(sizes)
        start = 0
        while start < total:
            base = int(cum[start - 1]) if start else 0
            if not final and int(cum[-1]) - base < self.page_size:
                break
            end = int(np.searchsorted(cum, base + self.page_size, side="left")) + 1
            end = max(start + 1, min(end, total))
            page = {name: values[start:end] for name, values in merged.items()}
            self._write_page(encode_page(self.schema, page, self.level), end - start)
            start = end
        if start < total:
            self._pending = [{name: values[start:] for name, values in merged.items()}]
            self._pending_sizes = [sizes[start:]]
        else:
            self._pending, self._pending_sizes = [], []
        self._pending_bytes = int(sizes[start:].sum())
        self._pending_rows = total - start

    def _merge_pending(self) -> tuple[Columns, np.ndarray]:
        """The pending rows as one part (kept so), and their sizes."""
        merged = {f.name: _concat([p[f.name] for p in self._pending]) for f in self.schema.fields}
        sizes = np.concatenate(self._pending_sizes)
        self._pending, self._pending_sizes = [merged], [sizes]
        return merged, sizes

    def _write_page(self, chunks: list[EncodedChunk], n_rows: int) -> None:
        # A chunk's value table goes right before it, after zeros that keep the chunk on
        # its 64-byte boundary (mrecord.format.value_crcs).
        prefixes = [0 if c.value_crcs is None else prefix_length(n_rows) for c in chunks]
        items = [
            (c.parts, c.length)
            if c.value_crcs is None
            else ((_ZEROS[: p - len(c.value_crcs)], c.value_crcs, *c.parts), p + c.length)
            for c, p in zip(chunks, prefixes, strict=True)
        ]
        offsets = self._out.write_page(items) + np.array(prefixes, dtype=np.int64)
        records = np.zeros(len(chunks), dtype=CHUNK_DTYPE)
        records["offset"] = offsets
        records["flags"] = [0 if c.value_crcs is None else FLAG_VALUE_CRCS for c in chunks]
        records["length"] = [c.length for c in chunks]
        records["raw_length"] = [c.raw_length for c in chunks]
        records["crc32"] = [c.crc32 for c in chunks]
        records["codec"] = [c.codec for c in chunks]
        self._chunks.append(records)
        self._page_rows.append(n_rows)
        page_bytes = sum(c.length for c in chunks)
        for c, field in zip(chunks, self.schema.fields, strict=True):
            if c.value_crcs is not None:  # the head starts the chunk's first buffer
                head = memoryview(c.parts[0])[: head_length(field, n_rows)]
                self._heads.add(c.value_crcs, head)
            elif copied_whole(c.length, page_bytes):  # a small chunk: copied whole
                self._heads.extend(b"".join(c.parts))

    def finish(self, meta: ShardMetadata) -> ShardMetadata:
        """Write the last page, metadata and trailer; fsync; return the final metadata."""
        self._write_full_pages(final=True)
        n_fields = len(self.schema.fields)
        chunks = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=CHUNK_DTYPE)
        final = meta.with_pages(
            np.array(self._page_rows, dtype="<u4"),
            chunks.reshape(len(self._page_rows), n_fields),
            num_rows=self.num_rows,
        )
        if self.base_length is not None:
            final = replace(final, previous_ends=(*self._previous_ends, self.base_length))
        region = self._heads.join() if HEAD_INDEX else b""
        entries = self._head_index
        if region:  # its region goes right after the pages, before the metadata
            entry = self._heads.entry(self._first_new_page, self._out.offset, region)
            entries = (*entries, entry)
        final = replace(final, head_index=entries)
        self._out.finish(final, region)
        return final

    @property
    def tail_length(self) -> int:
        """Bytes this writer adds after the committed end (after :meth:`finish`)."""
        return self._out.tail_length

    @property
    def written(self) -> int:
        """Bytes in the partial file so far (header and pages written)."""
        return self._out.offset - (self.base_length or 0)

    def sync(self) -> int:
        """Make the pages written so far durable; returns the partial file's length."""
        return self._out.sync()

    def restore(
        self, source: Path, length: int, page_rows: list[int], chunks: list[np.ndarray], rows: int
    ) -> None:
        """Continue from pages an earlier run wrote and made durable (a resumed conversion).

        ``source`` holds them in its first ``length`` bytes; ``page_rows`` and ``chunks``
        are their page directory, ``rows`` their row count. Only for a new shard.
        """
        self._out.adopt(source, length)
        self._page_rows = list(page_rows)
        self._chunks = list(chunks)
        self.num_rows = rows
        # Their tables and heads are in the file: read back for the head index.
        directory = np.concatenate(chunks) if chunks else np.zeros(0, dtype=CHUNK_DTYPE)
        self._heads = HeadRegion()
        self._heads.extend(
            read_head_region(
                source,
                self.schema,
                np.array(page_rows, dtype="<u4"),
                directory.reshape(len(page_rows), len(self.schema.fields)),
            )
        )

    def new_index_values(self) -> dict[str, ValueSpill]:
        """Index-field values of the rows added in this session, per field (read back
        by slices of rows)."""
        return dict(self._index_values)

    def restore_index_values(self, values: dict[str, np.ndarray | list[Any]]) -> None:
        """Start the index values again from ``values`` (a resumed conversion's rows)."""
        self.drop_index_values()
        for name, column in values.items():
            self._index_spill(name).append(column)

    def drop_index_values(self) -> None:
        """Let the index values go (after the commit took them, or on abort)."""
        for spill in self._index_values.values():
            spill.close()
        self._index_values = {}

    def _index_spill(self, name: str) -> ValueSpill:
        spill = self._index_values.get(name)
        if spill is None:
            spill = ValueSpill(self.partial.parent, self.schema[name])
            self._index_values[name] = spill
        return spill

    def abort(self) -> None:
        """Close and delete the partial file; drop the index values."""
        self.drop_index_values()
        self._out.abort()
