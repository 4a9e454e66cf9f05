"""Conversions end to end: source files → FileWriter → DatasetReader, row for row.

Fixtures are created here in their real formats (helpers shared with
test_convert_sources.py); the MindRecord import is checked against the
MindSpore-written samples and their expected rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord.convert import (
    WriteOptions,
    convert_cifar10,
    convert_csv,
    convert_imagefolder,
    convert_mindrecord,
    convert_mnist,
    convert_npz,
)
from mrecord.errors import ArgumentError, ConversionError, DatasetExistsError
from mrecord.reader.dataset_reader import DatasetReader
from tests.convert.test_convert_sources import (
    cifar_dir,
    image_folder,
    write_cifar,
    write_csv,
    write_idx,
)
from tests.format.test_mindrecord_import import FIXTURES, SAMPLES, assert_value_equal, expected


def read_all(path: Path) -> tuple[DatasetReader, list[dict[str, Any]]]:
    reader = DatasetReader.open(path)
    return reader, [reader.read_row(i) for i in range(reader.num_rows)]


def test_cifar10_round_trip_pixel_for_pixel(tmp_path: Path) -> None:
    expect = cifar_dir(tmp_path, np.random.default_rng(5), per_file=3)
    dst = tmp_path / "cifar.mrecord"
    summary = convert_cifar10(tmp_path, dst, split="train", shard_num=2)
    assert summary.rows == 15 and summary.shards == 2
    assert [Path(f).name for f in summary.files] == ["cifar.mrecord0", "cifar.mrecord1"]
    assert summary.bytes == sum(
        (Path(f).stat().st_size + Path(f + ".db").stat().st_size) for f in summary.files
    )
    with DatasetReader.open(tmp_path / "cifar.mrecord0") as reader:
        assert reader.num_rows == 15
        block = reader.read_rows(np.arange(15))
    # With several shards the writer splits every batch across them, so compare the
    # rows as a multiset (order within one shard is checked in the other tests).
    got = sorted(
        (int(lab), img.tobytes())
        for lab, img in zip(block.columns["label"], block.columns["image"], strict=True)
    )
    want = sorted(
        (lab, img.tobytes())
        for lab, img in zip(expect["train"][1], expect["train"][0], strict=True)
    )
    assert got == want
    single = tmp_path / "single.mrecord"
    convert_cifar10(tmp_path, single, split="train", batch_rows=4)
    with DatasetReader.open(single) as reader:
        block = reader.read_rows(np.arange(15))
        np.testing.assert_array_equal(
            np.asarray(block.columns["image"]), np.stack(expect["train"][0])
        )
        assert np.asarray(block.columns["label"]).tolist() == expect["train"][1]


def test_cifar10_png_and_compression(tmp_path: Path) -> None:
    import io

    from PIL import Image

    imgs = np.random.default_rng(6).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    src = tmp_path / "test_batch.bin"
    write_cifar(src, imgs, [9, 8, 7, 6])
    dst = tmp_path / "png.mrecord"
    convert_cifar10(src, dst, png=True, compression="zstd", compress_fields=["label"])
    reader, rows = read_all(dst)
    with reader:
        for row, want, label in zip(rows, imgs, [9, 8, 7, 6], strict=True):
            np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(row["image"]))), want)
            assert int(row["label"]) == label


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_round_trip(tmp_path: Path, gz: bool) -> None:
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, size=(11, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=11).astype(np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", 2051, images, gz=gz)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", 2049, labels, gz=gz)
    dst = tmp_path / "mnist.mrecord"
    summary = convert_mnist(tmp_path, dst, split="test", page_size=4096)
    assert summary.rows == 11
    reader, rows = read_all(dst)
    with reader:
        assert json.loads(reader_desc(reader))["split"] == "test"
        for row, img, lab in zip(rows, images, labels, strict=True):
            # [28, 28, 1] as MindSpore's MNIST images (issue 17)
            np.testing.assert_array_equal(row["image"], img[:, :, None])
            assert int(row["label"]) == int(lab)


def reader_desc(reader: DatasetReader) -> str:
    desc = getattr(reader, "desc", None)
    if desc is None:
        desc = reader.shards[0].meta.desc
    return str(desc)


def test_imagefolder_round_trip_bytes_as_is(tmp_path: Path) -> None:
    root, expect = image_folder(tmp_path)
    dst = tmp_path / "folder.mrecord"
    summary = convert_imagefolder(root, dst)
    assert summary.rows == len(expect)
    assert any("notes.txt" in p for p in summary.problems)
    reader, rows = read_all(dst)
    with reader:
        assert json.loads(reader_desc(reader))["classes"] == {"cat": 0, "dog": 1, "emu": 2}
        got = [(r["file_name"], int(r["label"]), r["image"]) for r in rows]
    assert got == expect


def test_failed_conversion_leaves_nothing(tmp_path: Path) -> None:
    root, _ = image_folder(tmp_path)
    (root / "emu" / "zz_broken.png").write_bytes(b"not a png")
    dst = tmp_path / "out" / "folder.mrecord"
    dst.parent.mkdir()
    with pytest.raises(ConversionError, match=r"emu/zz_broken\.png"):
        convert_imagefolder(root, dst, batch_rows=1)
    # the writer's lock file may stay (it is not part of the dataset); nothing else may
    left = [p.name for p in dst.parent.iterdir() if not p.name.endswith("-lock")]
    assert left == []


def test_csv_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    write_csv(f, [["id", "x", "name"], [1, 0.25, "a"], [2, -1.5, "日本"], [3, 1e300, ""]])
    dst = tmp_path / "csv.mrecord"
    convert_csv(f, dst, index_fields=["id"])
    reader, rows = read_all(dst)
    with reader:
        assert [(int(r["id"]), float(r["x"]), r["name"]) for r in rows] == [
            (1, 0.25, "a"),
            (2, -1.5, "日本"),
            (3, 1e300, ""),
        ]


def test_npz_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "d.npz"
    x = np.random.default_rng(8).standard_normal((6, 3, 2)).astype(np.float32)
    y = np.arange(6, dtype=np.int32)
    np.savez(f, x=x, y=y)
    dst = tmp_path / "npz.mrecord"
    convert_npz(f, dst, compression="zstd")
    reader, rows = read_all(dst)
    with reader:
        np.testing.assert_array_equal(np.stack([r["x"] for r in rows]), x)
        assert [int(r["y"]) for r in rows] == y.tolist()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_mindrecord_import_keeps_every_row_and_field(tmp_path: Path, name: str) -> None:
    exp = expected(name)
    dst = tmp_path / "imported.mrecord"
    summary = convert_mindrecord(FIXTURES / SAMPLES[name], dst, batch_rows=8)
    assert summary.rows == len(exp["rows"])
    reader, rows = read_all(dst)
    with reader:
        assert set(reader.column_names) == set(exp["schema"])
        for i, (got, want) in enumerate(zip(rows, exp["rows"], strict=True)):
            for field, value in want.items():
                assert_value_equal(
                    got[field], value, exp["schema"][field]["type"], f"row {i} {field}"
                )


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    f = tmp_path / "d.npz"
    np.savez(f, a=np.arange(3))
    dst = tmp_path / "o.mrecord"
    convert_npz(f, dst)
    with pytest.raises(DatasetExistsError):
        convert_npz(f, dst)
    assert convert_npz(f, dst, overwrite=True).rows == 3


def test_bad_write_options_are_named(tmp_path: Path) -> None:
    f = tmp_path / "d.npz"
    np.savez(f, a=np.arange(3), img=np.zeros((3, 2, 2), np.uint8))
    dst = tmp_path / "o.mrecord"
    with pytest.raises(ArgumentError, match="index field 'nope' is not a field"):
        convert_npz(f, dst, index_fields=["nope"])
    with pytest.raises(ArgumentError, match="only scalar fields can be indexed"):
        convert_npz(f, dst, index_fields=["img"])
    with pytest.raises(ArgumentError, match="needs compression"):
        convert_npz(f, dst, compress_fields=["a"])
    assert not dst.exists()
    assert WriteOptions().shard_num == 1
