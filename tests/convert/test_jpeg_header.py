"""The imagefolder structure check's fast header walk (``mrecord.convert.jpeg_header``):
it takes the common JPEGs without Pillow, and never passes a file Pillow's parse refuses."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.convert.jpeg_header import jpeg_header_ok

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402


def _jpeg(mode: str = "RGB", **save: object) -> bytes:
    rng = np.random.default_rng(0)
    shape = {"L": (24, 20), "RGB": (24, 20, 3), "CMYK": (24, 20, 4)}[mode]
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, mode=mode).save(buf, format="JPEG", **save)
    return buf.getvalue()


KINDS = {
    "rgb": _jpeg(),
    "grey": _jpeg("L"),
    "cmyk": _jpeg("CMYK"),
    "progressive": _jpeg(progressive=True),
    "exif and icc": _jpeg(exif=b"Exif\x00\x00" + bytes(40), icc_profile=bytes(300)),
    "restart markers": _jpeg(restart_marker_blocks=1),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_common_jpegs_take_the_fast_walk(kind: str) -> None:
    """Pillow's own JPEGs of every common kind pass the walk (so the check needs no
    Pillow call for them)."""
    assert jpeg_header_ok(KINDS[kind])


def _pillow_opens(data: bytes) -> bool:
    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.format == "JPEG" and img.width > 0 and img.height > 0
    except Exception:
        return False


@given(
    kind=st.sampled_from(sorted(KINDS)),
    edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 600),
)
def test_walk_never_passes_what_pillow_refuses(
    kind: str, edits: list[tuple[int, int]], cut: int | None
) -> None:
    """Bytes changed in the header region, or the file cut short: whenever the walk says
    the header is fine, Pillow opens the file as a JPEG too. And the intact file's header,
    remembered by the check, never changes its answer for the damaged one."""
    from mrecord.convert.jpeg_header import header_length

    assert jpeg_header_ok(KINDS[kind])  # its header is remembered now
    data = bytearray(KINDS[kind])
    for at, value in edits:
        if at < len(data):
            data[at] = value
    damaged = bytes(data[:cut] if cut is not None else data)
    assert jpeg_header_ok(damaged) == (header_length(damaged) > 0)
    if jpeg_header_ok(damaged):
        assert _pillow_opens(damaged)


def _frame_edit(offset: int, *values: int) -> bytes:
    """The RGB JPEG with bytes from ``offset`` of its frame header (FF C0 ...) replaced."""
    data = bytearray(KINDS["rgb"])
    at = data.find(b"\xff\xc0") + offset
    data[at : at + len(values)] = values
    return bytes(data)


# Each a defect Pillow's parse refuses ("cannot identify image file").
REFUSED = {
    "height 0": _frame_edit(5, 0, 0),
    "width 0": _frame_edit(7, 0, 0),
    "a decompression bomb (65,535 x 65,535)": _frame_edit(5, 255, 255, 255, 255),
    "a reserved marker": bytes(KINDS["rgb"][:2]) + b"\xff\x02\x00\x04\x00\x00" + KINDS["rgb"][2:],
    "2 components": _frame_edit(9, 2),
    "12-bit samples": _frame_edit(4, 12),
    "frame length off by one": _frame_edit(3, 0x12),
    "scan before any frame": b"\xff\xd8\xff\xda\x00\x08\x01" + bytes(20),
}


@pytest.mark.parametrize("defect", sorted(REFUSED))
def test_frame_defects_pillow_refuses_are_not_passed(defect: str) -> None:
    """Each frame-header defect that Pillow refuses, the walk does not pass either."""
    assert not _pillow_opens(REFUSED[defect])
    assert not jpeg_header_ok(REFUSED[defect])


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xd8", b"\x89PNG\r\n\x1a\n" + bytes(30)],
    ids=["empty", "only SOI", "png"],
)
def test_not_sure_cases_go_to_pillow(data: bytes) -> None:
    """Other formats, no frame header, nothing at all: the walk says "not sure"."""
    assert not jpeg_header_ok(data)


def test_a_folder_of_same_size_jpegs_walks_one_header() -> None:
    """Files whose header is one already passed are not walked again."""
    from mrecord.convert import jpeg_header

    first, second = _jpeg(quality=80), _jpeg(quality=80) + b"trailing"
    walked: list[int] = []
    real = jpeg_header.header_length

    def counting(data: bytes) -> int:
        walked.append(len(data))
        return real(data)

    jpeg_header.forget_headers()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jpeg_header, "header_length", counting)
        assert jpeg_header_ok(first) and jpeg_header_ok(second) and jpeg_header_ok(first)
    assert walked == [len(first)]
