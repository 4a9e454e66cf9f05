"""Conversion sources on small inputs created here in their real on-disk formats.

No files are written by mrecord here: these tests read batches straight from the
sources. Expected values come from how the fixtures were built (the format
specs), never from running the converter.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from mrecord.block import Block
from mrecord.convert import (
    Cifar10Source,
    CsvSource,
    ImageFolderSource,
    MnistSource,
    NpzSource,
    Source,
    infer_csv_schema,
)
from mrecord.errors import ArgumentError, ConversionError
from tests.tracing import traced_peak


def collect(source: Source, batch_rows: int = 3) -> Block:
    blocks = [Block(dict(b)) for b in source.iter_batches(batch_rows)]
    return Block.concat(blocks)


def array_column(block: Block, name: str) -> np.ndarray:
    """Column ``name`` of ``block``, which must be one numpy array (a fixed-shape column)."""
    values = block.columns[name]
    assert isinstance(values, np.ndarray), f"{name}: {type(values).__name__}"
    return values


# ------------------------------------------------------------------------ CIFAR-10


def write_cifar(path: Path, images: np.ndarray, labels: list[int]) -> None:
    """One record at a time, exactly as the CIFAR-10 page describes it."""
    with open(path, "wb") as fh:
        for img, label in zip(images, labels, strict=True):
            fh.write(bytes([label]))
            for c in range(3):  # red plane, green plane, blue plane, each row-major
                fh.write(bytes(int(img[y, x, c]) for y in range(32) for x in range(32)))


def cifar_dir(tmp_path: Path, rng: np.random.Generator, per_file: int = 4) -> dict[str, Any]:
    root = tmp_path / "cifar-10-batches-bin"
    root.mkdir()
    expect: dict[str, Any] = {"train": ([], []), "test": ([], [])}
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for name in names:
        imgs = rng.integers(0, 256, size=(per_file, 32, 32, 3), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=per_file)]
        write_cifar(root / name, imgs, labels)
        split = "test" if name.startswith("test") else "train"
        expect[split][0].extend(imgs)
        expect[split][1].extend(labels)
    (root / "batches.meta.txt").write_text("\n".join(f"c{i}" for i in range(10)) + "\n\n")
    return expect


@pytest.mark.parametrize("split", ["train", "test"])
def test_cifar10_pixels_and_labels(tmp_path: Path, split: str) -> None:
    expect = cifar_dir(tmp_path, np.random.default_rng(1))
    # the parent folder works too: the converter finds cifar-10-batches-bin inside
    src = Cifar10Source(tmp_path, split=split)
    assert src.schema == {
        "image": {"type": "uint8", "shape": [32, 32, 3]},
        "label": {"type": "int32"},
    }
    assert src.num_rows == len(expect[split][1])
    block = collect(src)
    images, labels = block.columns["image"], block.columns["label"]
    assert isinstance(images, np.ndarray) and images.dtype == np.uint8
    np.testing.assert_array_equal(images, np.stack(expect[split][0]))
    assert isinstance(labels, np.ndarray) and labels.dtype == np.int32
    assert labels.tolist() == expect[split][1]
    desc = json.loads(src.desc or "")
    assert desc["classes"]["c3"] == 3 and desc["split"] == split


def test_cifar10_channel_order_is_hwc_rgb(tmp_path: Path) -> None:
    record = bytes([7]) + bytes([10]) * 1024 + bytes([20]) * 1024 + bytes(range(256)) * 4
    f = tmp_path / "one.bin"
    f.write_bytes(record)
    block = collect(Cifar10Source(f))
    img = block.columns["image"][0]
    assert img.shape == (32, 32, 3)
    assert (img[:, :, 0] == 10).all() and (img[:, :, 1] == 20).all()
    assert img[0, 5, 2] == 5 and img[1, 0, 2] == 32  # blue plane, row-major
    assert block.columns["label"][0] == 7


def test_cifar10_png_option(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    imgs = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    f = tmp_path / "b.bin"
    write_cifar(f, imgs, [1, 2, 3])
    src = Cifar10Source(f, png=True)
    assert src.schema["image"] == {"type": "bytes"}
    got = collect(src).columns["image"]
    for data, want in zip(got, imgs, strict=True):
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), want)


def test_cifar10_truncated_file(tmp_path: Path) -> None:
    f = tmp_path / "data_batch_1.bin"
    write_cifar(f, np.zeros((2, 32, 32, 3), np.uint8), [0, 1])
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(ConversionError, match=r"data_batch_1\.bin.*truncated.*record 1"):
        collect(Cifar10Source(f))


def test_cifar10_rejects_other_files(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(bytes([200]) + bytes(3072))
    with pytest.raises(ConversionError, match="label 200"):
        collect(Cifar10Source(f))


def test_cifar10_missing_split_files(tmp_path: Path) -> None:
    (tmp_path / "data_batch_1.bin").write_bytes(bytes(3073))
    with pytest.raises(ConversionError, match=r"incomplete.*data_batch_2\.bin"):
        Cifar10Source(tmp_path, split="train")
    with pytest.raises(ConversionError, match="does not exist"):
        Cifar10Source(tmp_path / "nowhere")
    with pytest.raises(ArgumentError, match="split"):
        Cifar10Source(tmp_path, split="val")


# ------------------------------------------------------------------------ MNIST


def write_idx(path: Path, magic: int, data: np.ndarray, *, gz: bool) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in data.shape)
    payload = header + data.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(str(path) + ".gz", "wb") as fh:
            fh.write(payload)
    else:
        path.write_bytes(payload)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("split", ["train", "test"])
def test_mnist_round_trip(tmp_path: Path, gz: bool, split: str) -> None:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7).astype(np.uint8)
    prefix = "train" if split == "train" else "t10k"
    write_idx(tmp_path / f"{prefix}-images-idx3-ubyte", 2051, images, gz=gz)
    write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", 2049, labels, gz=gz)
    src = MnistSource(tmp_path, split=split)
    # [28, 28, 1]: the channel axis MindSpore's MNIST images have (issue 17)
    assert src.schema == {
        "image": {"type": "uint8", "shape": [28, 28, 1]},
        "label": {"type": "int32"},
    }
    block = collect(src)
    np.testing.assert_array_equal(block.columns["image"], images[:, :, :, None])
    assert array_column(block, "label").dtype == np.int32
    assert array_column(block, "label").tolist() == labels.tolist()


def test_mnist_wrong_magic(tmp_path: Path) -> None:
    write_idx(tmp_path / "train-images-idx3-ubyte", 2049, np.zeros((1, 2, 2)), gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", 2049, np.zeros(1), gz=False)
    with pytest.raises(ConversionError, match=r"train-images-idx3-ubyte.*magic number 2049.*2051"):
        MnistSource(tmp_path)


def test_mnist_truncated_and_count_mismatch(tmp_path: Path) -> None:
    write_idx(tmp_path / "train-images-idx3-ubyte", 2051, np.zeros((3, 28, 28)), gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", 2049, np.zeros(2), gz=False)
    with pytest.raises(ConversionError, match=r"3 images.*2 labels"):
        MnistSource(tmp_path)
    f = tmp_path / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-1])
    with pytest.raises(ConversionError, match=r"train-images-idx3-ubyte.*truncated"):
        MnistSource(tmp_path)


def test_mnist_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match=r"train images not found.*train-images-idx3-ubyte"):
        MnistSource(tmp_path)
    with pytest.raises(ConversionError, match="does not exist"):
        MnistSource(tmp_path / "missing")


def test_mnist_corrupt_gzip(tmp_path: Path) -> None:
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    write_idx(tmp_path / "train-labels-idx1-ubyte", 2049, np.zeros(1), gz=False)
    with pytest.raises(ConversionError, match=r"cannot read MNIST file.*\.gz"):
        MnistSource(tmp_path)


# ------------------------------------------------------------------------ ImageFolder


def save_image(path: Path, arr: np.ndarray, fmt: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt)
    return path.read_bytes()


def image_folder(tmp_path: Path) -> tuple[Path, list[tuple[str, int, bytes]]]:
    rng = np.random.default_rng(4)
    root = tmp_path / "images"
    expected: list[tuple[str, int, bytes]] = []
    layout = [
        ("cat", "b.png", "PNG"),
        ("cat", "a.jpg", "JPEG"),
        ("cat", "sub/c.png", "PNG"),
        ("dog", "z.jpeg", "JPEG"),
        ("emu", "e.PNG", "PNG"),
    ]
    for cls, name, fmt in layout:
        arr = rng.integers(0, 256, size=(9, 13, 3), dtype=np.uint8)
        data = save_image(root / cls / name, arr, fmt)
        expected.append((f"{cls}/{name}", ["cat", "dog", "emu"].index(cls), data))
    expected.sort(key=lambda t: (t[1], t[0]))  # sorted by class, then path within it
    (root / "dog" / "notes.txt").write_text("not an image")
    return root, expected


def test_imagefolder_bytes_as_is_labels_and_names(tmp_path: Path) -> None:
    root, expected = image_folder(tmp_path)
    src = ImageFolderSource(root)
    assert src.num_rows == len(expected)
    block = collect(src, batch_rows=2)
    assert block.columns["file_name"] == [e[0] for e in expected]
    assert array_column(block, "label").tolist() == [e[1] for e in expected]
    assert block.columns["image"] == [e[2] for e in expected]
    assert json.loads(src.desc or "")["classes"] == {"cat": 0, "dog": 1, "emu": 2}
    assert any("notes.txt" in p for p in src.problems)


def test_imagefolder_items_are_the_listing_in_row_order(tmp_path: Path) -> None:
    """``items``: ``(path, label)`` of each image in row order, by index, slice and
    iteration alike (a view over the listing, which the Ray converter reads too)."""
    root, expected = image_folder(tmp_path)
    items = ImageFolderSource(root).items
    pairs = [(str(root / name), label) for name, label, _ in expected]
    assert [(str(p), label) for p, label in items] == pairs
    assert len(items) == len(pairs)
    assert [(str(p), label) for p, label in items[1:4]] == pairs[1:4]
    assert (str(items[-1][0]), items[-1][1]) == pairs[-1]


def test_imagefolder_unreadable_images_fail_listing_them(tmp_path: Path) -> None:
    root, _ = image_folder(tmp_path)
    (root / "cat" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    good = (root / "dog" / "z.jpeg").read_bytes()
    (root / "dog" / "cut.jpg").write_bytes(good[: len(good) // 2])
    with pytest.raises(ConversionError, match=r"2 unreadable.*cat/broken\.jpg.*dog/cut\.jpg"):
        collect(ImageFolderSource(root))


def test_imagefolder_skip_reports_them(tmp_path: Path) -> None:
    root, expected = image_folder(tmp_path)
    (root / "cat" / "broken.png").write_bytes(b"garbage")
    src = ImageFolderSource(root, on_error="skip")
    block = collect(src)
    assert block.columns["file_name"] == [e[0] for e in expected]
    assert any("skipped 1 unreadable" in p and "cat/broken.png" in p for p in src.problems)


def test_imagefolder_resize_reencode(tmp_path: Path) -> None:
    root, _ = image_folder(tmp_path)
    block = collect(ImageFolderSource(root, resize=(4, 6), reencode="png"))
    for data in block.columns["image"]:
        img = Image.open(io.BytesIO(data))
        assert img.format == "PNG" and img.size == (4, 6)


def test_imagefolder_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match=r"nope.*does not exist"):
        ImageFolderSource(tmp_path / "nope")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "x.png").write_bytes(b"")
    with pytest.raises(ConversionError, match="no class subfolders"):
        ImageFolderSource(tmp_path / "flat")


# ------------------------------------------------------------------------ CSV


def write_csv(path: Path, rows: list[list[Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


def test_csv_inferred_schema(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    write_csv(
        f,
        [
            ["id", "score", "name", "maybe", "big"],
            [1, 0.5, "a", 3, 10**30],
            [2, 2, "b,c", "", 1],
            [-3, "nan", "", 4, 2],
        ],
    )
    schema, rows = infer_csv_schema(f)
    assert rows == 3
    assert schema == {
        "id": {"type": "int64"},
        "score": {"type": "float64"},
        "name": {"type": "string"},
        "maybe": {"type": "float64"},  # ints with an empty cell: NaN for it
        "big": {"type": "string"},  # too big for int64: kept exactly as text
    }
    block = collect(CsvSource(f))
    assert array_column(block, "id").tolist() == [1, 2, -3]
    assert array_column(block, "score")[:2].tolist() == [0.5, 2.0]
    assert np.isnan(block.columns["score"][2])
    assert block.columns["name"] == ["a", "b,c", ""]
    assert block.columns["maybe"][0] == 3 and np.isnan(block.columns["maybe"][1])
    assert block.columns["big"] == [str(10**30), "1", "2"]


def test_csv_given_schema_and_errors_name_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    write_csv(f, [["a", "b"], [1, "x"], [2, "y"], [300, "z"]])
    schema = {"a": {"type": "uint8"}, "b": "bytes"}
    with pytest.raises(
        ConversionError, match=r"t\.csv' line 4, column 'a': '300' does not fit uint8"
    ):
        collect(CsvSource(f, schema=schema))
    block = collect(CsvSource(f, schema=json.dumps({"a": "int32", "b": "string"})))
    a = array_column(block, "a")
    assert a.dtype == np.int32 and a.tolist() == [1, 2, 300]
    with pytest.raises(ConversionError, match=r"line 2, column 'b': 'x' is not an integer"):
        collect(CsvSource(f, schema={"a": "int64", "b": "int64"}))
    with pytest.raises(ConversionError, match=r"not in the schema: \['b'\]"):
        CsvSource(f, schema={"a": "int64"})
    schema_file = tmp_path / "s.json"
    schema_file.write_text(json.dumps({"a": "float32", "b": "string"}))
    assert CsvSource(f, schema=str(schema_file)).schema["a"] == {"type": "float32"}


def test_csv_ragged_row_and_bad_header(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ConversionError, match=r"line 3: 1 values, the header has 2"):
        collect(CsvSource(f, schema={"a": "int64", "b": "int64"}))
    f.write_text("my col,b\n1,2\n")
    with pytest.raises(ConversionError, match="'my col' is not a valid field name"):
        CsvSource(f)
    with pytest.raises(ConversionError, match="does not exist"):
        CsvSource(tmp_path / "missing.csv")


def test_csv_empty_int_cell_with_schema(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,1\n,2\n")
    with pytest.raises(ConversionError, match=r"line 3, column 'a': '' is empty"):
        collect(CsvSource(f, schema={"a": "int64", "b": "int64"}))


@given(
    st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.floats(allow_nan=False, width=64),
            st.text(st.characters(blacklist_categories=["Cs"]), max_size=8),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_csv_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[int, float, str]]
) -> None:
    f = tmp_path_factory.mktemp("csv") / "p.csv"
    write_csv(f, [["i", "x", "s"], *[[i, repr(x), s] for i, x, s in rows]])
    src = CsvSource(f, schema={"i": "int64", "x": "float64", "s": "string"})
    block = collect(src, batch_rows=7)
    assert array_column(block, "i").tolist() == [r[0] for r in rows]
    assert array_column(block, "x").tolist() == [r[1] for r in rows]
    # csv normalizes bare line ends inside quoted fields only for \r\n handling
    assert block.columns["s"] == [r[2] for r in rows]


# ------------------------------------------------------------------------ NumPy


def test_npz_arrays_to_rows(tmp_path: Path) -> None:
    f = tmp_path / "d.npz"
    img = np.arange(4 * 2 * 3, dtype=np.uint8).reshape(4, 2, 3)
    lab = np.array([3, 1, 4, 1], dtype=np.int64)
    names = np.array(["a", "bb", "", "日本"])
    raw = np.array([b"x", b"", b"\x00z", b"q"])
    flags = np.array([True, False, True, True])
    big = np.array([0, 1, 2**32 - 1, 5], dtype=np.uint32)
    np.savez(f, img=img, lab=lab, names=names, raw=raw, flags=flags, big=big)
    src = NpzSource(f)
    assert src.schema == {
        "img": {"type": "uint8", "shape": [2, 3]},
        "lab": {"type": "int64"},
        "names": {"type": "string"},
        "raw": {"type": "bytes"},
        "flags": {"type": "bool"},
        "big": {"type": "int64"},
    }
    block = collect(src)
    np.testing.assert_array_equal(block.columns["img"], img)
    assert array_column(block, "lab").tolist() == [3, 1, 4, 1]
    assert block.columns["names"] == ["a", "bb", "", "日本"]
    assert block.columns["raw"] == [b"x", b"", b"\x00z", b"q"]
    assert array_column(block, "flags").tolist() == [True, False, True, True]
    assert array_column(block, "big").tolist() == [0, 1, 2**32 - 1, 5]


def test_npy_file_and_folder(tmp_path: Path) -> None:
    x = np.linspace(0, 1, 10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5, dtype=np.int16)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    block = collect(NpzSource(tmp_path / "x.npy"))
    np.testing.assert_array_equal(block.columns["x"], x)
    both = collect(NpzSource(tmp_path))
    assert set(both.columns) == {"x", "y"}
    assert array_column(both, "y").dtype == np.int16


def test_npz_errors(tmp_path: Path) -> None:
    f = tmp_path / "bad.npz"
    np.savez(f, a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(ConversionError, match="disagree on the row count"):
        NpzSource(f)
    np.savez(f, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ConversionError, match=r"bad\.npz"):
        NpzSource(f)
    np.savez(f, a=np.zeros(3, dtype=np.complex64))
    with pytest.raises(ConversionError, match="complex64"):
        NpzSource(f)
    f.write_bytes(b"PK\x03\x04 truncated zip")
    with pytest.raises(ConversionError, match=r"bad\.npz.*not a readable"):
        NpzSource(f)
    np.save(tmp_path / "s.npy", np.float64(3.0))
    with pytest.raises(ConversionError, match="scalar"):
        NpzSource(tmp_path / "s.npy")


def test_npy_data_named_npz(tmp_path: Path) -> None:
    f = tmp_path / "one.npz"
    with open(f, "wb") as fh:
        np.save(fh, np.zeros(3))
    with pytest.raises(ConversionError, match=r"one\.npz.*single array"):
        NpzSource(f)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
@pytest.mark.parametrize("batch_rows", [1, 7, 4096])
def test_npz_arrays_are_read_a_batch_at_a_time_as_written(
    tmp_path: Path, save: Any, batch_rows: int
) -> None:
    """Stored (``np.savez``: mapped) and compressed (``np.savez_compressed``: streamed)
    arrays of every kind give exactly the arrays ``np.load`` reads, batch after batch and
    again from the start (a resumed conversion reads its source again); a Fortran-ordered
    array is read whole, as before."""
    rows = 50
    rng = np.random.default_rng(3)
    arrays: dict[str, np.ndarray] = {
        "img": rng.integers(0, 255, size=(rows, 4, 5, 3), dtype=np.uint8),
        "lab": np.arange(rows, dtype=np.int64) * 3,
        "names": np.array([f"n{i}" * (i % 4) for i in range(rows)]),
        "raw": np.array([bytes([i]) * (i % 5) for i in range(rows)]),
        "vec": np.asfortranarray(rng.standard_normal((rows, 6)).astype(np.float32)),
    }
    f = tmp_path / "d.npz"
    save(f, **arrays)
    src = NpzSource(f)
    try:
        for _ in range(2):
            got: dict[str, list[Any]] = {k: [] for k in arrays}
            for batch in src.iter_batches(batch_rows):
                for k, values in batch.items():
                    got[k].extend(list(values))
            np.testing.assert_array_equal(np.stack(got["img"]), arrays["img"])
            assert got["lab"] == arrays["lab"].tolist()
            assert got["names"] == arrays["names"].tolist()
            assert got["raw"] == arrays["raw"].tolist()
            np.testing.assert_array_equal(np.stack(got["vec"]), arrays["vec"])
    finally:
        src.close()


def test_a_compressed_npz_holds_a_batch_at_a_time(tmp_path: Path) -> None:
    """``np.load`` reads an array of an archive whole: 24 MB here, where a batch of
    1,024 rows is 3 MB."""
    f = tmp_path / "z.npz"
    np.savez_compressed(f, x=np.zeros((8192, 3072), dtype=np.uint8))

    def convert_rows() -> int:
        src = NpzSource(f)
        try:
            return sum(len(b["x"]) for b in src.iter_batches(1024))
        finally:
            src.close()

    rows, peak = traced_peak(convert_rows)
    assert rows == 8192 and peak < 16 << 20, f"{peak >> 20} MB held"
