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
    ArgumentError,
    ChecksumError,
    ChunkFormatError,
    CorruptFileError,
    DatasetNotFoundError,
    DecompressionError,
    LayoutError,
    MetadataError,
    NotAnMrecordFileError,
)
from mrecord.format.chunks import DecodedVarChunk, decode_fixed, decode_var, kept_shapes
from mrecord.format.compression import (
    CODEC_IDS,
    checksum,
    checksum_releasing,
    checksums,
    decompress,
)
from mrecord.format.head_index import head_length, region_starts
from mrecord.format.ids import sorted_unique
from mrecord.format.indexed_heads import parse_heads
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
from mrecord.format.shape_groups import stable_order
from mrecord.format.value_crcs import FLAG_VALUE_CRCS, checked_value_crcs, table_length
from mrecord.storage.descriptors import give_back_optional, take_optional
from mrecord.storage.failures import read_failure, storage_error, unreadable_error
from mrecord.storage.value_index import ValueIndex, build_value_index
from mrecord.storage.verified import FileKey, file_key, shared_heads, shared_verified
from mrecord.storage.verify_ahead import VerifyAhead

__all__ = [
    "VERIFY_POLICIES",
    "ShardFile",
    "locate_rows",
    "read_shard_metadata",
    "rows_by_page",
    "uniform_page_rows",
]

VERIFY_POLICIES = ("once", "always", "never")
DEFAULT_MAX_CHUNK_BYTES = int(os.environ.get("MRECORD_MAX_CHUNK_BYTES", str(2 << 30)))
_CACHE_BYTES = 64 << 20
_CODEC_NONE = CODEC_IDS["none"]
_BATCH_PARSE_MIN = 8
"""Heads a ``parse_indexed`` call takes from the head index as one array from (fewer: one
at a time, where the array's fixed costs would be most of the work)."""
BY_VALUE_MIN_BYTES = 32 << 10
"""Values at least this long on average are checked one by one when found in memory
(:meth:`ShardFile.checks_by_value`)."""
# Non-blocking (a FIFO where a shard belongs must not block open) and close-on-exec;
# both are POSIX flags, absent on Windows, where there are no FIFOs to open.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


_local = threading.local()


_PIECE = 256 << 10
_WILL_NEED: int | None = getattr(os, "POSIX_FADV_WILLNEED", None)  # not on macOS


def _pread_checksum(fd: int, offset: int, length: int) -> int | None:
    """CRC-32C of file bytes ``offset:offset + length``, read in 256 KiB pieces into this
    thread's reused buffer (no fresh memory per chunk); None when the file is shorter."""
    buffer: bytearray | None = getattr(_local, "buffer", None)
    if buffer is None:
        buffer = _local.buffer = bytearray(_PIECE)
    view = memoryview(buffer)
    if length > _PIECE and _WILL_NEED is not None:
        # One request for the whole chunk (up to the device's largest), not one per
        # piece: on a hard disk's few hundred IOPS the pieces were the cost.
        os.posix_fadvise(fd, offset, length, _WILL_NEED)
    crc, done = 0, 0
    while done < length:
        n = min(_PIECE, length - done)
        if os.preadv(fd, [view[:n]], offset + done) != n:
            return None
        crc = checksum_releasing(view[:n], crc)  # each piece's CRC lets the GIL go
        done += n
    return int(crc)


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


class _IndexedHead(DecodedVarChunk):
    """A head parsed from its copy in the head index (format 1.4), not yet compared with
    the chunk's own: a read that takes the chunk whole (checked by its CRC) compares them
    once (:meth:`ShardFile.var_page`), so a copy that differs never slices intact bytes
    in the wrong places."""


def uniform_page_rows(page_rows: np.ndarray) -> int:
    """The rows of every page but the last when they are all the same (a shard of
    fixed-width rows), else 0: then a row's page is a division (:func:`locate_rows`)."""
    if not len(page_rows) or int(page_rows[0]) <= 0:
        return 0
    first = int(page_rows[0])
    return first if bool((page_rows[:-1] == first).all()) else 0


def rows_by_page(pages: np.ndarray) -> tuple[np.ndarray, list[int], list[int]]:
    """A read's rows grouped by page, ``(order, bounds, distinct)``: ``order`` sorts
    ``pages`` stably, and the positions ``order[bounds[k]:bounds[k + 1]]`` are those of
    page ``distinct[k]`` (ascending); ``pages`` not empty (every caller has a row to
    read)."""
    # numpy sorts 16-bit keys stably by radix, 64-bit ones by merging: 78 us against
    # 473 us for a read of 8,192 rows over a few hundred pages (a Shuffle.BLOCK read).
    order = stable_order(pages)
    sorted_pages = pages[order]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_pages)) + 1).tolist(), len(pages)]
    return order, bounds, sorted_pages[bounds[:-1]].tolist()


def locate_rows(
    page_starts: np.ndarray, uniform: int, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(pages, slots)`` of a shard's ``rows`` (each in ``[0, page_starts[-1])``):
    ``uniform`` (:func:`uniform_page_rows`) nonzero divides, else a search over the
    page starts (~60 ns a row; a division is ~1: a random read of 8,192 rows over
    580 pages spent 0.5 ms on the search)."""
    if uniform:
        pages = np.minimum(rows // uniform, len(page_starts) - 2)
    else:
        pages = np.searchsorted(page_starts, rows, side="right") - 1
    return pages, rows - page_starts[pages]


def _by_page(table: np.ndarray) -> list[tuple[int, ...]]:
    """A ``(pages, columns)`` table as a list of per-page tuples of ints. Tuples, not
    lists: the collector stops tracking a tuple of ints the first time it sees one, so a
    shard's directory (seven tables, a tuple a page each: ~1M objects for a 140 GB
    dataset of 1 MiB pages) is not walked again by every full collection, whose pause
    stops every reading thread (~10 ms for 44K tracked objects on this machine)."""
    return list(map(tuple, table.tolist()))


def _same_head(a: DecodedVarChunk, b: DecodedVarChunk) -> bool:
    if a.offsets != b.offsets or a.data_start != b.data_start:
        return False
    if a.shapes is None or b.shapes is None:
        return a.shapes is None and b.shapes is None
    return bool(np.array_equal(a.shapes, b.shapes))


class ShardFile:
    """A committed shard, memory-mapped read-only."""

    _mm: mmap.mmap  # the file's bytes (mrecord.remote's range-read subclass puts its own)
    _trailer: Trailer

    def __init__(
        self, path: Path, verify: str = "once", max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
    ):
        if verify not in VERIFY_POLICIES:
            raise ArgumentError(f"verify must be one of {VERIFY_POLICIES}, got {verify!r}")
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
        self.uniform_page_rows = uniform_page_rows(self.meta.page_rows)
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
        self._offsets = _by_page(chunks["offset"])
        self._lengths = _by_page(chunks["length"])
        self._raw_lengths = _by_page(chunks["raw_length"])
        self._crcs = _by_page(chunks["crc32"])
        self._codecs = _by_page(chunks["codec"])
        self._tables = _by_page(chunks["flags"] & FLAG_VALUE_CRCS)
        # Columns whose values a reader takes one by one: bytes and strings.
        self._single_values = [
            f.kind in (FieldKind.BYTES, FieldKind.STRING) for f in self.meta.schema.fields
        ]
        self._value_tables: dict[tuple[int, int], np.ndarray] = {}
        self._by_value_masks: dict[int, np.ndarray] = {}
        # Under "once": which values of a chunk with a value table were checked one by one.
        # (a byte a value: ``0 not in`` it is a C scan, where an array's all() is ~2 us a row)
        self._values_checked: dict[tuple[int, int], bytearray] = {}
        self._page_rows_list: list[int] = self.meta.page_rows.tolist()
        self._memory = self._bytes_view()
        self._file_bytes: np.ndarray | None = None
        self._cache: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._cache_bytes = 0
        # Parsed heads of variable-size chunks, shared like the verified record.
        self._heads = shared_heads(self._file_key())
        self._lock = threading.Lock()
        self._fd_lock = threading.Lock()  # opening read_fd / direct_fd
        # Variable-shape columns' value indexes (value_index), built once each.
        self._value_indexes: dict[int, ValueIndex | None] = {}
        self._index_lock = threading.Lock()
        self._field_index = {f.name: i for i, f in enumerate(self.meta.schema.fields)}
        # Set by the first will_need: an order-aware reader now says what comes, so the
        # kernel's read-around on faults (up to read_ahead_kb per fault) only costs.
        self._hinted = False
        self._col_offsets: dict[int, list[int]] = {}
        self._fd: int | None = None  # for verify_arriving's preads, opened on first use
        self._fd_tried = False
        self._direct_fd: int | None = None  # O_DIRECT reads of cold values, on first use
        self._direct_tried = False
        # The head index (format 1.4), read whole on first use: its bytes and where each
        # chunk's part starts in them (-1: not there), or None (none, or damaged).
        self._index_lock = threading.Lock()
        self._column_lock = threading.Lock()  # building an indexed column
        self._index_loaded = not self.meta.head_index
        self._index_bytes: memoryview | None = None
        self._index_starts: list[tuple[int, ...]] = []
        self._index_start_array = np.empty((0, 0), dtype=np.int64)  # the same, as an array
        self._index_columns: dict[int, np.ndarray | None] = {}

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
            if self._ahead is not None and not self._hinted:
                self._ahead.note_cold_check(page, col)

    def will_need(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Hint: these ``(offset, length)`` byte ranges of this file will be read soon, in
        this order. May be ignored; never changes what a read returns.

        A local file's map gets ``MADV_WILLNEED`` on exactly those ranges (rounded out to
        whole pages): the kernel starts reading them now, all of them at once, without
        waiting. The first hint also switches the map to ``MADV_RANDOM``: from then on a
        fault reads its own page, not megabytes of neighbours (``read_ahead_kb``) that
        would evict the rows about to be read when memory is short; what will be read is
        what is hinted. Bytes that are not a memory map (``mrecord.remote``'s range-read
        subclass) ignore the hint here; such a subclass overrides this method to fetch
        the ranges ahead its own way.
        """
        mm = self._mm
        if not isinstance(mm, mmap.mmap) or not ranges:
            return
        page_size = mmap.PAGESIZE
        try:
            self.read_randomly()
            for offset, length in ranges:
                if length <= 0 or offset >= self.size:
                    continue
                start = offset - offset % page_size
                stop = min(offset + length, self.size)
                mm.madvise(mmap.MADV_WILLNEED, start, stop - start)
        except (ValueError, OSError):
            return  # a closed map, or a kernel without the advice: hints are optional

    def read_randomly(self) -> None:
        """Advise the map ``MADV_RANDOM`` (once): a fault reads its own page, not
        megabytes of neighbours. For an order-aware reader that says what comes
        (:meth:`will_need`, which does this first), and for a cold reader that reads its
        values past the map (``pread``) and its heads from the head index: whatever
        still faults in (a label chunk checked in place) must not pull its neighbours."""
        mm = self._mm
        if self._hinted or not isinstance(mm, mmap.mmap):
            return
        self._hinted = True
        with contextlib.suppress(ValueError, OSError):  # a closed map: advice is optional
            mm.madvise(mmap.MADV_RANDOM)

    def verify_arriving(self, page: int, col: int, in_place: bool = False) -> None:
        """Checksum chunk (page, ``col``) as it comes off the disk, ahead of its readers,
        and mark it verified when intact (policy ``once``; nothing to do otherwise).

        A local file's chunk is read with one ``pread`` (one request of exactly its bytes,
        whatever the map's advice, and the bytes land in the page cache the readers map);
        other bytes, and with ``in_place`` (a small chunk whose pages were just asked for,
        or are in memory) every chunk, are sliced from the map as a read would. A damaged
        chunk is left unverified: its reader checks it again and raises
        :class:`~mrecord.errors.ChecksumError`. Never raises.
        """
        if self.verify != "once" or self._verified[page, col]:
            return
        offset, length = self._offsets[page][col], self._lengths[page][col]
        try:
            fd = None if in_place else self.read_fd()
            if fd is None:
                intact = self._chunk_intact(page, col)
            else:
                intact = _pread_checksum(fd, offset, length) == self._crcs[page][col]
        except (OSError, ValueError):
            return
        if intact:
            self._verified[page, col] = True

    def needs_check(self, page: int, col: int) -> bool:
        """Whether a read of chunk (page, ``col``) must checksum it first (the policy:
        ``always``, or ``once`` and not verified yet)."""
        if self.verify == "once":
            return not bool(self._verified[page, col])
        return self.verify == "always"

    def chunk_place(self, page: int, col: int) -> tuple[int, int, int]:
        """Chunk (page, ``col``)'s stored ``(file offset, length, CRC-32C)``."""
        return self._offsets[page][col], self._lengths[page][col], self._crcs[page][col]

    def mark_verified(self, page: int, col: int) -> None:
        """Record that chunk (page, ``col``)'s stored bytes were read and matched their
        CRC-32C (by a reader that checked them as they arrived; policy ``once`` only:
        ``always`` checks every read)."""
        if self.verify == "once":
            self._verified[page, col] = True

    def plain_var_page(self, page: int, field: Field) -> tuple[DecodedVarChunk, Any] | None:
        """The parsed head and the map's bytes of a variable-size chunk stored plain,
        **not checksummed**: for a reader that reads the values' bytes itself and checks
        the chunk as they arrive (``mrecord.storage.readahead.read_checked``), or checks
        it with :meth:`check_chunk` before touching these bytes. None when the chunk is
        compressed, not in a local map, or its head does not parse (use :meth:`var_page`,
        which checks first and reports why)."""
        col = self._field_index[field.name]
        if self.uncompressed_offset(page, col) is None:
            return None
        head = self.parse_head(page, col)
        if head is None:
            return None
        offset, length = self._offsets[page][col], self._lengths[page][col]
        return head, self._memory[offset : offset + length]

    def read_fd(self) -> int | None:
        """A descriptor of the mapped file for ``pread`` (opened once, closed with the
        shard; None: not a local file, or it was replaced). Reads through it skip the
        kernel's read-ahead: they get exactly the bytes asked."""
        fd = self._fd
        if fd is None and self._stat is not None and not self._fd_tried:
            # Under a lock: a second reading thread must wait for the descriptor being
            # opened, not take "tried" for "none" and read another way.
            with self._fd_lock:
                if not self._fd_tried:
                    fd = self._open_optional(direct=False)
                    if fd is not None and hasattr(os, "posix_fadvise"):
                        # Exactly the chunk: no kernel read-ahead of its neighbours per pread.
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                    self._fd = fd
                    self._fd_tried = True
                fd = self._fd
        return fd

    def direct_fd(self) -> int | None:
        """A descriptor of the mapped file opened with ``O_DIRECT`` (opened once, closed
        with the shard; None: not a local file, replaced, or a file system without direct
        I/O). Its reads go from the disk to the caller's page-aligned buffer: no page cache
        to fill, charge to a memory cgroup and reclaim, no copy (the cold values' path,
        ``mrecord.storage.readahead.read_direct``)."""
        fd = self._direct_fd
        if fd is None and self._stat is not None and not self._direct_tried:
            with self._fd_lock:  # as in read_fd
                if not self._direct_tried:
                    self._direct_fd = self._open_optional(direct=True)
                    self._direct_tried = True
                fd = self._direct_fd
        return fd

    def map_address(self) -> int | None:
        """The address of a local file's memory map (for ``mincore``), else None."""
        if not isinstance(self._mm, mmap.mmap) or self._mm.closed:
            return None
        return int(self.file_bytes.ctypes.data)

    def verified_chunks(self, pages: np.ndarray, col: int) -> np.ndarray:
        """Which chunks (``pages``, ``col``) need no checksum before a read (a bool array)."""
        if self.verify == "never":
            return np.ones(len(pages), dtype=bool)
        if self.verify == "always":
            return np.zeros(len(pages), dtype=bool)
        return np.asarray(self._verified[pages, col], dtype=bool)

    def cached_heads(self, col: int) -> Any:
        """``head(page)``: the parsed head of variable-size chunk (page, ``col``) when one
        is cached, else None (never reads the file)."""
        get = self._heads.get
        return lambda page: get((page, col))

    def keep_head(self, page: int, col: int, head: DecodedVarChunk) -> DecodedVarChunk:
        """Cache ``head``, parsed from the stored bytes of chunk (page, ``col``) (the map's,
        :meth:`parse_head`, or a buffer's of the reader's, ``ChunkBuffers``), for the next
        reads of the chunk; what is cached holds no view of those bytes (its shapes are
        copied, narrowed: :func:`~mrecord.format.chunks.kept_shapes`). Returns the cached
        head. A ``Shuffle.BLOCK`` window's reads come back to the same chunks: each parsed
        the head again (16 times a chunk an epoch of small variable-shape rows), a fifth of
        the reader's time."""
        shapes = head.shapes
        if shapes is not None and (shapes.base is not None or shapes.dtype.itemsize == 8):
            head = DecodedVarChunk(head.offsets, kept_shapes(shapes), head.data_start)
        self._heads.put((page, col), head)
        return head

    def head_range(self, page: int, col: int) -> tuple[int, int]:
        """The ``(offset, length)`` of the head (value offsets and shapes) of the stored,
        uncompressed variable-size chunk (page, ``col``)."""
        rows = self._page_rows_list[page]
        head = self._head_length(page, col)
        offset = self._offsets[page][col]
        if self._tables[page][col]:  # and the value table right before it
            return offset - table_length(rows), table_length(rows) + head
        return offset, head

    def _indexed(self, page: int, col: int) -> tuple[memoryview, memoryview] | None:
        """Chunk (page, ``col``)'s value table and head from the head index (format 1.4),
        or None: no table, not in the index, no index, or a damaged one."""
        if not self._tables[page][col]:
            return None
        part = self.index_part(page, col)
        if part is None:
            return None
        table = table_length(self._page_rows_list[page])
        return part[:table], part[table:]

    def index_part(self, page: int, col: int) -> memoryview | None:
        """What the head index (format 1.4; read whole the first time any part is asked
        for) holds of chunk (page, ``col``): its value table and head, or its bytes whole
        for a small chunk (``mrecord.format.head_index``); None when it holds nothing of
        it, or there is no index, or a damaged one."""
        if not self._index_loaded:
            self._load_head_index()
        data = self._index_bytes
        if data is None:
            return None
        start = self._index_starts[page][col]
        if start < 0:
            return None
        if self._tables[page][col]:
            length = table_length(self._page_rows_list[page]) + self._head_length(page, col)
        else:
            length = self._lengths[page][col]
        return data[start : start + length]

    def head_index_serves(self, col: int) -> bool:
        """Whether a cold read of column ``col`` finds everything it waits on before its
        values in the head index (format 1.4), so that asking for it ahead
        (``mrecord.storage.readahead.hint_heads``) reads nothing: a fixed-width column
        whose chunks' copies the index holds, or that this policy checks no chunk of
        ahead (not ``"once"``), or a variable-size one whose every uncompressed chunk's
        value table and head the index holds."""
        field = self.meta.schema.fields[col]
        if field.kind is FieldKind.FIXED:
            return self.verify != "once" or self.indexed_column(col) is not None
        if not self._index_loaded:
            self._load_head_index()
        if self._index_bytes is None:
            return False
        chunks = self.meta.chunks[:, col]
        held = ((chunks["flags"] & FLAG_VALUE_CRCS) != 0) & (self._index_start_array[:, col] >= 0)
        return bool(np.all(held | (chunks["codec"] != _CODEC_NONE)))

    def indexed_column(self, col: int) -> np.ndarray | None:
        """Every value of fixed-width column ``col``, in row order, from the copies of its
        chunks in the head index (format 1.4), each checked against its chunk's CRC-32C
        (a flat array of the field's dtype, ``rows × elements``; built once, kept), or
        None unless the index holds every chunk of the column intact and uncompressed.
        A cold random read then takes these values with no request of their own (an
        image's label sits in a 44-byte chunk a megabyte away from anything else read)."""
        got = self._index_columns.get(col, False)
        if got is not False:
            return got  # type: ignore[return-value]
        with self._column_lock:  # built once: a cold epoch's first blocks all want it at once
            got = self._index_columns.get(col, False)
            if got is not False:
                return got  # type: ignore[return-value]
            column = self._build_indexed_column(col)
            self._index_columns[col] = column
            return column

    def _build_indexed_column(self, col: int) -> np.ndarray | None:
        field = self.meta.schema.fields[col]
        if field.kind is not FieldKind.FIXED or not self.meta.head_index:
            return None
        if self.verify == "always":
            return None  # every read checks the file's own bytes
        chunks = self.meta.chunks[:, col]
        expected = self.meta.page_rows.astype(np.int64) * field.row_nbytes
        if not len(chunks) or bool(
            (chunks["codec"] != _CODEC_NONE).any()
            or (chunks["length"].astype(np.int64) != expected).any()
        ):
            return None
        if not self._index_loaded:
            self._load_head_index()
        data = self._index_bytes
        if data is None:
            return None
        starts = self._index_start_array[:, col]
        lengths = chunks["length"].astype(np.int64)
        if bool(
            (starts < 0).any()
            or (chunks["flags"] & FLAG_VALUE_CRCS).any()
            or (starts + lengths > len(data)).any()
        ):
            return None  # not all there: the file's chunks
        ends = (starts + lengths).tolist()
        parts = [data[a:b] for a, b in zip(starts.tolist(), ends, strict=True)]
        if checksums(parts, int(lengths.max())) != chunks["crc32"].tolist():
            return None  # a copy that differs: the file's chunks
        return np.frombuffer(b"".join(parts), dtype=field.dtype)

    def _head_length(self, page: int, col: int) -> int:
        head = head_length(self.meta.schema.fields[col], self._page_rows_list[page])
        return min(head, self._lengths[page][col])

    def _load_head_index(self) -> None:
        """Read the head index's regions (one read each) and check their CRC-32C; a
        region that differs leaves the index unused (the heads are read from the chunks,
        where they still are) and is reported by ``mrecord verify``."""
        with self._index_lock:
            if self._index_loaded:
                return
            try:
                self._index_bytes, starts = self._read_head_index()
                self._index_start_array = starts
                self._index_starts = _by_page(starts)
            except (OSError, ValueError):
                self._index_bytes = None
            self._index_loaded = True

    def _read_head_index(self) -> tuple[memoryview | None, np.ndarray]:
        meta = self.meta
        layout = region_starts(meta.schema, meta.page_rows, meta.chunks, meta.head_index)
        none = np.empty((0, 0), dtype=np.int64)
        if layout is None:
            return None, none
        starts, expected = layout
        parts: list[bytes] = []
        for entry, length in zip(meta.head_index, expected, strict=True):
            if entry.length != length:
                return None, none
            data = self.read_region(entry.offset, entry.length)
            if len(data) != length or checksum(data) != entry.crc32:
                return None, none
            parts.append(data)
        return memoryview(b"".join(parts)), np.asarray(starts, dtype=np.int64)

    def head_index_intact(self) -> bool | None:
        """Whether the head index (format 1.4) reads back intact: True, False (a region's
        length or CRC-32C is wrong), or None when the file has none."""
        if not self.meta.head_index:
            return None
        if not self._index_loaded:
            self._load_head_index()
        return self._index_bytes is not None

    def ignore_head_index(self) -> None:
        """From now on read every head from its chunk, not from the head index (for a
        check of the chunks' own tables: ``mrecord verify``)."""
        with self._index_lock:
            self._index_bytes = None
            self._index_loaded = True
        self._value_tables.clear()
        self._index_columns.clear()

    def read_region(self, offset: int, length: int) -> bytes:
        """File bytes ``offset:offset + length``, read with one request where the file
        is local (``pread``: no fault per page through a map advised random)."""
        fd = self.read_fd()
        if fd is None:
            return bytes(self._memory[offset : offset + length])
        parts: list[bytes] = []
        done = 0
        while done < length:
            try:
                data = os.pread(fd, length - done, offset + done)
            except OSError as exc:  # EIO from the device: say which file and where
                raise read_failure(exc, self.path, offset, length) from exc
            if not data:
                break
            parts.append(data)
            done += len(data)
        return b"".join(parts)

    def parse_indexed(self, pages: Sequence[int], col: int) -> list[int]:
        """Parse and cache the heads of ``pages``' chunks of ``col`` that the head index
        holds (no read of the file after the index's own); returns the pages whose heads
        must still be read from their chunks."""
        if self._index_loaded and self._index_bytes is None:
            return list(pages)
        if len(pages) >= _BATCH_PARSE_MIN and self._single_values[col]:
            pages = self._parse_indexed_together(pages, col)
        return [page for page in pages if self._parse_indexed(page, col) is None]

    def _parse_indexed_together(self, pages: Sequence[int], col: int) -> list[int]:
        """``parse_indexed`` of a bytes or string column's chunks, those of the same number
        of rows in one array (:func:`mrecord.format.indexed_heads.parse_heads`); returns
        the pages left to the one-at-a-time path: heads not in the index, damaged copies
        (that path finds them so again), cut chunks (it names them)."""
        if not self._index_loaded:
            self._load_head_index()
        data = self._index_bytes
        if data is None:
            return list(pages)
        chunks = self.meta.chunks
        ids = np.asarray(pages, dtype=np.int64)
        rows = self.meta.page_rows[ids].astype(np.int64)
        starts = self._index_start_array[ids, col]
        lengths = chunks["length"][ids, col].astype(np.int64)
        together = (
            ((chunks["flags"][ids, col] & FLAG_VALUE_CRCS) != 0)
            & (starts >= 0)
            & (lengths >= 8 * (rows + 1))  # a cut chunk: the one-at-a-time path names it
        )
        rest: list[int] = ids[~together].tolist()
        parsed: list[tuple[tuple[int, int], Any]] = []
        for count in sorted_unique(rows[together]).tolist():
            group = together & (rows == count)
            inside = starts + table_length(count) + 8 * (count + 1) <= len(data)
            rest += ids[group & ~inside].tolist()  # an entry past the index's end
            group &= inside
            heads = parse_heads(data, starts[group], count, lengths[group])
            for page, got in zip(ids[group].tolist(), heads, strict=True):
                if got is None:
                    rest.append(page)  # damaged: the one-at-a-time path finds it so again
                    continue
                offsets, crcs = got
                self._value_tables.setdefault((page, col), crcs)
                parsed.append(((page, col), _IndexedHead(offsets, None, 8 * (count + 1))))
        self._heads.put_many(parsed)
        return rest

    def _parse_indexed(self, page: int, col: int) -> Any:
        key = (page, col)
        head = self._heads.get(key)
        if head is not None:
            return head
        got = self._indexed(page, col)
        if got is None:
            return None
        table, head_bytes = got
        try:
            parsed = decode_var(
                self.meta.schema.fields[col],
                head_bytes,
                self._page_rows_list[page],
                self._lengths[page][col],
            )
        except (ChunkFormatError, ValueError):
            return None
        crcs = checked_value_crcs(table, head_bytes)
        if crcs is None:
            return None
        shapes = None if parsed.shapes is None else kept_shapes(parsed.shapes)
        head = _IndexedHead(parsed.offsets, shapes, parsed.data_start)
        self._value_tables.setdefault(key, crcs)
        self._heads.put(key, head)
        return head

    def parse_head(self, page: int, col: int) -> Any:
        """Parse and cache the head of plain variable-size chunk (page, ``col``) without
        checksumming the chunk (to plan reads; :meth:`var_page` still checks the chunk by
        the policy before any value is read, and the head it uses comes from the same
        bytes); None when the chunk is compressed or its head does not parse. A head the
        head index holds (format 1.4) is parsed from there, without touching the chunk."""
        key = (page, col)
        head = self._heads.get(key)
        if head is not None or self._codecs[page][col] != _CODEC_NONE:
            return head
        if self._tables[page][col]:
            head = self._parse_indexed(page, col)
            if head is not None:
                return head
        offset, length = self._offsets[page][col], self._lengths[page][col]
        if offset + length > self.size:
            return None
        try:
            head = decode_var(
                self.meta.schema.fields[col],
                self._memory[offset : offset + length],
                self._page_rows_list[page],
            )
        except (ChunkFormatError, ValueError):
            return None
        if self._tables[page][col] and self._value_table(page, col) is None:
            return None  # a damaged head (or table): read whole and checked, it says why
        return self.keep_head(page, col, head)

    def _value_table(self, page: int, col: int) -> np.ndarray | None:
        """The CRC-32C of each value of chunk (page, ``col``) from its value table (kept),
        when the table's first entry matches the chunk's head (offsets and shapes); else
        None."""
        key = (page, col)
        table = self._value_tables.get(key)
        if table is not None:
            return table
        indexed = self._indexed(page, col)
        if indexed is not None:
            crcs = checked_value_crcs(*indexed)
            if crcs is not None:
                self._value_tables[key] = crcs
                return crcs
        start, length = self.head_range(page, col)
        head_start = self._offsets[page][col]
        if start + length > self.size:
            return None
        crcs = checked_value_crcs(
            self._memory[start:head_start], self._memory[head_start : start + length]
        )
        if crcs is not None:
            self._value_tables[key] = crcs
        return crcs

    def has_value_crcs(self, page: int, col: int) -> bool:
        """Whether chunk (page, ``col``) carries a CRC-32C per value (format 1.3): its
        values can be checked one by one (:meth:`check_value`), without reading the
        chunk whole."""
        return bool(self._tables[page][col])

    def checks_by_value(self, page: int, col: int) -> bool:
        """Whether a read of some rows of chunk (page, ``col``) that finds them in memory
        checks just those values (their CRC-32C each, format 1.3) rather than the chunk
        whole: a bytes or string chunk with a value table whose values average
        ``BY_VALUE_MIN_BYTES`` or more. Smaller values are checked faster as one chunk
        (one CRC over memory, against a call per value), and big ones found in memory may
        be all of the chunk that is (a server's hinted rows)."""
        return bool(self.checks_by_value_mask(col)[page])

    def checks_by_value_mask(self, col: int) -> np.ndarray:
        """:meth:`checks_by_value` of every page of column ``col`` (a bool array, one
        entry a page; worked out once: the one place the rule is written)."""
        mask = self._by_value_masks.get(col)
        if mask is None:
            chunks = self.meta.chunks
            mask = np.zeros(len(chunks), dtype=bool)
            if self._single_values[col]:
                tables = (chunks["flags"][:, col] & FLAG_VALUE_CRCS) != 0
                rows = self.meta.page_rows.astype(np.int64)
                big = chunks["length"][:, col].astype(np.int64) >= BY_VALUE_MIN_BYTES * rows
                mask = tables & big
            self._by_value_masks[col] = mask
        return mask

    def check_value(
        self, page: int, col: int, slot: int, value: Any, arrived: bool = False
    ) -> None:
        """Check ``value``, the bytes of row ``slot`` of chunk (page, ``col``) as read,
        against its CRC-32C in the chunk's value table; raise
        :class:`~mrecord.errors.ChecksumError` naming the file, page, field and row when
        they differ, or when the chunk's head and its table disagree.

        Under ``verify="once"`` a value checked before is not checked again, and once
        every value of the chunk has been, the chunk counts as verified (a later epoch
        reads it without checks, as one checked whole). ``arrived``: the value was just
        read off the disk into the reader's buffer (a cold read): its check lets the GIL
        go (``checksum_releasing``); a value in the map keeps it, as every check of
        mapped bytes does (``checksum``)."""
        key = (page, col)
        checked = self._values_checked.get(key) if self.verify == "once" else None
        if checked is not None and checked[slot]:
            return
        crcs = self._value_table(page, col)
        crc = None if crcs is None else checksum_releasing(value) if arrived else checksum(value)
        if crcs is not None and crc == int(crcs[slot]):
            if self.verify == "once":
                if checked is None:
                    checked = self._values_checked.setdefault(key, bytearray(len(crcs)))
                checked[slot] = 1
                if 0 not in checked:
                    self._verified[page, col] = True
                    self._values_checked.pop(key, None)
            return
        field = self.meta.schema.fields[col].name
        offset = self._offsets[page][col]
        if crcs is None:
            what = f"the head at byte {offset} disagrees with its value table"
        else:
            what = f"row {self.page_starts_list[page] + slot} ({len(value)} bytes)"
        raise ChecksumError(
            f"{str(self.path)!r}: checksum mismatch in page {page}, field {field!r}, "
            f"{what}; the file is damaged (`mrecord verify` lists every damaged page)",
            path=str(self.path),
            page=page,
            offset=offset,
        )

    def chunk_offsets(self, col: int) -> list[int]:
        """The file offset of each page's chunk of column ``col``."""
        cached = self._col_offsets.get(col)
        if cached is None:
            cached = self._col_offsets[col] = [row[col] for row in self._offsets]
        return cached

    @property
    def hinted(self) -> bool:
        """Whether an order-aware reader has hinted this file's coming ranges
        (:meth:`will_need`); then nothing checksums ahead of it in file order."""
        return self._hinted

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

    def value_index(self, col: int) -> ValueIndex | None:
        """Where every row's value of variable-shape column ``col`` lies
        (:mod:`mrecord.storage.value_index`), built on the first call after every chunk of
        the column was checked (policy ``once``; ``never`` at once; ``always`` never: each
        read checks its chunks) and kept; None where none serves (a chunk compressed or
        not in a local map, an index too large for its column), or not yet checked."""
        if col in self._value_indexes:
            return self._value_indexes[col]
        if not self.all_verified(col):
            return None
        with self._index_lock:
            if col not in self._value_indexes:
                self._value_indexes[col] = build_value_index(self, col)
            return self._value_indexes[col]

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

    def _open_optional(self, direct: bool) -> int | None:
        """:meth:`open_mapped_file`, for a descriptor this shard keeps only to read faster:
        None, and the map serves, where it would leave the process too few descriptors
        (:mod:`mrecord.storage.descriptors`)."""
        if not take_optional():
            return None
        fd = self.open_mapped_file(direct=direct)
        if fd is None:
            give_back_optional()
        return fd

    def open_mapped_file(self, direct: bool = False) -> int | None:
        """A new read-only descriptor of the file this shard mapped (the caller closes
        it), or None: not a local file, or its path now names another file (replaced)
        or a shorter one; with ``direct``, opened ``O_DIRECT`` (None where the file
        system or the platform has no direct I/O)."""
        if self._stat is None:
            return None
        flags = os.O_RDONLY | _NONBLOCK
        if direct:
            if not hasattr(os, "O_DIRECT"):
                return None
            flags |= os.O_DIRECT
        try:
            fd = os.open(self.path, flags)
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
        if head is None or isinstance(head, _IndexedHead):
            copy = head
            try:
                head = decode_var(field, raw, self._page_rows_list[page])
            except ChunkFormatError as exc:
                offset = int(self.meta.chunks[page, col]["offset"])
                raise self._corrupt(page, col, offset, str(exc)) from exc
            if head.shapes is not None:  # a view of this reader's map: keep a copy
                head = DecodedVarChunk(head.offsets, kept_shapes(head.shapes), head.data_start)
            if copy is not None and not _same_head(copy, head):
                # the chunk is intact (checked whole): the head index's copy is not
                offset = int(self.meta.chunks[page, col]["offset"])
                raise self._corrupt(
                    page,
                    col,
                    offset,
                    "the head index's copy of its head differs from the chunk's own "
                    "(`mrecord verify` names every such chunk; rewrite the dataset with "
                    "`mrecord convert mrecord`)",
                )
            self._heads.put(key, head)
        return head, raw

    def check_value_table(self, page: int, field: Field) -> None:
        """Check chunk (page, ``field``)'s value table (format 1.3) against the chunk:
        its head's CRC and every value's (after the chunk's own check, by the policy).
        Raises :class:`~mrecord.errors.ChecksumError` for the first that differs; nothing
        to do for a chunk without a table (``mrecord verify`` checks every chunk so)."""
        col = self._field_index[field.name]
        if not self._tables[page][col]:
            return
        head, raw = self.var_page(page, field)
        offsets, start = head.offsets, head.data_start
        for slot in range(len(offsets) - 1):
            value = raw[start + offsets[slot] : start + offsets[slot + 1]]
            self.check_value(page, col, slot, value)

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
        self._value_indexes.clear()
        kept = (self._fd, self._direct_fd)
        self._fd = self._direct_fd = None
        for fd in kept:
            if fd is not None:
                os.close(fd)
                give_back_optional()
        self._file_bytes = None  # our own view of the map must not keep it open
        # numpy views may still reference the map; then it is freed with them.
        with contextlib.suppress(BufferError):
            self._memory.release()
            self._mm.close()

    def __enter__(self) -> ShardFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
