"""Shard files being written: pages of chunks at aligned offsets, then metadata and trailer.

The bytes are those of ``mrecord.format.layout`` (header, chunks at 64-byte boundaries,
metadata, trailer); this module is where they reach the disk, for every writer:

- :class:`ShardOutput`: one shard written page by page into its partial file
  (``FileWriter``, ``open_for_append``, the Ray sink's write tasks). A new shard's partial
  is the whole file; an append's partial is only the *tail*, laid out (offsets,
  alignment) as if it started at the shard's committed end ``base_length``, where the
  commit copies it after its commit point (``mrecord.storage.commit.apply_tail``).
- :func:`assemble_shard`: one shard built from page runs of finished shard files
  (the Ray sink's publish: page bytes move by ``copy_file_range``, never re-encoded).
- :func:`write_tail`: the metadata and trailer after a shard's pages, the one place
  both of the above end a shard.

Speed: past a shard's first ``DIRECT_AFTER`` bytes (64 MiB, written buffered so that a
small dataset is in the page cache for its first reader), where the file system allows
it, a page's chunks (each a list of buffers: an uncompressed chunk of blobs is its
offsets followed by the blobs themselves) are copied into a
:class:`~mrecord.storage.direct_output.DirectStream` and written with ``O_DIRECT``, a
full 1 MiB buffer at a time on a writer thread while the caller fills the other:
buffered, the kernel spent 2-8 s of system time per 2 GB on the page cache (2 GB of
images from memory to durable: median 1.95 s this way, 2.5-3.9 s buffered, same machine,
alternating). Elsewhere (tmpfs, or ``DIRECT_WRITES`` off) they go to the kernel
in one ``writev``, with no joined copy in between, on a writer thread: the caller
encodes and checksums the next page while the kernel copies this one (one page in
flight per shard; a write error is raised by the next call). Either way every
``SYNC_EVERY`` bytes another thread runs ``fdatasync`` on the file, so the disk writes
overlap with the CPU work and the final ``fsync`` has little left to flush.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import WriterStateError
from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, Trailer, align, encode_header
from mrecord.format.metadata import CHUNK_DTYPE, ShardMetadata
from mrecord.format.value_crcs import FLAG_VALUE_CRCS, prefix_length
from mrecord.pool import process_thread
from mrecord.storage.commit import copy_range
from mrecord.storage.direct_output import BLOCK, DirectStream
from mrecord.storage.head_region import HeadRegion, read_head_region

__all__ = [
    "SYNC_EVERY",
    "PageRun",
    "ShardOutput",
    "assemble_shard",
    "pwrite_all",
    "write_tail",
]

SYNC_EVERY = 64 << 20
DIRECT_WRITES = True
"""Write pages with ``O_DIRECT`` where the file system allows it (see the module
docstring); tests of the buffered path turn it off."""
DIRECT_AFTER = 64 << 20
"""Bytes of a shard written buffered before the rest goes ``O_DIRECT``: a small dataset
stays in the page cache for the reader that usually follows (its first epoch warm, as
before); past this, caching what is written would only push other data out."""
_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)
_ZEROS = bytes(64)
_COPY_STEP = 64 << 20


def write_tail(
    fd: int, position: int, metadata_offset: int, meta: ShardMetadata, region: bytes = b""
) -> int:
    """Write the head index ``region`` (format 1.4; ``meta``'s last ``head_index`` entry
    says it lies here), then ``meta`` and the trailer, at file position ``position``; cut
    the rest, fsync.

    ``metadata_offset`` is where the region (or, without one, the metadata) begins in the
    shard (equal to ``position`` except in an append's tail file, which starts at the
    shard's committed end). Returns the file's length.
    """
    body = meta.encode()
    at = metadata_offset + len(region)
    tail = region + body + Trailer(at, len(body), checksum(body)).encode()
    pwrite_all(fd, tail, position)
    os.ftruncate(fd, position + len(tail))
    os.fsync(fd)
    return position + len(tail)


def pwrite_all(fd: int, data: bytes, position: int) -> None:
    """``pwrite`` all of ``data`` at ``position``, resuming after short writes."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view, position = view[n:], position + n


def _writev_all(fd: int, buffers: list[Any]) -> None:
    """``writev`` every buffer, in ``IOV_MAX`` groups, resuming after short writes."""
    i = 0
    while i < len(buffers):
        group = buffers[i : i + _IOV_MAX]
        want = sum(len(b) for b in group)
        done = os.writev(fd, group)
        if done < want:  # short write (a signal, a full disk on the next call): finish it
            for buf in group:
                if done >= len(buf):
                    done -= len(buf)
                    continue
                view = memoryview(buf)[done:]
                while view:
                    view = view[os.write(fd, view) :]
                done = 0
        i += _IOV_MAX


class ShardOutput:
    """The partial file of one shard being written (see the module docstring).

    ``base_length`` None: a new shard (the header is written now). Otherwise the file is
    an append's tail whose byte 0 lands at ``base_length`` in the shard.
    """

    def __init__(self, partial: Path, base_length: int | None = None):
        self.partial = partial
        self.base_length = base_length
        self._fd: int | None = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._start = 0 if base_length is None else base_length
        self.offset = self._start
        self._unsynced = 0
        self._sync: Future[None] | None = None
        self._write: Future[None] | None = None
        self._direct = (
            DirectStream.open(partial, self._fd) if DIRECT_WRITES and DIRECT_AFTER == 0 else None
        )
        self._may_go_direct = DIRECT_WRITES and self._direct is None
        if base_length is None:
            try:
                if self._direct is not None:
                    self._direct.write([encode_header()])
                else:
                    _writev_all(self._fd, [encode_header()])
            except BaseException:
                self.abort()
                raise
            self.offset = HEADER_SIZE

    def write_page(self, chunks: Sequence[tuple[Sequence[Any], int]]) -> np.ndarray:
        """Write one page's chunks (each: buffers, their total length) at aligned offsets.

        Returns each chunk's offset in the shard (the page's directory entries need them).
        """
        fd = self._need_fd()
        buffers: list[Any] = []
        offsets = np.empty(len(chunks), dtype=np.int64)
        pos = self.offset
        for i, (parts, length) in enumerate(chunks):
            start = align(pos)
            if start > pos:
                buffers.append(_ZEROS[: start - pos])
            buffers.extend(parts)
            offsets[i] = start
            pos = start + length
        self._wait_for_write()  # the page before is in the file (or its error raised here)
        if self._unsynced >= SYNC_EVERY and (self._sync is None or self._sync.done()):
            self._sync = process_thread("mrecord-fsync").submit(os.fdatasync, fd)
            self._unsynced = 0
        self._emit(fd, buffers)
        self._unsynced += pos - self.offset
        self.offset = pos
        return offsets

    def _emit(self, fd: int, buffers: list[Any]) -> None:
        """Append ``buffers`` to the file: copied into the direct stream, or one
        ``writev`` on the writer thread (the buffers must then stay unchanged until the
        next call waits for it). Once ``DIRECT_AFTER`` bytes are in the file, the rest
        goes direct (where the file system allows)."""
        position = self.offset - self._start  # where these buffers start in the file
        if self._may_go_direct and position >= DIRECT_AFTER:
            self._may_go_direct = False  # one try: a refusal stays a refusal
            self._wait_for_write()
            self._direct = _direct_from(self.partial, fd, position)
        if self._direct is not None:
            self._direct.write(buffers)
        else:
            self._write = process_thread("mrecord-write").submit(_writev_all, fd, buffers)

    def finish(self, meta: ShardMetadata, region: bytes = b"") -> None:
        """Write the head index ``region``, ``meta`` and the trailer after the pages,
        fsync, close."""
        fd = self._need_fd()
        self._wait_for_write()
        self._wait_for_sync()
        if self._direct is not None:
            self._direct.flush()
            self._direct.close()
            self._direct = None
        metadata_offset = self.offset
        end = write_tail(fd, metadata_offset - self._start, metadata_offset, meta, region)
        self.offset = end + self._start
        self._fd = None
        os.close(fd)

    def sync(self) -> int:
        """Make every page written so far durable (``fdatasync``); returns the file's length."""
        fd = self._need_fd()
        self._wait_for_write()
        self._wait_for_sync()
        if self._direct is not None:
            self._direct.flush()
        os.fdatasync(fd)
        self._unsynced = 0
        return self.offset - self._start

    def adopt(self, source: Path, length: int) -> None:
        """Continue from ``source``'s first ``length`` bytes instead of what was written.

        ``source`` (pages written and made durable by an earlier run of the same writer,
        e.g. a resumed conversion's checkpoint) is hard-linked as the partial file, cut
        to ``length``; the next page goes after it. Only for a new shard (no tail).
        """
        fd = self._need_fd()
        self._wait_for_write()
        self._wait_for_sync()
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        self._fd = None
        os.close(fd)
        self.partial.unlink(missing_ok=True)
        os.link(source, self.partial)
        self._fd = os.open(self.partial, os.O_WRONLY)
        os.ftruncate(self._fd, length)
        os.lseek(self._fd, length, os.SEEK_SET)
        self.offset = length
        self._unsynced = 0
        self._may_go_direct = DIRECT_WRITES  # from DIRECT_AFTER on, as for a new file

    @property
    def tail_length(self) -> int:
        """Bytes this output adds after the committed end (the whole file when new)."""
        return self.offset - (self.base_length or 0)

    def abort(self) -> None:
        """Close and delete the partial file (errors ignored: it is being thrown away)."""
        if self._direct is not None:
            direct, self._direct = self._direct, None
            direct.close()
        with contextlib.suppress(OSError):
            self._wait_for_write()
        with contextlib.suppress(OSError):
            self._wait_for_sync()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):  # a vanished or read-only folder: nothing to remove
            self.partial.unlink(missing_ok=True)

    def _need_fd(self) -> int:
        if self._fd is None:
            raise WriterStateError(f"shard output {str(self.partial)!r} is closed")
        return self._fd

    def _wait_for_write(self) -> None:
        if self._write is not None:
            write, self._write = self._write, None
            write.result()

    def _wait_for_sync(self) -> None:
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.result()


def _direct_from(path: Path, fd: int, length: int) -> DirectStream | None:
    """A direct stream that goes on after the first ``length`` bytes of ``path`` (the
    block they end in is read back and staged, to be rewritten whole)."""
    at = length - length % BLOCK
    with open(path, "rb", buffering=0) as f:
        f.seek(at)
        head = f.read(length - at)
    return DirectStream.open(path, fd, at, head)


@dataclass(frozen=True)
class PageRun:
    """Pages ``start:stop`` of the finished shard file ``path`` (metadata ``meta``)."""

    path: Path
    meta: ShardMetadata
    start: int
    stop: int


def assemble_shard(target: Path, runs: Sequence[PageRun], template: ShardMetadata) -> ShardMetadata:
    """Write the shard ``target`` from page ``runs`` of finished shards; fsync; its metadata.

    ``template`` carries the dataset's identity (id, names, index, generation); its page
    directory and row count are replaced by the assembled ones. A single run that is a
    whole file is renamed onto ``target`` and only its metadata and trailer rewritten;
    otherwise each run's page bytes are copied (``copy_file_range``: in the kernel, or a
    reflink on file systems that have them) to a 64-byte boundary of ``target``.
    """
    if len(runs) == 1 and runs[0].start == 0 and runs[0].stop == runs[0].meta.num_pages:
        meta = runs[0].meta
        os.replace(runs[0].path, target)
        fd = os.open(target, os.O_RDWR)
        try:
            final = template.with_pages(
                meta.page_rows, meta.chunks, num_rows=meta.num_rows, head_index=meta.head_index
            )
            # The file's head index region stays where it is, after the pages.
            end = max([_pages_end(meta.chunks)] + [e.offset + e.length for e in meta.head_index])
            write_tail(fd, end, end, final)
        finally:
            os.close(fd)
        return final
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, encode_header(), 0)
        pos = HEADER_SIZE
        page_rows: list[np.ndarray] = []
        chunks: list[np.ndarray] = []
        heads = HeadRegion()
        for run in runs:
            block = run.meta.chunks[run.start : run.stop]
            src_start = _pages_start(block, run.meta.page_rows[run.start : run.stop])
            src_end = _pages_end(block)
            dst = align(pos)
            if dst > pos:
                pwrite_all(fd, _ZEROS[: dst - pos], pos)
            _copy_file(run.path, src_start, src_end - src_start, fd, dst)
            moved = block.copy()
            moved["offset"] = (block["offset"].astype(np.int64) + (dst - src_start)).astype("<u8")
            chunks.append(moved)
            page_rows.append(run.meta.page_rows[run.start : run.stop])
            pos = dst + (src_end - src_start)
            heads.extend(
                read_head_region(
                    run.path, template.schema, run.meta.page_rows[run.start : run.stop], block
                )
            )
        n_fields = len(template.schema.fields)
        all_rows = np.concatenate(page_rows).astype("<u4") if page_rows else np.zeros(0, "<u4")
        all_chunks = (
            np.concatenate(chunks) if chunks else np.zeros((0, n_fields), dtype=CHUNK_DTYPE)
        )
        region = heads.join()
        final = template.with_pages(
            all_rows,
            all_chunks.reshape(len(all_rows), n_fields),
            num_rows=int(all_rows.sum()),
            head_index=(HeadRegion.entry(0, pos, region),) if region else (),
        )
        write_tail(fd, pos, pos, final, region)
    finally:
        os.close(fd)
    return final


def _pages_start(chunks: np.ndarray, page_rows: np.ndarray) -> int:
    """Where the bytes of pages (``chunks``, ``page_rows``) begin: their first chunk, or
    the value table before it (``mrecord.format.value_crcs``; a multiple of 64 either
    way, so the copied chunks keep their alignment)."""
    tables = (chunks["flags"] & FLAG_VALUE_CRCS) != 0
    prefixes = np.array([prefix_length(n) for n in page_rows.tolist()], dtype=np.int64)
    before = np.where(tables, prefixes.reshape(-1, 1), 0)
    return int((chunks["offset"].astype(np.int64) - before).min())


def _pages_end(chunks: np.ndarray) -> int:
    if not chunks.size:
        return HEADER_SIZE
    flat = chunks.reshape(-1)
    return int((flat["offset"].astype(np.int64) + flat["length"].astype(np.int64)).max())


def _copy_file(src: Path, offset: int, count: int, dst_fd: int, dst_offset: int) -> None:
    """Copy ``count`` bytes of ``src`` from ``offset`` into ``dst_fd`` at ``dst_offset``."""
    src_fd = os.open(src, os.O_RDONLY)
    try:
        done = 0
        while done < count:
            step = min(count - done, _COPY_STEP)
            done += copy_range(src_fd, dst_fd, offset + done, dst_offset + done, step)
    finally:
        with contextlib.suppress(OSError):
            os.close(src_fd)
