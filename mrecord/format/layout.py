"""The shard file layout: header, aligned chunks, metadata and trailer.

::

    offset 0   header (64 bytes)
               [magic: 8 = 89 4D 52 45 43 0D 0A 1A] [major: u16] [minor: u16] [zeros: 52]
    64         page 0: chunk of field 0, chunk of field 1, ...   each chunk starts on a
               page 1: ...                                         64-byte boundary (zero padding)
    M          metadata: MessagePack map (see ``mrecord.format.metadata``)
    end - 32   trailer (32 bytes)
               [metadata offset M: u64] [metadata length: u64] [metadata crc32c: u32]
               [zeros: 4] [magic: 8 = 1A 4D 52 45 43 45 4E 44]

All integers are little-endian. A reader seeks to the trailer, checks its magic,
reads and checks the metadata, and never needs to scan the pages.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mrecord.errors import LayoutError

__all__ = [
    "ALIGNMENT",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "HEADER_MAGIC",
    "HEADER_SIZE",
    "TRAILER_MAGIC",
    "TRAILER_SIZE",
    "Trailer",
    "align",
    "describe_foreign",
    "encode_header",
    "parse_header",
]

HEADER_MAGIC = b"\x89MREC\r\n\x1a"
TRAILER_MAGIC = b"\x1aMRECEND"
FORMAT_MAJOR = 1
FORMAT_MINOR = 4
HEADER_SIZE = 64
TRAILER_SIZE = 32
ALIGNMENT = 64

_HEADER = struct.Struct("<8sHH52x")
_TRAILER = struct.Struct("<QQI4x8s")


_KNOWN_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"RIFF", "a RIFF file (WebP image, WAV audio, ...)"),
    (b"PAR1", "a Parquet file: mrecord convert parquet SRC DST"),
    (b"ARROW1", "an Arrow IPC file: mrecord convert arrow SRC DST"),
    (b"SQLite format 3\x00", "a SQLite database (an index .db? give the data file beside it)"),
    (b"\x93NUMPY", "a NumPy .npy file: mrecord convert npy SRC DST"),
    (b"PK\x03\x04", "a zip archive (an .npz? mrecord convert npz SRC DST)"),
    (b"\x1f\x8b", "a gzip file"),
)


def describe_foreign(head: bytes, tail: bytes = b"") -> str | None:
    """What a file that is not an mrecord shard is, from its first bytes (None: it may be one).

    ``head`` is the file's first 64 bytes (fewer for a shorter file), ``tail`` its
    last 8. A file whose first bytes could still be a truncated mrecord header, or
    that ends with mrecord's trailer magic (a shard with a damaged header), gives None.
    """
    if HEADER_MAGIC.startswith(head[: len(HEADER_MAGIC)]) or tail == TRAILER_MAGIC:
        return None
    shown = f"starts with {head[:8]!r}"
    for magic, what in _KNOWN_MAGIC:
        if head.startswith(magic):
            return f"{shown}: {what}"
    if head[8:9] == b"{" and b'"header_size"' in head[8:64]:
        return f"{shown}: a MindRecord file: mrecord convert mindrecord SRC DST"
    return shown


def align(offset: int) -> int:
    """Round ``offset`` up to the chunk alignment."""
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def encode_header() -> bytes:
    """The 64-byte file header for the current format version."""
    return _HEADER.pack(HEADER_MAGIC, FORMAT_MAJOR, FORMAT_MINOR)


def parse_header(data: bytes) -> tuple[int, int]:
    """Check the header magic and return (major, minor) format version."""
    if len(data) < HEADER_SIZE:
        raise LayoutError(f"file is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, major, minor = _HEADER.unpack_from(data)
    if magic != HEADER_MAGIC:
        raise LayoutError(f"not an mrecord file: header magic is {magic!r}")
    if major != FORMAT_MAJOR:
        raise LayoutError(
            f"format version {major}.{minor} is not supported by this mrecord "
            f"(reads {FORMAT_MAJOR}.x); upgrade mrecord"
        )
    return major, minor


@dataclass(frozen=True)
class Trailer:
    """The fixed-size record at the end of every shard file."""

    metadata_offset: int
    metadata_length: int
    metadata_crc32: int

    def encode(self) -> bytes:
        """The 32 trailer bytes."""
        return _TRAILER.pack(
            self.metadata_offset, self.metadata_length, self.metadata_crc32, TRAILER_MAGIC
        )

    @classmethod
    def parse(cls, data: bytes, file_size: int) -> Trailer:
        """Parse and bounds-check the last 32 bytes of a file of ``file_size`` bytes."""
        if len(data) != TRAILER_SIZE:
            raise LayoutError(f"trailer must be {TRAILER_SIZE} bytes, got {len(data)}")
        offset, length, crc, magic = _TRAILER.unpack(data)
        if magic != TRAILER_MAGIC:
            raise LayoutError(
                f"trailer magic is {magic!r}: the file is truncated or was not committed"
            )
        if offset < HEADER_SIZE or offset + length != file_size - TRAILER_SIZE:
            raise LayoutError(
                f"trailer points at metadata {offset}..{offset + length}, outside the file "
                f"({file_size} bytes)"
            )
        return cls(offset, length, crc)
