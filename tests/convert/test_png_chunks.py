"""The imagefolder structure check's PNG chunk walk (``mrecord.convert.png_chunks``): it
takes the common PNGs without Pillow, and never passes a file Pillow cannot decode."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.convert import imagefolder as imagefolder_module
from mrecord.convert._pillow import require_pillow
from mrecord.convert.png_chunks import png_chunks_ok
from mrecord.errors import ConversionError
from tests.convert.test_jpeg_header import KINDS as JPEG_KINDS

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


_RNG = np.random.default_rng(0)
KINDS = {
    "grey (MNIST-like)": _png(Image.fromarray(_RNG.integers(0, 256, (28, 28), dtype=np.uint8))),
    "rgb": _png(Image.fromarray(_RNG.integers(0, 256, (32, 32, 3), dtype=np.uint8))),
    "rgba": _png(Image.fromarray(_RNG.integers(0, 256, (16, 16, 4), dtype=np.uint8))),
    "16-bit": _png(Image.fromarray(_RNG.integers(0, 65535, (8, 8), dtype=np.uint16))),
    "1-bit": _png(Image.fromarray(_RNG.integers(0, 256, (9, 9), dtype=np.uint8) > 128)),
    "palette": _png(
        Image.fromarray(_RNG.integers(0, 256, (10, 10, 3), dtype=np.uint8)).quantize(16)
    ),
    "several data chunks": _png(
        Image.fromarray(_RNG.integers(0, 256, (200, 200, 3), dtype=np.uint8))
    ),
}


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """``(type, body)`` of each chunk of a well-formed PNG."""
    out, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        out.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return out


def _assemble(chunks: list[tuple[bytes, bytes]]) -> bytes:
    """A PNG of these chunks, each with its right CRC."""
    parts = [b"\x89PNG\r\n\x1a\n"]
    for kind, body in chunks:
        crc = zlib.crc32(kind + body)
        parts.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc))
    return b"".join(parts)


def _pillow_decodes(data: bytes) -> bool:
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            return img.format == "PNG"
    except Exception:
        return False


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_common_pngs_take_the_fast_walk(kind: str) -> None:
    """Pillow's own PNGs of every common kind pass (no Pillow decode needed for them)."""
    assert png_chunks_ok(KINDS[kind])
    assert png_chunks_ok(KINDS[kind] + b"bytes after the end")  # ignored, as by Pillow


def test_the_assembler_rebuilds_a_png() -> None:
    """The helper the cases below are built with gives back the file it took apart."""
    for data in KINDS.values():
        assert _assemble(_chunks(data)) == data


@given(
    kind=st.sampled_from(sorted(KINDS)),
    edits=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 4000),
)
def test_walk_never_passes_what_pillow_cannot_decode(
    kind: str, edits: list[tuple[int, int]], cut: int | None
) -> None:
    """Bytes changed anywhere, or the file cut short: whenever the walk passes the file,
    Pillow decodes it; and a changed byte or a cut never passes (every chunk's CRC)."""
    data = bytearray(KINDS[kind])
    for at, value in edits:
        data[at % len(data)] = value
    damaged = bytes(data[:cut] if cut is not None else data)
    if png_chunks_ok(damaged):
        assert _pillow_decodes(damaged)
        assert damaged == KINDS[kind][: len(damaged)] and damaged.endswith(b"IEND\xaeB`\x82")


def _without(kind: str, name: bytes) -> bytes:
    return _assemble([c for c in _chunks(KINDS[kind]) if c[0] != name])


def _header(kind: str, **fields: int) -> bytes:
    """``kind``'s PNG with fields of its image header replaced (CRC made right)."""
    chunks = _chunks(KINDS[kind])
    names = ("width", "height", "depth", "color", "compression", "filter", "interlace")
    values = dict(zip(names, struct.unpack(">IIBBBBB", chunks[0][1]), strict=True))
    values.update(fields)
    chunks[0] = (b"IHDR", struct.pack(">IIBBBBB", *(values[n] for n in names)))
    return _assemble(chunks)


NOT_PASSED = {
    "a palette image without its palette": _without("palette", b"PLTE"),
    "no image data": _without("rgb", b"IDAT"),
    "no end chunk": KINDS["rgb"][:-12],
    "width 0": _header("rgb", width=0),
    "depth 3": _header("grey (MNIST-like)", depth=3),
    "an unknown color type": _header("rgb", color=5),
    "an unknown critical chunk": _assemble(
        [*_chunks(KINDS["rgb"])[:1], (b"ZZZZ", b""), *_chunks(KINDS["rgb"])[1:]]
    ),
    "an animated PNG": _assemble(
        [*_chunks(KINDS["rgb"])[:1], (b"acTL", bytes(8)), *_chunks(KINDS["rgb"])[1:]]
    ),
    "data chunks apart": _assemble(
        [
            c
            for chunk in _chunks(KINDS["several data chunks"])
            for c in ([chunk, (b"tEXt", b"a\0b")] if chunk[0] == b"IDAT" else [chunk])
        ]
    ),
    "a JPEG": b"\xff\xd8\xff\xe0" + bytes(100),
}


@pytest.mark.parametrize("case", sorted(NOT_PASSED))
def test_cases_the_walk_leaves_to_pillow(case: str) -> None:
    """Each is left to Pillow's decode (which refuses most of them, and names why)."""
    assert not png_chunks_ok(NOT_PASSED[case])


@pytest.mark.parametrize("ext", ["jpg", "png"])
def test_structure_check_skips_pillow_for_good_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ext: str
) -> None:
    """A folder of well-formed JPEGs or PNGs converts with Pillow never called (neither
    its header parse nor its decode); a truncated file still fails, named, through
    Pillow's path."""
    kinds = JPEG_KINDS if ext == "jpg" else KINDS
    folder = tmp_path / "src" / "a"
    folder.mkdir(parents=True)
    for i, kind in enumerate(sorted(kinds)):
        (folder / f"{i}.{ext}").write_bytes(kinds[kind])
    calls = []
    real = require_pillow

    def counting() -> object:
        calls.append(1)
        return real()

    monkeypatch.setattr(imagefolder_module, "require_pillow", counting)
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        summary = write_source(source, tmp_path / "out.mrecord", WriteOptions(workers=1))
    assert summary.rows == len(kinds) and calls == []
    whole = kinds["rgb"]
    (folder / f"0.{ext}").write_bytes(whole[: len(whole) // 2])
    with (
        SOURCES["imagefolder"](tmp_path / "src") as source,
        pytest.raises(ConversionError, match=rf"a/0\.{ext}"),
    ):
        write_source(source, tmp_path / "out2.mrecord", WriteOptions(workers=1))
    assert calls
