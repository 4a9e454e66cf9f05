"""Turning the parts written by Ray's write tasks into the shard files of one dataset.

Each write task leaves one *part*: a complete shard file (header, pages, metadata,
trailer) under a staging name, whose metadata is a placeholder. On the driver,
:func:`plan_shards` maps the parts' pages to the dataset's shards and
:func:`assemble_shard` builds each shard's partial file (``<final>.mrecord-partial``)
from them; the storage layer's commit
(:func:`mrecord.storage.commit.write_journal_and_publish`) then publishes every shard and
``.db`` at once.

Pages are never re-encoded: their bytes (and checksums) move as they are.

- ``shard_num=None``: one shard per non-empty part. The part file is renamed onto the
  shard's partial name and only its metadata and trailer are rewritten (no data copied).
- ``shard_num=k``: the pages of all parts, in task order, are cut into ``k`` contiguous
  runs of about equal row counts (whole pages, so shards differ by at most a page's rows);
  each shard's page bytes are copied into it (``copy_file_range``: in the kernel, or a
  reflink on filesystems that have them).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.format.compression import checksum
from mrecord.format.layout import HEADER_SIZE, Trailer, align, encode_header
from mrecord.format.metadata import CHUNK_DTYPE, ShardMetadata

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "Piece",
    "assemble_shard",
    "plan_shards",
    "shard_count_for_size",
    "shard_index_values",
]

DEFAULT_SHARD_SIZE = 256 << 20
"""The target shard size (bytes of pages) that picks the shard count when none is given.

Big enough that a dataset of a few GB has a handful of files (each with its ``.db``),
small enough that a large one has many shards for file-level shuffles and for ranks
and Ray read tasks to divide.
"""

_COPY_STEP = 64 << 20


@dataclass(frozen=True)
class Piece:
    """Pages ``start:stop`` of part ``part``, placed in a shard."""

    part: int
    start: int
    stop: int


def plan_shards(page_rows: list[np.ndarray], shard_num: int | None) -> list[list[Piece]]:
    """The pieces of every shard, in shard order (see the module docstring).

    ``page_rows[i]`` holds the rows of each page of part ``i``. Every page lands in
    exactly one shard, in part-then-page order, so global row order is task order.
    """
    if shard_num is None:
        whole = [[Piece(i, 0, len(rows))] for i, rows in enumerate(page_rows) if int(rows.sum())]
        return whole or [[]]
    empty = np.zeros(0, dtype=np.int64)
    flat_part = np.concatenate(
        [empty, *(np.full(len(rows), i, dtype=np.int64) for i, rows in enumerate(page_rows))]
    )
    flat_page = np.concatenate(
        [empty, *(np.arange(len(rows), dtype=np.int64) for rows in page_rows)]
    )
    rows = np.concatenate([empty, *(r.astype(np.int64) for r in page_rows)])
    total = int(rows.sum())
    mids = np.cumsum(rows) - rows / 2.0
    shard_of = (
        np.minimum(shard_num - 1, (mids * shard_num // max(total, 1)).astype(np.int64))
        if total
        else np.zeros(len(rows), dtype=np.int64)
    )
    plan: list[list[Piece]] = [[] for _ in range(shard_num)]
    start = 0
    for i in range(1, len(rows) + 1):
        if (
            i == len(rows)
            or shard_of[i] != shard_of[start]
            or flat_part[i] != flat_part[start]
            or flat_page[i] != flat_page[i - 1] + 1
        ):
            part = int(flat_part[start])
            plan[int(shard_of[start])].append(
                Piece(part, int(flat_page[start]), int(flat_page[i - 1]) + 1)
            )
            start = i
    return plan


def shard_count_for_size(part_bytes: list[int], shard_size: int, most: int) -> int:
    """How many shards of about ``shard_size`` bytes hold parts of ``part_bytes`` bytes.

    ``ceil(total / shard_size)``, at least 1 and at most ``most``: 1000 small rows are one
    shard however many blocks Ray cut them into.
    """
    total = sum(part_bytes)
    return max(1, min(most, -(-total // shard_size)))


def shard_index_values(
    pieces: list[Piece], metas: list[ShardMetadata], index_values: list[dict[str, Any]]
) -> dict[str, np.ndarray | list[Any]]:
    """The index-field values of a shard's rows: the parts' values cut like their pages."""
    out: dict[str, np.ndarray | list[Any]] = {}
    if not pieces:
        return out
    for name in index_values[pieces[0].part]:
        cut: list[Any] = []
        for piece in pieces:
            starts = np.concatenate([[0], np.cumsum(metas[piece.part].page_rows, dtype=np.int64)])
            values = index_values[piece.part][name]
            cut.append(values[int(starts[piece.start]) : int(starts[piece.stop])])
        if cut and all(isinstance(c, np.ndarray) for c in cut):
            out[name] = np.concatenate(cut)
        else:
            out[name] = [v for c in cut for v in c]
    return out


def assemble_shard(
    target: Path,
    pieces: list[Piece],
    parts: list[Path],
    metas: list[ShardMetadata],
    template: ShardMetadata,
) -> ShardMetadata:
    """Write the shard ``target`` from ``pieces`` of the parts; fsync; return its metadata.

    ``template`` carries the dataset's identity (id, names, index, generation); its page
    directory and row count are replaced by the assembled ones.
    """
    if (
        len(pieces) == 1
        and pieces[0].start == 0
        and pieces[0].stop == metas[pieces[0].part].num_pages
    ):
        meta = metas[pieces[0].part]
        os.replace(parts[pieces[0].part], target)
        fd = os.open(target, os.O_RDWR)
        try:
            final = template.with_pages(meta.page_rows, meta.chunks, num_rows=meta.num_rows)
            _write_tail(fd, _pages_end(meta.chunks), final)
        finally:
            os.close(fd)
        return final
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, encode_header(), 0)
        pos = HEADER_SIZE
        page_rows: list[np.ndarray] = []
        chunks: list[np.ndarray] = []
        for piece in pieces:
            meta = metas[piece.part]
            block = meta.chunks[piece.start : piece.stop]
            src_start = int(block["offset"].min())
            src_end = _pages_end(block)
            dst = align(pos)
            if dst > pos:
                os.pwrite(fd, b"\x00" * (dst - pos), pos)
            _copy_range(parts[piece.part], src_start, src_end - src_start, fd, dst)
            moved = block.copy()
            moved["offset"] = (block["offset"].astype(np.int64) + (dst - src_start)).astype("<u8")
            chunks.append(moved)
            page_rows.append(meta.page_rows[piece.start : piece.stop])
            pos = dst + (src_end - src_start)
        n_fields = len(template.schema.fields)
        all_rows = np.concatenate(page_rows).astype("<u4") if page_rows else np.zeros(0, "<u4")
        all_chunks = (
            np.concatenate(chunks) if chunks else np.zeros((0, n_fields), dtype=CHUNK_DTYPE)
        )
        final = template.with_pages(
            all_rows, all_chunks.reshape(len(all_rows), n_fields), num_rows=int(all_rows.sum())
        )
        _write_tail(fd, pos, final)
    finally:
        os.close(fd)
    return final


def _pages_end(chunks: np.ndarray) -> int:
    if not chunks.size:
        return HEADER_SIZE
    flat = chunks.reshape(-1)
    return int((flat["offset"].astype(np.int64) + flat["length"].astype(np.int64)).max())


def _write_tail(fd: int, pages_end: int, meta: ShardMetadata) -> None:
    """Write ``meta`` and the trailer right after the pages, cut the rest, fsync."""
    body = meta.encode()
    tail = body + Trailer(pages_end, len(body), checksum(body)).encode()
    os.pwrite(fd, tail, pages_end)
    os.ftruncate(fd, pages_end + len(tail))
    os.fsync(fd)


def _copy_range(src: Path, offset: int, count: int, dst_fd: int, dst_offset: int) -> None:
    """Copy ``count`` bytes of ``src`` from ``offset`` into ``dst_fd`` at ``dst_offset``."""
    src_fd = os.open(src, os.O_RDONLY)
    try:
        done = 0
        copy = getattr(os, "copy_file_range", None)
        while done < count and copy is not None:
            try:
                n = copy(src_fd, dst_fd, count - done, offset + done, dst_offset + done)
            except OSError:
                break  # not supported here (another filesystem, old kernel): plain copy
            if n == 0:
                break
            done += n
        while done < count:
            data = os.pread(src_fd, min(_COPY_STEP, count - done), offset + done)
            if not data:
                raise OSError(f"{str(src)!r} ended while copying its pages")
            os.pwrite(dst_fd, data, dst_offset + done)
            done += len(data)
    finally:
        with contextlib.suppress(OSError):
            os.close(src_fd)
