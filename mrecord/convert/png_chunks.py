"""A fast, strict walk over a PNG's chunks (the imagefolder structure check).

:func:`png_chunks_ok` says True only for the common, well-formed case: the PNG signature,
an image header (IHDR) first with sane dimensions and a valid bit depth for its color
type, a palette before the data where the color type needs one, the image data (IDAT)
in consecutive chunks, and the end chunk (IEND), with **every chunk's CRC-32 matching its
bytes**. A damaged byte anywhere, a file cut short, an animated PNG, a chunk this walk
does not know to be harmless: False, and the file goes to Pillow's decode, which names
the problem. False means "not sure", never "bad".

Pillow's decode of a 28x28 PNG takes ~40 us of Python holding the GIL, most of a small
file's conversion; this walk is a few us (one ``zlib.crc32`` per chunk). What it does not
do is inflate the data: a stream whose CRCs are right was written that way by its
encoder, and the ``"decode"`` check is there for encoders one does not trust.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["png_chunks_ok"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHUNK = struct.Struct(">I4s")  # length, type
_HEADER = struct.Struct(">IIBBBBB")  # width, height, depth, color, compression, filter, interlace
# Pillow's default ``Image.MAX_IMAGE_PIXELS`` (as for JPEGs): larger images go to Pillow.
_MAX_PIXELS = 1024 * 1024 * 1024 // 4 // 3
# Bit depths each color type allows (PNG specification, table 11.1).
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PALETTE = 3
# Critical chunks (first letter upper case) this walk knows; any other is left to Pillow,
# as is an animated PNG (its frames are chunks of their own).
_KNOWN_CRITICAL = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})
_ANIMATED = b"acTL"


def png_chunks_ok(data: bytes) -> bool:
    """Whether ``data`` is a whole, well-formed PNG whose chunks all match their CRCs
    (see the module docstring; False: not sure, let Pillow decide)."""
    if not data.startswith(_SIGNATURE):
        return False
    view = memoryview(data)
    end = len(data)
    pos = len(_SIGNATURE)
    seen_header = palette = in_data = data_done = False
    color = 0
    while pos + 12 <= end:
        length, kind = _CHUNK.unpack_from(data, pos)
        body = pos + 8
        stop = body + length
        if stop + 4 > end:
            return False  # cut short
        (crc,) = struct.unpack_from(">I", data, stop)
        if zlib.crc32(view[pos + 4 : stop]) != crc:
            return False  # damaged
        if not seen_header:
            if kind != b"IHDR" or length != 13:
                return False
            color = _header_color(data, body)
            if color < 0:
                return False
            seen_header = True
        elif kind == b"IDAT":
            if data_done or (color == _PALETTE and not palette):
                return False
            in_data = True
        elif kind == b"IEND":
            return in_data and length == 0  # bytes after the end are ignored, as Pillow does
        elif kind == b"IHDR" or kind == _ANIMATED:
            return False
        elif kind[0] & 0x20 == 0 and kind not in _KNOWN_CRITICAL:
            return False  # a critical chunk not known here
        else:
            data_done = in_data  # data chunks must follow each other
            palette = palette or kind == b"PLTE"
        pos = stop + 4
    return False  # no end chunk


def _header_color(data: bytes, body: int) -> int:
    """The color type of a sane image header at ``body``, or -1."""
    width, height, depth, color, compression, filter_, interlace = _HEADER.unpack_from(data, body)
    if not (width > 0 and height > 0 and width * height <= _MAX_PIXELS):
        return -1
    if depth not in _DEPTHS.get(color, ()) or compression or filter_ or interlace > 1:
        return -1
    return int(color)
