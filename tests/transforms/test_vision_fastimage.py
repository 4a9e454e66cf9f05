"""The optional fast backends (OpenCV, simplejpeg): Pillow's pixels, resize within a grey level.

Tests that need ``cv2`` or ``simplejpeg`` are skipped without them; the header parser and
the fallback switch are tested either way. Expected values come from Pillow's decoder and
from the numpy resize (the documented tolerance between the two resizes: one grey level).
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from mrecord import vision
from mrecord.vision import _fastimage
from mrecord.vision._resize import resize, resize_numpy
from mrecord.vision.enums import Inter

needs_cv2 = pytest.mark.skipif(_fastimage.opencv() is None, reason="opencv-python-headless absent")
needs_fast_jpeg = pytest.mark.skipif(
    not _fastimage.fast_jpeg_available(), reason="neither simplejpeg nor OpenCV installed"
)


def _jpeg(pixels: np.ndarray, **save: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", **save)
    return buf.getvalue()


def _smooth(height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack([xx * 7 % 256, yy * 5 % 256, (xx + yy) * 3 % 256], axis=-1).astype(np.uint8)


@pytest.fixture
def without_fast_image(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Force the Pillow / numpy fallback (``MRECORD_DISABLE_FAST_IMAGE=1``)."""
    monkeypatch.setenv("MRECORD_DISABLE_FAST_IMAGE", "1")
    _fastimage.clear_cache()
    yield
    monkeypatch.delenv("MRECORD_DISABLE_FAST_IMAGE")
    _fastimage.clear_cache()


# ---- the JPEG header parser (no OpenCV needed) --------------------------------------------


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize(("mode", "components"), [("RGB", 3), ("L", 1), ("CMYK", 4)])
def test_jpeg_header_reads_size_and_components(
    mode: str, components: int, progressive: bool
) -> None:
    image = Image.fromarray(_smooth(13, 21)).convert(mode)
    buf = io.BytesIO()
    image.save(buf, "JPEG", progressive=progressive, exif=b"Exif\x00\x00" + bytes(40))
    assert _fastimage.jpeg_header(buf.getvalue()) == (21, 13, components)


def test_jpeg_header_rejects_what_is_not_a_jpeg() -> None:
    png = io.BytesIO()
    Image.fromarray(_smooth(4, 4)).save(png, "PNG")
    data = _jpeg(_smooth(8, 8))
    for bad in [b"", b"hello", png.getvalue(), data[:3], b"\xff\xd8\xff\xd9", b"\xff\xd8\x00"]:
        assert _fastimage.jpeg_header(bad) is None, bad[:8]


# ---- decode ----------------------------------------------------------------------------------


@needs_fast_jpeg
@pytest.mark.parametrize("quality", [75, 95])
@pytest.mark.parametrize("subsampling", [0, 2])  # 4:4:4 and 4:2:0
def test_fast_decode_gives_pillows_pixels(quality: int, subsampling: int) -> None:
    data = _jpeg(_smooth(37, 53), quality=quality, subsampling=subsampling)
    pillow = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    out = vision.Decode()(data)
    assert out.dtype == np.uint8 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, pillow)


@needs_fast_jpeg
def test_fast_decode_of_grey_and_cmyk_jpegs_gives_pillows_pixels() -> None:
    grey = _jpeg(_smooth(9, 11)[..., 0])
    np.testing.assert_array_equal(
        vision.Decode()(grey), np.asarray(Image.open(io.BytesIO(grey)).convert("RGB"))
    )
    buf = io.BytesIO()
    Image.fromarray(_smooth(9, 11)).convert("CMYK").save(buf, "JPEG")
    cmyk = buf.getvalue()  # decoded by Pillow: OpenCV converts CMYK differently
    np.testing.assert_array_equal(
        vision.Decode()(cmyk), np.asarray(Image.open(io.BytesIO(cmyk)).convert("RGB"))
    )


@needs_fast_jpeg
def test_fast_decode_ignores_exif_orientation_as_pillow_does() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    pixels = _smooth(10, 30)
    data = _jpeg(pixels, exif=exif.tobytes(), quality=95)
    out = vision.Decode()(data)
    assert out.shape == (10, 30, 3)  # not rotated
    np.testing.assert_array_equal(out, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))


def test_decode_errors_are_the_same_with_or_without_fast_image(without_fast_image: None) -> None:
    from mrecord.errors import DecodeError

    truncated = _jpeg(np.zeros((64, 64, 3), np.uint8))[:200]
    with pytest.raises(DecodeError, match="image decode failed"):
        vision.Decode()(truncated)
    with pytest.raises(DecodeError, match="image decode failed"):
        vision.RandomCropDecodeResize(8)(truncated, seed=1)


@needs_fast_jpeg
def test_truncated_jpeg_still_raises_decode_error_with_fast_decoders() -> None:
    from mrecord.errors import DecodeError

    truncated = _jpeg(np.zeros((64, 64, 3), np.uint8))[:200]
    with pytest.raises(DecodeError, match="image decode failed"):
        vision.Decode()(truncated)
    with pytest.raises(DecodeError, match="image decode failed"):
        vision.RandomCropDecodeResize(8)(truncated, seed=1)


# ---- resize --------------------------------------------------------------------------------

resize_inputs = hnp.arrays(
    np.uint8,
    st.one_of(
        st.tuples(st.integers(1, 40), st.integers(1, 40)),
        st.tuples(st.integers(1, 40), st.integers(1, 40), st.sampled_from([1, 3, 4])),
    ),
)


@needs_cv2
@pytest.mark.parametrize("inter", [Inter.LINEAR, Inter.CUBIC], ids=str)
@given(img=resize_inputs, out_h=st.integers(1, 50), out_w=st.integers(1, 50))
def test_opencv_resize_within_one_grey_level_of_numpy(
    inter: Inter, img: np.ndarray, out_h: int, out_w: int
) -> None:
    fast = resize(img, out_h, out_w, inter)
    slow = resize_numpy(img, out_h, out_w, inter)
    assert fast.shape == slow.shape == (out_h, out_w, *img.shape[2:])
    assert fast.dtype == np.uint8
    assert np.abs(fast.astype(int) - slow.astype(int)).max(initial=0) <= 1
    as_float = img.astype(np.float32) / np.float32(255)
    fast_f = resize(as_float, out_h, out_w, inter)
    np.testing.assert_allclose(fast_f, resize_numpy(as_float, out_h, out_w, inter), atol=1e-5)


@needs_cv2
def test_random_crop_decode_resize_close_to_the_pillow_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same boxes; OpenCV's decode (also at reduced scale) and resize within a grey level."""
    data = [_jpeg(_smooth(256, 320), quality=90), _jpeg(_smooth(60, 50), quality=90)]
    op = vision.RandomCropDecodeResize(48)
    fast = [op(d, seed=s) for d in data for s in range(6)]
    monkeypatch.setenv("MRECORD_DISABLE_FAST_IMAGE", "1")
    _fastimage.clear_cache()
    try:
        slow = [op(d, seed=s) for d in data for s in range(6)]
    finally:
        monkeypatch.delenv("MRECORD_DISABLE_FAST_IMAGE")
        _fastimage.clear_cache()
    for a, b in zip(fast, slow, strict=True):
        assert a.shape == b.shape == (48, 48, 3)
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def test_fallback_resize_is_the_numpy_filter(without_fast_image: None) -> None:
    img = np.array([[0, 100]], dtype=np.uint8)
    assert _fastimage.opencv() is None and _fastimage.simplejpeg() is None
    np.testing.assert_array_equal(resize(img, 1, 4, Inter.LINEAR), [[0, 25, 75, 100]])


@needs_cv2
@pytest.mark.skipif(_fastimage.simplejpeg() is None, reason="simplejpeg absent")
def test_simplejpeg_and_opencv_decode_the_same_pixels() -> None:
    data = _jpeg(_smooth(41, 67), quality=90)
    by_simplejpeg = _fastimage.decode_jpeg(data)
    cv2 = _fastimage.opencv()
    assert cv2 is not None  # needs_cv2
    assert by_simplejpeg is not None and by_simplejpeg[1]
    by_opencv = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
    np.testing.assert_array_equal(by_simplejpeg[0], by_opencv)


@needs_cv2
def test_reduced_scale_decode_is_pillows_draft() -> None:
    """1/2 scale: OpenCV's IMREAD_REDUCED_COLOR_2 and Pillow's draft are both libjpeg's."""
    data = _jpeg(_smooth(64, 96), quality=90)
    decoded = _fastimage.decode_jpeg(data, 2)
    assert decoded is not None
    pixels = decoded[0] if decoded[1] else decoded[0][..., ::-1]
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (48, 32))
    np.testing.assert_array_equal(pixels, np.asarray(image.convert("RGB")))


@needs_cv2
def test_reduced_decode_leaves_truncated_data_to_pillow() -> None:
    data = _jpeg(_smooth(64, 96), quality=90)
    assert _fastimage.decode_jpeg(data[: len(data) * 2 // 3], 2) is None
    assert _fastimage.decode_jpeg(data, 2) is not None
