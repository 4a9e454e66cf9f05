"""One shard being written: pages cut near the target size, chunks placed at aligned offsets.

A :class:`ShardWriter` writes to the shard's partial file only. ``finish`` adds
the metadata and trailer and fsyncs; the commit (``mrecord.storage.commit``)
publishes it. A new shard's partial is the whole file, renamed into place. When
appending, the partial is only the *tail*: new pages, metadata and trailer, laid
out (offsets, alignment) as if it started at the shard's committed end, where the
commit writes it after its commit point. The committed bytes are never modified, and
appending costs the new rows only.

Durability without a long stall at the end: every ``SYNC_EVERY`` bytes a
background thread runs ``fdatasync`` on the partial file while the writer goes on
encoding, so the disk writes overlap with the CPU work and the final ``fsync``
has little left to flush (the pages stay in the page cache for later reads).
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mrecord.format.chunks import value_nbytes
from mrecord.format.columnize import Columns
from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE, Trailer, align, encode_header
from mrecord.format.metadata import CHUNK_DTYPE, ShardMetadata
from mrecord.format.page import EncodedChunk, encode_page
from mrecord.format.schema import Schema
from mrecord.pool import single_thread_executor

__all__ = ["ShardWriter"]

SYNC_EVERY = 64 << 20
_SYNCER = single_thread_executor("mrecord-fsync")  # never cancelled: finish() waits on it


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
        schema: Schema,
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
        self.index_values: dict[str, list[np.ndarray | list[Any]]] = {}
        self._file: BinaryIO = open(partial, "wb")  # noqa: SIM115 - closed in finish/abort
        if committed_meta is not None and base_length is not None:
            # The partial is a tail: its byte 0 goes at the committed end of the shard.
            self.base_length: int | None = base_length
            self._previous_ends = committed_meta.previous_ends
            self._offset = base_length
            self._page_rows: list[int] = committed_meta.page_rows.tolist()
            self._chunks: list[np.ndarray] = [committed_meta.chunks.reshape(-1)]
            self.first_new_row = committed_meta.num_rows
        else:
            self.base_length = None
            self._file.write(encode_header())
            self._offset = HEADER_SIZE
            self._page_rows = []
            self._chunks = []
            self.first_new_row = 0
        self.num_rows = self.first_new_row
        self._unsynced = 0
        self._sync: Future[None] | None = None

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
        for name in index_fields:
            self.index_values.setdefault(name, []).append(columns[name])
        self.num_rows += n
        if self._pending_bytes >= self.page_size:
            self._write_full_pages(final=False)

    def _write_full_pages(self, final: bool) -> None:
        """Cut pending rows into pages of about ``page_size`` bytes (each at least one row)."""
        if not self._pending:
            return
        merged = {f.name: _concat([p[f.name] for p in self._pending]) for f in self.schema.fields}
        sizes = np.concatenate(self._pending_sizes)
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

    def _write_page(self, chunks: list[EncodedChunk], n_rows: int) -> None:
        records = np.zeros(len(chunks), dtype=CHUNK_DTYPE)
        for i, chunk in enumerate(chunks):
            start = align(self._offset)
            if start > self._offset:
                self._file.write(b"\x00" * (start - self._offset))
            self._file.write(chunk.stored)
            records[i] = (start, len(chunk.stored), chunk.raw_length, chunk.crc32, chunk.codec, b"")
            self._offset = start + len(chunk.stored)
        self._chunks.append(records)
        self._page_rows.append(n_rows)
        self._unsynced += int(records["length"].sum())
        if self._unsynced >= SYNC_EVERY and (self._sync is None or self._sync.done()):
            self._file.flush()
            self._sync = _SYNCER.submit(os.fdatasync, self._file.fileno())
            self._unsynced = 0

    def _wait_for_sync(self) -> None:
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.result()

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
        body = final.encode()
        metadata_offset = self._offset
        self._file.write(body)
        self._file.write(Trailer(metadata_offset, len(body), checksum(body)).encode())
        self._offset = metadata_offset + len(body) + TRAILER_SIZE
        self._file.flush()
        self._wait_for_sync()
        os.fsync(self._file.fileno())
        self._file.close()
        return final

    @property
    def tail_length(self) -> int:
        """Bytes this writer adds after the committed end (after :meth:`finish`)."""
        return self._offset - (self.base_length or 0)

    def new_index_values(self) -> dict[str, np.ndarray | list[Any]]:
        """Index-field values of the rows added in this session, per field."""
        return {name: _concat(parts) for name, parts in self.index_values.items()}

    def abort(self) -> None:
        """Close and delete the partial file."""
        with contextlib.suppress(OSError):  # the file is being thrown away
            self._wait_for_sync()
        if not self._file.closed:
            with contextlib.suppress(OSError):  # flushing may fail (disk full): the fd closes
                self._file.close()
        with contextlib.suppress(OSError):  # a vanished or read-only folder: nothing to remove
            self.partial.unlink(missing_ok=True)

