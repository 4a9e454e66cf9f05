"""Behaviour of each vision op: values worked out by hand, properties, argument checks."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from mrecord import config, vision
from mrecord.errors import ArgumentError, DecodeError
from mrecord.transforms.seeding import reset_eager_seeds
from mrecord.vision import Inter

hwc_images = hnp.arrays(
    np.uint8, st.tuples(st.integers(1, 12), st.integers(1, 12), st.sampled_from([1, 3]))
)


@pytest.fixture(autouse=True)
def _fresh_config() -> object:
    config.reset()
    yield None
    config.reset()


def _encode(img: np.ndarray, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format=fmt, **kwargs)
    return buf.getvalue()


# ---- flips, HWC2CHW, Normalize: properties ------------------------------------------------


@given(hwc_images)
def test_flipping_twice_is_identity(img: np.ndarray) -> None:
    for op in (vision.HorizontalFlip(), vision.VerticalFlip()):
        np.testing.assert_array_equal(op(op(img)), img)
    np.testing.assert_array_equal(vision.HorizontalFlip()(img), img[:, ::-1])


@given(hwc_images)
def test_hwc2chw_moves_channels_first(img: np.ndarray) -> None:
    out = vision.HWC2CHW()(img)
    h, w, c = img.shape
    assert out.shape == (c, h, w)
    np.testing.assert_array_equal(out[c - 1], img[:, :, c - 1])


def test_hwc2chw_leaves_a_2d_image_unchanged() -> None:
    img = np.arange(6, dtype=np.uint8).reshape(2, 3)
    np.testing.assert_array_equal(vision.HWC2CHW()(img), img)


@given(hwc_images.filter(lambda a: a.shape[2] == 3))
def test_normalize_is_inverted_by_std_and_mean(img: np.ndarray) -> None:
    mean, std = [125.3, 123.0, 113.9], [63.0, 62.1, 66.7]
    out = vision.Normalize(mean, std)(img)
    assert out.dtype == np.float32
    np.testing.assert_allclose(
        out * np.array(std, np.float32) + np.array(mean, np.float32), img, atol=1e-3
    )


def test_normalize_chw_uses_the_first_axis_for_channels() -> None:
    img = np.ones((3, 2, 2), np.uint8) * np.array([10, 20, 30], np.uint8).reshape(3, 1, 1)
    out = vision.Normalize([10, 20, 30], [1, 2, 5], is_hwc=False)(img)
    np.testing.assert_array_equal(out, np.zeros((3, 2, 2), np.float32))


def test_normalize_rejects_a_channel_mismatch() -> None:
    with pytest.raises(ArgumentError, match="4 channels"):
        vision.Normalize([1, 2, 3], [1, 1, 1])(np.zeros((2, 2, 4), np.uint8))


# ---- SlicePatches -----------------------------------------------------------------------


@given(
    img=hwc_images,
    num_height=st.integers(1, 4),
    num_width=st.integers(1, 4),
    fill=st.integers(0, 255),
)
def test_slice_patches_reassemble_the_padded_image(
    img: np.ndarray, num_height: int, num_width: int, fill: int
) -> None:
    patches = vision.SlicePatches(num_height, num_width, fill_value=fill)(img)
    assert len(patches) == num_height * num_width
    rows = [
        np.concatenate(patches[i * num_width : (i + 1) * num_width], axis=1)
        for i in range(num_height)
    ]
    whole = np.concatenate(rows, axis=0)
    h, w = img.shape[:2]
    ph, pw = -(-h // num_height), -(-w // num_width)  # ceil division
    assert whole.shape == (ph * num_height, pw * num_width, img.shape[2])
    np.testing.assert_array_equal(whole[:h, :w], img)
    assert np.all(whole[h:] == fill) and np.all(whole[:, w:] == fill)


def test_slice_patches_drop_mode_drops_the_remainder() -> None:
    img = np.arange(5 * 7, dtype=np.uint8).reshape(5, 7)
    patches = vision.SlicePatches(2, 3, slice_mode=vision.SliceMode.DROP)(img)
    assert [p.shape for p in patches] == [(2, 2)] * 6
    np.testing.assert_array_equal(patches[4], img[2:4, 2:4])


# ---- Resize -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "size", "expected"),
    [
        ((32, 64, 3), 16, (16, 32, 3)),
        ((30, 45, 3), 20, (20, 30, 3)),
        ((45, 30), 20, (30, 20)),
        ((3, 7, 3), 2, (2, 4, 3)),  # floor(7 / 3 * 2) = 4
        ((10, 10, 3), (4, 6), (4, 6, 3)),
    ],
)
def test_resize_output_shape(
    shape: tuple[int, ...], size: int | tuple[int, int], expected: tuple[int, ...]
) -> None:
    assert vision.Resize(size)(np.zeros(shape, np.uint8)).shape == expected


def test_resize_linear_uses_pixel_centres_like_opencv() -> None:
    # x = (d + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 -> clamped to 0, .25, .75, 1
    img = np.array([[0, 100]], dtype=np.uint8)
    out = vision.Resize((1, 4))(img)
    np.testing.assert_array_equal(out, [[0, 25, 75, 100]])


def test_resize_nearest_and_area_downscale() -> None:
    row = np.array([[10, 20, 30, 40]], dtype=np.uint8)
    np.testing.assert_array_equal(vision.Resize((1, 2), Inter.NEAREST)(row), [[10, 30]])
    np.testing.assert_array_equal(vision.Resize((1, 2), Inter.AREA)(row), [[15, 35]])


@pytest.mark.parametrize("inter", list(Inter), ids=str)
def test_resize_keeps_a_constant_image_constant(inter: Inter) -> None:
    img = np.full((9, 13, 3), 77, np.uint8)
    out = vision.Resize((5, 20), inter)(img)
    assert out.shape == (5, 20, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, 77)


def test_resize_float_image_stays_float() -> None:
    img = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    out = vision.Resize((8, 8))(img)
    assert out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 1.0


# ---- crops ----------------------------------------------------------------------------------


def test_center_crop_takes_the_middle_and_pads_small_images() -> None:
    img = np.arange(25, dtype=np.uint8).reshape(5, 5)
    np.testing.assert_array_equal(vision.CenterCrop(3)(img), img[1:4, 1:4])
    padded = vision.CenterCrop((2, 7))(np.ones((4, 3), np.uint8))
    assert padded.shape == (2, 7)
    np.testing.assert_array_equal(padded[:, 2:5], 1)
    np.testing.assert_array_equal(padded[:, :2], 0)


def test_random_crop_with_padding_is_a_window_of_the_padded_image() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(1, 256, (8, 8, 3), dtype=np.uint8)
    padded = np.zeros((12, 12, 3), np.uint8)
    padded[2:10, 2:10] = img
    op = vision.RandomCrop(8, padding=2)
    corners = set()
    for seed in range(60):
        out = op(img, seed=seed)
        assert out.shape == (8, 8, 3)
        found = [
            (t, left)
            for t in range(5)
            for left in range(5)
            if np.array_equal(padded[t : t + 8, left : left + 8], out)
        ]
        assert found, f"seed {seed}: output is not a window of the padded image"
        corners.add(found[0])
    assert len(corners) > 10  # 25 possible corners, 60 draws


def test_random_crop_fill_and_padding_modes() -> None:
    img = np.full((2, 2, 3), 9, np.uint8)
    out = vision.RandomCrop(6, padding=2, fill_value=(1, 2, 3))(img, seed=0)
    np.testing.assert_array_equal(out[0, 0], [1, 2, 3])
    edge = vision.RandomCrop(6, padding=2, padding_mode=vision.Border.EDGE)(img, seed=0)
    np.testing.assert_array_equal(edge, 9)


def test_random_crop_too_big_names_the_fix() -> None:
    with pytest.raises(ArgumentError, match="pad_if_needed"):
        vision.RandomCrop(10)(np.zeros((4, 4, 3), np.uint8), seed=1)
    out = vision.RandomCrop(10, pad_if_needed=True)(np.ones((4, 4, 3), np.uint8), seed=1)
    assert out.shape == (10, 10, 3)


def test_random_resized_crop_full_box_equals_resize() -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)
    op = vision.RandomResizedCrop(10, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    np.testing.assert_array_equal(op(img, seed=5), vision.Resize((10, 10))(img))


def test_random_resized_crop_shape_and_reproducibility() -> None:
    img = np.random.default_rng(2).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    op = vision.RandomResizedCrop((16, 24))
    out = op(img, seed=99)
    assert out.shape == (16, 24, 3)
    np.testing.assert_array_equal(out, op(img, seed=99))


def test_eager_calls_without_seed_follow_config_seed() -> None:
    img = np.random.default_rng(3).integers(0, 256, (30, 30, 3), dtype=np.uint8)
    op = vision.RandomResizedCrop(8)
    config.set_seed(42)
    reset_eager_seeds()
    first = [op(img) for _ in range(3)]
    config.set_seed(7)
    other_seed = [op(img) for _ in range(3)]
    config.set_seed(42)
    reset_eager_seeds()
    second = [op(img) for _ in range(3)]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(first[0], other) for other in first[1:])
    assert any(not np.array_equal(a, b) for a, b in zip(first, other_seed, strict=True))


# ---- Decode and RandomCropDecodeResize -----------------------------------------------------


def test_decode_png_round_trip_and_grey_to_rgb() -> None:
    rgb = np.random.default_rng(4).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(vision.Decode()(_encode(rgb, "PNG")), rgb)
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    out = vision.Decode()(np.frombuffer(_encode(grey, "PNG"), np.uint8))
    assert out.shape == (3, 4, 3)
    np.testing.assert_array_equal(out[..., 1], grey)


def test_decode_jpeg_is_close_to_the_source() -> None:
    img = np.full((16, 16, 3), (200, 100, 50), np.uint8)
    out = vision.Decode()(_encode(img, "JPEG", quality=95))
    assert out.shape == (16, 16, 3)
    assert np.abs(out.astype(int) - img).max() <= 3


def test_decode_errors_name_what_they_got() -> None:
    with pytest.raises(DecodeError, match=r"11 bytes starting with b'hello world'"):
        vision.Decode()(b"hello world")
    with pytest.raises(ValueError, match="image decode failed"):  # DecodeError is a ValueError
        vision.Decode()(_encode(np.zeros((64, 64, 3), np.uint8), "JPEG")[:200])
    with pytest.raises(TypeError, match="already decoded"):
        vision.Decode()(np.zeros((4, 4, 3), np.uint8))


def test_random_crop_decode_resize_full_box_equals_decode_then_resize() -> None:
    rgb = np.random.default_rng(5).integers(0, 256, (12, 18, 3), dtype=np.uint8)
    op = vision.RandomCropDecodeResize((6, 9), scale=(1.0, 1.0), ratio=(1.5, 1.5))
    expected = vision.Resize((6, 9))(rgb)
    np.testing.assert_array_equal(op(_encode(rgb, "PNG"), seed=3), expected)


def test_random_crop_decode_resize_draft_is_close_to_full_decode() -> None:
    """Decoding a large JPEG at reduced scale gives nearly the full-decode result."""
    yy, xx = np.mgrid[0:256, 0:320]
    smooth = np.stack([xx * 255 // 319, yy * 255 // 255, (xx + yy) * 255 // 574], axis=-1)
    data = _encode(smooth.astype(np.uint8), "JPEG", quality=90)
    op = vision.RandomCropDecodeResize(32, scale=(1.0, 1.0), ratio=(1.25, 1.25))
    out = op(data, seed=0).astype(int)
    full = vision.Resize((32, 32))(vision.Decode()(data)).astype(int)
    assert out.shape == (32, 32, 3)
    assert np.abs(out - full).mean() < 4


# ---- colour ops -------------------------------------------------------------------------------


def test_color_adjust_identity_ranges_change_nothing() -> None:
    img = np.random.default_rng(6).integers(0, 256, (5, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(vision.RandomColorAdjust()(img, seed=1), img)
    np.testing.assert_array_equal(vision.RandomSharpness((1.0, 1.0))(img, seed=1), img)


def test_brightness_and_saturation_formulas() -> None:
    img = np.array([[[100, 200, 30], [255, 0, 0]]], dtype=np.uint8)
    bright = vision.RandomColorAdjust(brightness=(2.0, 2.0))(img, seed=0)
    np.testing.assert_array_equal(bright, [[[200, 255, 60], [255, 0, 0]]])
    grey = vision.RandomColorAdjust(saturation=(0.0, 0.0))(img, seed=0)
    # 0.299 R + 0.587 G + 0.114 B: 100,200,30 -> 150.72 -> 150 (OpenCV truncates its 14-bit
    # fixed point after adding 0.5, i.e. rounds); 255,0,0 -> 76.2 -> 76
    np.testing.assert_array_equal(grey[0, 0], [151, 151, 151])
    np.testing.assert_array_equal(grey[0, 1], [76, 76, 76])


def test_contrast_zero_gives_the_mean_grey() -> None:
    img = np.array([[[0, 0, 0], [255, 255, 255]]], dtype=np.uint8)  # grey 0 and 255, mean 127.5
    out = vision.RandomColorAdjust(contrast=(0.0, 0.0))(img, seed=0)
    np.testing.assert_array_equal(out, 128)  # OpenCV stores the mean in an 8-bit image


@pytest.mark.parametrize(
    ("hue", "expected"),
    [(0.5, [0, 255, 255]), (1.0 / 3.0, [0, 255, 0]), (-1.0 / 3.0, [0, 0, 255])],
)
def test_hue_rotates_pure_red(hue: float, expected: list[int]) -> None:
    red = np.array([[[255, 0, 0]]], dtype=np.uint8)
    out = vision.RandomColorAdjust(hue=(hue, hue))(red, seed=0)
    np.testing.assert_array_equal(out[0, 0], expected)


def test_sharpness_zero_is_the_smoothing_filter() -> None:
    img = np.zeros((3, 3, 3), np.uint8)
    img[1, 1] = 255
    out = vision.RandomSharpness((0.0, 0.0))(img, seed=0)
    assert out[1, 1, 0] == 98  # 255 * 5 / 13 = 98.08; border pixels are kept
    np.testing.assert_array_equal(out[0], 0)


def test_color_adjust_requires_rgb() -> None:
    with pytest.raises(ArgumentError, match="RGB image"):
        vision.RandomColorAdjust(brightness=0.5)(np.zeros((4, 4), np.uint8), seed=0)


# ---- argument validation (MindSpore's wording) ---------------------------------------------


def test_argument_errors_follow_mindspore_wording() -> None:
    with pytest.raises(
        ValueError, match=r"Input prob is not within the required interval of \[0.0, 1.0\]"
    ):
        vision.RandomHorizontalFlip(prob=1.5)
    with pytest.raises(TypeError, match=r"Argument prob with value '0\.5' is not of type"):
        vision.RandomVerticalFlip(prob="0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Input size is not within the required interval"):
        vision.Resize(0)
    with pytest.raises(TypeError, match="Argument interpolation"):
        vision.Resize(4, interpolation="linear")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"Input hue is not within the required interval of \[0.0, 0.5\]"
    ):
        vision.RandomColorAdjust(hue=0.7)
    with pytest.raises(ValueError, match=r"ratio should be in \(min,max\) format"):
        vision.RandomResizedCrop(8, ratio=(2.0, 1.0))
    with pytest.raises(ValueError, match="std_value"):
        vision.Normalize([0, 0, 0], [1, 0, 1])
    with pytest.raises(TypeError, match="padding"):
        vision.RandomCrop(8, padding=(1, 2, 3))


def test_repr_shows_arguments() -> None:
    assert repr(vision.Normalize([1, 2, 3], [4, 5, 6])) == (
        "Normalize(mean=[1.0, 2.0, 3.0], std=[4.0, 5.0, 6.0], is_hwc=True)"
    )
    assert repr(vision.RandomHorizontalFlip()) == "RandomHorizontalFlip(prob=0.5)"
    assert repr(vision.Resize(8)) == "Resize(size=8, interpolation=Inter.LINEAR)"
    assert repr(vision.HWC2CHW()) == "HWC2CHW()"
