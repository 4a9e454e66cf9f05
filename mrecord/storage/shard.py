"""One shard file opened for reading: mmap, metadata, and checked access to chunks.

Checksum policy (``verify``):

- ``"once"`` (default): a chunk's CRC-32C is checked the first time this process
  reads it; later reads of the same chunk skip the check, in this reader and in every
  other reader of the same committed file (:mod:`mrecord.storage.verified`). Random
  access then costs one checksum pass over the data per process, not one per row or
  per reader.
- ``"always"``: check on every read of a chunk.
- ``"never"``: trust the bytes (structural checks still run).

Compressed chunks are decompressed into a small LRU cache.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import (
    ChecksumError,
    ChunkFormatError,
    CorruptFileError,
    DatasetNotFoundError,
    DecompressionError,
    LayoutError,
    MetadataError,
    NotAnMrecordFileError,
)
from mrecord.format.chunks import DecodedVarChunk, decode_fixed, decode_var
from mrecord.format.compression import CODEC_IDS, checksum, decompress
from mrecord.format.layout import (
    HEADER_SIZE,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    Trailer,
    describe_foreign,
    parse_header,
)
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import Field, FieldKind
from mrecord.storage.failures import storage_error, unreadable_error
from mrecord.storage.verified import FileKey, file_key, shared_heads, shared_verified
from mrecord.storage.verify_ahead import VerifyAhead

__all__ = ["VERIFY_POLICIES", "ShardFile", "read_shard_metadata"]

VERIFY_POLICIES = ("once", "always", "never")
DEFAULT_MAX_CHUNK_BYTES = int(os.environ.get("MRECORD_MAX_CHUNK_BYTES", str(2 << 30)))
_CACHE_BYTES = 64 << 20
_CODEC_NONE = CODEC_IDS["none"]
# Non-blocking (a FIFO where a shard belongs must not block open) and close-on-exec;
# both are POSIX flags, absent on Windows, where there are no FIFOs to open.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_shard_metadata(path: Path) -> ShardMetadata:
    """Read and validate just the metadata of a shard file."""
    with ShardFile(path, verify="never") as shard:
        return shard.meta


def open_regular_file(path: Path) -> int:
    """A read-only descriptor of the regular file ``path``; a typed error for anything else.

    Opened non-blocking: a FIFO standing where a shard belongs would block ``open`` until
    a writer came (forever). Folders and missing files (also a symbolic link that loops or
    dangles) are :class:`DatasetNotFoundError`, other non-regular files
    :class:`NotAnMrecordFileError`, a file this user may not read
    :class:`~mrecord.errors.UnreadableFileError`, and another ``OSError`` (I/O) a
    :class:`~mrecord.errors.StorageError` naming the file and what to do.
    """
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    except FileNotFoundError:
        raise DatasetNotFoundError(f"data file {where!r} does not exist") from None
    except IsADirectoryError:
        raise DatasetNotFoundError(f"{where!r} is a folder, not a data file") from None
    except PermissionError as exc:  # not the machine failing: this user may not read it
        raise unreadable_error(exc, "data file", where) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DatasetNotFoundError(
                f"data file {where!r} is a symbolic link that loops; point it at the shard"
            ) from None
        raise storage_error(
            exc, operation="read data file", path=where, state="nothing was changed"
        ) from exc
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise DatasetNotFoundError(f"{where!r} is a folder, not a data file")
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise NotAnMrecordFileError(
            f"{where!r} is not an mrecord file ({kind}, not a regular file); a shard file "
            "belongs there",
            path=where,
            offset=0,
        )
    return fd


class ShardFile:
    """A committed shard, memory-mapped read-only."""

    _mm: mmap.mmap  # the file's bytes (mrecord.remote's range-read subclass puts its own)
    _trailer: Trailer

    def __init__(
        self, path: Path, verify: str = "once", max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
    ):
        if verify not in VERIFY_POLICIES:
            raise ValueError(f"verify must be one of {VERIFY_POLICIES}, got {verify!r}")
        self.path = Path(path)
        self.verify = verify
        self.max_chunk_bytes = max_chunk_bytes
        self._stat: os.stat_result | None = None  # set by _open_bytes for a local file
        self.size, self._mm = self._open_bytes()
        try:
            self.meta = self._parse()
        except BaseException:
            self._mm.close()
            raise
        self.page_starts = np.zeros(self.meta.num_pages + 1, dtype=np.int64)
        np.cumsum(self.meta.page_rows, out=self.page_starts[1:])
        self.page_starts_list: list[int] = self.page_starts.tolist()
        # Shared with every reader of these same committed bytes in this process.
        self._verified = shared_verified(self._file_key(), self.meta.chunks.shape)
        # Local files under "once": a background thread checksums ahead of the readers.
        self._ahead = (
            VerifyAhead(self._verified, self._chunk_intact)
            if verify == "once" and self._stat is not None
            else None
        )
        # The chunk directory as Python lists: per-row reads index it without numpy overhead.
        chunks = self.meta.chunks
        self._offsets: list[list[int]] = chunks["offset"].tolist()
        self._lengths: list[list[int]] = chunks["length"].tolist()
        self._raw_lengths: list[list[int]] = chunks["raw_length"].tolist()
        self._crcs: list[list[int]] = chunks["crc32"].tolist()
        self._codecs: list[list[int]] = chunks["codec"].tolist()
        self._page_rows_list: list[int] = self.meta.page_rows.tolist()
        self._memory = self._bytes_view()
        self._file_bytes: np.ndarray | None = None
        self._cache: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._cache_bytes = 0
        # Parsed heads of variable-size chunks, shared like the verified record.
        self._heads = shared_heads(self._file_key())
        self._lock = threading.Lock()
        self._field_index = {f.name: i for i, f in enumerate(self.meta.schema.fields)}

    def _open_bytes(self) -> tuple[int, Any]:
        """(size, the file's bytes): a read-only memory map. A subclass may serve the bytes
        another way (``mrecord.remote`` reads them with range requests)."""
        fd = open_regular_file(self.path)
        try:
            self._stat = os.fstat(fd)
            size = self._stat.st_size
            tail = os.pread(fd, len(TRAILER_MAGIC), max(size - len(TRAILER_MAGIC), 0))
            foreign = describe_foreign(os.pread(fd, HEADER_SIZE, 0), tail)
            if foreign is not None:
                raise NotAnMrecordFileError(
                    f"{str(self.path)!r} is not an mrecord file ({foreign})",
                    path=str(self.path),
                    offset=0,
                )
            if size < HEADER_SIZE + TRAILER_SIZE:
                raise CorruptFileError(
                    f"{str(self.path)!r} is {size} bytes, too short to be an mrecord shard "
                    "(truncated, or not committed)",
                    path=str(self.path),
                    offset=0,
                )
            # Map exactly the length seen: an append may be growing the file right now,
            # and this shard's snapshot ends where its trailer was when we looked.
            return size, mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def _file_key(self) -> FileKey | None:
        """This committed state's key in the process-wide verified record (None: not a
        local file, keep a private record)."""
        if self._stat is None:
            return None
        return file_key(self._stat, self._trailer.metadata_offset, self._trailer.metadata_crc32)

    def _bytes_view(self) -> Any:
        """What chunk reads slice: a memoryview of the map (slices copy nothing)."""
        return memoryview(self._mm)

    def _parse(self) -> ShardMetadata:
        mm = self._mm
        try:
            parse_header(mm[:HEADER_SIZE])
            trailer = Trailer.parse(mm[self.size - TRAILER_SIZE :], self.size)
            self._trailer = trailer
        except LayoutError as exc:
            raise CorruptFileError(f"{str(self.path)!r}: {exc}", path=str(self.path)) from exc
        body = mm[trailer.metadata_offset : trailer.metadata_offset + trailer.metadata_length]
        if checksum(body) != trailer.metadata_crc32:
            raise ChecksumError(
                f"{str(self.path)!r}: metadata checksum mismatch at byte "
                f"{trailer.metadata_offset}; "
                "the file is damaged",
                path=str(self.path),
                offset=trailer.metadata_offset,
            )
        try:
            return ShardMetadata.decode(body, trailer.metadata_offset)
        except MetadataError as exc:
            raise CorruptFileError(
                f"{str(self.path)!r}: metadata at byte {trailer.metadata_offset}: {exc}",
                path=str(self.path),
                offset=trailer.metadata_offset,
            ) from exc

    # -- chunk access ---------------------------------------------------------------------

    @property
    def mm(self) -> mmap.mmap:
        """The read-only memory map of the whole file."""
        return self._mm

    def field_index(self, name: str) -> int:
        """Position of field ``name`` in the schema."""
        return self._field_index[name]

    def will_need(self, ranges: Sequence[tuple[int, int]]) -> None:
        """These (offset, length) byte ranges of this file will be read soon, in this
        order; may be ignored."""

    def check_chunk(self, page: int, col: int) -> None:
        """Verify the checksum of chunk (page, col) according to the policy."""
        if self.verify == "never" or (self.verify == "once" and self._verified[page, col]):
            return
        if not self._chunk_intact(page, col):
            offset, length = self._offsets[page][col], self._lengths[page][col]
            field = self.meta.schema.fields[col].name
            raise ChecksumError(
                f"{str(self.path)!r}: checksum mismatch in page {page}, field {field!r}, "
                f"bytes {offset}..{offset + length}; the file is damaged "
                "(`mrecord verify` lists every damaged page)",
                path=str(self.path),
                page=page,
                offset=offset,
            )
        if self.verify == "once" and not self._verified[page, col]:
            self._verified[page, col] = True
            if self._ahead is not None:
                self._ahead.note_cold_check(page, col)

    def _chunk_intact(self, page: int, col: int) -> bool:
        """Whether chunk (page, col)'s stored bytes match their CRC-32C (never raises)."""
        offset, length = self._offsets[page][col], self._lengths[page][col]
        return bool(checksum(self._memory[offset : offset + length]) == self._crcs[page][col])

    def check_chunks(self, pages: np.ndarray, col: int) -> None:
        """Verify many chunks of one column; cheap once they are all verified."""
        if self.verify == "never":
            return
        pending = pages[~self._verified[pages, col]] if self.verify == "once" else pages
        for page in pending.tolist():
            self.check_chunk(page, col)

    def all_verified(self, col: int) -> bool:
        """True when no read of column ``col`` needs a checksum any more (policy ``never``,
        or ``once`` with every chunk of the column checked)."""
        if self.verify == "never":
            return True
        return self.verify == "once" and bool(self._verified[:, col].all())

    def raw_chunk(self, page: int, col: int) -> Any:
        """The raw (decompressed) bytes of a chunk: a memoryview of the map when uncompressed."""
        self.check_chunk(page, col)
        offset, length = self._offsets[page][col], self._lengths[page][col]
        stored = self._memory[offset : offset + length]
        codec = self._codecs[page][col]
        raw_length = self._raw_lengths[page][col]
        if codec == _CODEC_NONE:
            if length != raw_length:
                raise self._corrupt(page, col, offset, "stored and raw lengths differ")
            return stored
        key = (page, col)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        try:
            raw = decompress(stored, codec, raw_length, self.max_chunk_bytes)
        except DecompressionError as exc:
            raise self._corrupt(page, col, offset, str(exc)) from exc
        with self._lock:
            self._cache[key] = raw
            self._cache_bytes += len(raw)
            while self._cache_bytes > _CACHE_BYTES and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= len(old)
        return raw

    def uncompressed_offset(self, page: int, col: int) -> int | None:
        """The file offset of chunk (page, col) when it is stored uncompressed in a local
        file's map (its bytes are the raw bytes), else None."""
        if self._codecs[page][col] != _CODEC_NONE or not isinstance(self._mm, mmap.mmap):
            return None
        return self._offsets[page][col]

    def open_mapped_file(self) -> int | None:
        """A new read-only descriptor of the file this shard mapped (the caller closes
        it), or None: not a local file, or its path now names another file (replaced)
        or a shorter one."""
        if self._stat is None:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | _NONBLOCK)
        except OSError:
            return None
        now = os.fstat(fd)
        same = (now.st_dev, now.st_ino) == (self._stat.st_dev, self._stat.st_ino)
        if not same or now.st_size < self.size:
            os.close(fd)
            return None
        return fd

    @property
    def file_bytes(self) -> np.ndarray:
        """The whole file as a read-only ``uint8`` array viewing the map (local files)."""
        view = self._file_bytes
        if view is None:
            view = self._file_bytes = np.frombuffer(self._mm, dtype=np.uint8)
        return view

    def fixed_page(self, page: int, field: Field) -> np.ndarray:
        """A FIXED column of one page as an array ``(rows, *shape)`` (a view when uncompressed)."""
        col = self._field_index[field.name]
        raw = self.raw_chunk(page, col)
        try:
            return decode_fixed(field, raw, self._page_rows_list[page])
        except ChunkFormatError as exc:
            raise self._corrupt(
                page, col, int(self.meta.chunks[page, col]["offset"]), str(exc)
            ) from exc

    def var_page(self, page: int, field: Field) -> tuple[DecodedVarChunk, Any]:
        """The parsed head and raw bytes of a variable-size chunk."""
        col = self._field_index[field.name]
        raw = self.raw_chunk(page, col)
        key = (page, col)
        head = self._heads.get(key)
        if head is None:
            try:
                head = decode_var(field, raw, self._page_rows_list[page])
            except ChunkFormatError as exc:
                offset = int(self.meta.chunks[page, col]["offset"])
                raise self._corrupt(page, col, offset, str(exc)) from exc
            if head.shapes is not None:  # a view of this reader's map: keep a copy
                head = DecodedVarChunk(head.offsets, head.shapes.copy(), head.data_start)
            self._heads.put(key, head)
        return head, raw

    def uncompressed_fixed(self, field: Field) -> bool:
        """True when every chunk of a FIXED field is stored uncompressed (global gathers apply)."""
        col = self._field_index[field.name]
        return field.kind is FieldKind.FIXED and bool(
            np.all(self.meta.chunks[:, col]["codec"] == CODEC_IDS["none"])
        )

    def _corrupt(self, page: int, col: int, offset: int, why: str) -> CorruptFileError:
        field = self.meta.schema.fields[col].name
        return CorruptFileError(
            f"{str(self.path)!r}: page {page}, field {field!r} at byte {offset}: {why}",
            path=str(self.path),
            page=page,
            offset=offset,
        )

    def close(self) -> None:
        """Release the map (arrays still viewing it keep it alive until they go)."""
        if self._ahead is not None:
            self._ahead.stop()  # before the map goes: the thread reads it
        self._cache.clear()
        self._file_bytes = None  # our own view of the map must not keep it open
        # numpy views may still reference the map; then it is freed with them.
        with contextlib.suppress(BufferError):
            self._memory.release()
            self._mm.close()

    def __enter__(self) -> ShardFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
