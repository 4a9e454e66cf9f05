"""Chunk compression and checksums.

A stored chunk is either the raw chunk bytes (codec 0, ``none``) or one
zstandard frame with its content size in the frame header (codec 1, ``zstd``).
The checksum is CRC-32C (Castagnoli, as TFRecord and ext4) of the *stored* bytes,
computed in hardware by the ``crc32c`` package (faster than zlib's CRC-32, and it
releases the GIL; measured rates in docs/BENCHMARKS.md, "Issue 14, second round"), so
damage is found before any decompression. Decompression refuses to produce anything but
exactly the recorded raw length, so a hostile file cannot make the reader
allocate without bound.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import crc32c
import zstandard

from mrecord.errors import DecompressionError

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "checksum",
    "checksum_releasing",
    "checksum_update",
    "checksums",
    "compress",
    "decompress",
]

CODEC_IDS = {"none": 0, "zstd": 1}
CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}
DEFAULT_ZSTD_LEVEL = 3


# Below this many bytes a checksum keeps the GIL (the package's default lets it go from
# 32 KiB). At ~20 GB/s a 100 KB value takes 5 us, but a thread that let the GIL go waits
# up to the switch interval (5 ms) to take it back while another thread runs Python: a
# conversion's writing thread spent 3.3 s of 11 such waits on 20,000 image rows, where
# the checksums themselves take 0.1 s (py-spy, docs/CONVERT.md). From 4 MiB (~200 us) on
# letting it go pays: other threads run meanwhile.
_KEEP_GIL_BELOW = 4 << 20


def _gil_mode(data: Any) -> int:
    """crc32c's ``gil_release_mode``: 0 keeps the GIL, 1 lets it go."""
    return 1 if memoryview(data).nbytes >= _KEEP_GIL_BELOW else 0


def checksum(data: Any) -> int:
    """CRC-32C of a bytes-like object, as an unsigned 32-bit int."""
    return int(crc32c.crc32c(data, 0, _gil_mode(data)))


def checksums(values: Sequence[Any], largest: int) -> list[int]:
    """CRC-32C of each bytes-like value, as :func:`checksum`; ``largest``: the size of the
    largest value. Values all under 4 MiB keep the GIL in one loop: a call per value
    without working out its GIL mode (a fifth of the cost of a 1.5 KB value's)."""
    if largest < _KEEP_GIL_BELOW:
        crc = crc32c.crc32c
        return [crc(value, 0, 0) for value in values]
    return [checksum(value) for value in values]


_READER_RELEASES_FROM = int(os.environ.get("MRECORD_CHECK_RELEASES_FROM", str(32 << 10)))
"""Bytes from which a reader's check of stored data lets the GIL go (the package's own
rule; ``MRECORD_CHECK_RELEASES_FROM`` to compare)."""


def checksum_releasing(data: Any, crc: int = 0) -> int:
    """CRC-32C of a bytes-like object (continuing ``crc``, as :func:`checksum_update`),
    for a reader checking what it read: the GIL is let go from 32 KiB, not 4 MiB. A
    reader's threads (the reading ones, the consumer's) all run Python between system
    calls, and a value's check is theirs to share: images GLOBAL beyond memory (2.4 GB
    in a 763 MB group, 100 KB values each checked against its CRC as it arrives), the
    first 4,000 rows of a cold epoch in 0.391-0.421 s against 0.442-0.485 s keeping the
    GIL (medians of 10, 12 and 8 alternating pairs, pair ratios 0.85-0.88). A writer's
    checksums keep it (:func:`checksum`): there the one encoding thread waited to take
    it back."""
    release = memoryview(data).nbytes >= _READER_RELEASES_FROM
    return int(crc32c.crc32c(data, crc, 1 if release else 0))


def checksum_update(data: Any, crc: int) -> int:
    """The CRC-32C of what ``crc`` covered followed by ``data`` (checksums a chunk in parts)."""
    return int(crc32c.crc32c(data, crc, _gil_mode(data)))


def compress(raw: bytes, codec: str, level: int = DEFAULT_ZSTD_LEVEL) -> tuple[int, bytes]:
    """Compress ``raw`` with ``codec``; returns (codec id actually used, stored bytes).

    Falls back to ``none`` when compression does not make the chunk smaller
    (incompressible data such as JPEG bytes).
    """
    if codec == "none" or not raw:
        return CODEC_IDS["none"], raw
    packed = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(raw)
    if len(packed) >= len(raw):
        return CODEC_IDS["none"], raw
    return CODEC_IDS["zstd"], packed


def decompress(stored: Any, codec_id: int, raw_length: int, max_bytes: int) -> Any:
    """Return the raw bytes of a stored chunk, enforcing ``raw_length`` and ``max_bytes``."""
    if codec_id == CODEC_IDS["none"]:
        if len(stored) != raw_length:
            raise DecompressionError(f"stored {len(stored)} bytes but raw length is {raw_length}")
        return stored
    if codec_id != CODEC_IDS["zstd"]:
        raise DecompressionError(f"unknown codec id {codec_id}")
    if raw_length > max_bytes:
        raise DecompressionError(
            f"declared raw length {raw_length} exceeds the limit of {max_bytes} bytes per chunk"
        )
    try:
        declared = zstandard.frame_content_size(stored)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"not a zstd frame: {exc}") from exc
    if declared != raw_length:
        raise DecompressionError(
            f"zstd frame declares {declared} bytes, metadata says {raw_length}"
        )
    try:
        raw = zstandard.ZstdDecompressor().decompress(stored, max_output_size=raw_length)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"zstd decompression failed: {exc}") from exc
    if len(raw) != raw_length:
        raise DecompressionError(f"decompressed to {len(raw)} bytes, expected {raw_length}")
    return raw
