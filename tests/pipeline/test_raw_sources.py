"""Cifar10Dataset, MnistDataset and ImageFolderDataset on files written in the real formats.

What MindSpore itself does is checked in test_source_cases.py; here: the pixels and labels
are the file's, errors name the file and say what to do, every random-access source orders
rows exactly as MindDataset does (one shared sampler path), ``use_sampler`` works on every
node, ``padded_batch`` pads, and the converters read through the same parsers.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrecord
from mrecord import (
    Cifar10Dataset,
    DistributedSampler,
    FileWriter,
    GeneratorDataset,
    ImageFolderDataset,
    MindDataset,
    MnistDataset,
    SequentialSampler,
    SubsetSampler,
    config,
)
from mrecord.convert import Cifar10Source, MnistSource
from mrecord.errors import ArgumentError, PipelineError, RawDataError
from mrecord.rawdata import walk_image_folder
from mrecord.testing.rawdata import (
    hwc_ids,
    mnist_ids,
    write_cifar10,
    write_image_folder,
    write_mnist,
)


@pytest.fixture(autouse=True)
def _reset_config() -> Iterator[None]:
    yield
    config.reset()


def rows(ds: mrecord.Dataset) -> list[dict[str, Any]]:
    return list(ds.create_dict_iterator(num_epochs=1))


# ------------------------------------------------------------------------------ CIFAR-10


def test_cifar10_images_are_the_planes_in_hwc_and_any_record_count_is_accepted(
    tmp_path: Path,
) -> None:
    write_cifar10(tmp_path, {"data_batch_1.bin": 3, "data_batch_2.bin": 5, "test_batch.bin": 2})
    records = np.concatenate(
        [
            np.fromfile(tmp_path / name, dtype=np.uint8).reshape(-1, 3073)
            for name in ("data_batch_1.bin", "data_batch_2.bin", "test_batch.bin")
        ]
    )
    want = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    got = rows(Cifar10Dataset(tmp_path, shuffle=False))
    assert len(got) == 10
    np.testing.assert_array_equal(np.stack([r["image"] for r in got]), want)
    assert [int(r["label"]) for r in got] == records[:, 0].tolist()
    assert all(r["label"].dtype == np.uint32 for r in got)
    assert Cifar10Dataset(tmp_path, usage="train").get_dataset_size() == 8
    assert hwc_ids([r["image"] for r in rows(Cifar10Dataset(tmp_path, "test", shuffle=False))]) == [
        8,
        9,
    ]


def test_cifar10_bad_input_raises_typed_errors_naming_the_file(tmp_path: Path) -> None:
    write_cifar10(tmp_path, {"data_batch_1.bin": 2})
    with pytest.raises(RawDataError, match=r"no CIFAR-10 test files.*test_batch\*\.bin"):
        Cifar10Dataset(tmp_path, usage="test")
    with pytest.raises(ValueError, match=r"valid set of \['train', 'test', 'all'\]"):
        Cifar10Dataset(tmp_path, usage="val")
    with pytest.raises(RawDataError, match="does not exist") as missing:
        Cifar10Dataset(tmp_path / "nowhere")
    assert isinstance(missing.value, ValueError)  # as MindSpore
    cut = tmp_path / "data_batch_1.bin"
    cut.write_bytes(cut.read_bytes()[:-10])
    with pytest.raises(RawDataError, match=r"data_batch_1\.bin.*truncated.*record 1"):
        Cifar10Dataset(tmp_path)
    cut.write_bytes(bytes([3]) + bytes(3072) + bytes([77]) + bytes(3072))
    ds = Cifar10Dataset(tmp_path, shuffle=False)  # labels are checked as rows are read
    with pytest.raises(RawDataError, match=r"data_batch_1\.bin.*record 1 .*label 77"):
        rows(ds)


def test_cifar10_release_folder_is_looked_into(tmp_path: Path) -> None:
    write_cifar10(tmp_path / "cifar-10-batches-bin", {"test_batch.bin": 4})
    assert Cifar10Dataset(tmp_path, usage="test").get_dataset_size() == 4


# --------------------------------------------------------------------------------- MNIST


def test_mnist_plain_and_gz_give_the_same_rows_in_mindspores_order(tmp_path: Path) -> None:
    ids = write_mnist(tmp_path / "plain", {"train": 5, "test": 3})
    write_mnist(tmp_path / "gz", {"train": 5, "test": 3}, gz=True)
    plain = rows(MnistDataset(tmp_path / "plain", shuffle=False))
    packed = rows(MnistDataset(tmp_path / "gz", shuffle=False))
    assert mnist_ids(np.stack([r["image"] for r in plain])) == ids["test"] + ids["train"]
    for a, b in zip(plain, packed, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
        assert a["image"].shape == (28, 28, 1) and a["label"].dtype == np.uint32
    assert MnistDataset(tmp_path / "gz", usage="train").get_dataset_size() == 5


def test_mnist_bad_input_raises_typed_errors_naming_the_file(tmp_path: Path) -> None:
    write_mnist(tmp_path, {"train": 3})
    with pytest.raises(RawDataError, match=r"MNIST test images not found.*t10k-images-idx3-ubyte"):
        MnistDataset(tmp_path, usage="test")
    images = tmp_path / "train-images-idx3-ubyte"
    good = images.read_bytes()
    images.write_bytes(good[:-5])
    with pytest.raises(RawDataError, match=r"train-images-idx3-ubyte.*truncated"):
        MnistDataset(tmp_path)
    images.write_bytes((tmp_path / "train-labels-idx1-ubyte").read_bytes())
    with pytest.raises(RawDataError, match=r"magic number 2049, expected 2051"):
        MnistDataset(tmp_path)
    images.write_bytes(good)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(
        (2049).to_bytes(4, "big") + (2).to_bytes(4, "big") + bytes(2)
    )
    with pytest.raises(RawDataError, match=r"3 images.*2 labels"):
        MnistDataset(tmp_path)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip")
    (tmp_path / "bad" / "train-labels-idx1-ubyte").write_bytes(gzip.compress(b""))
    with pytest.raises(RawDataError, match=r"cannot read MNIST file.*\.gz"):
        MnistDataset(tmp_path / "bad")


# -------------------------------------------------------------------------- image folder


def test_image_folder_decodes_lists_and_indexes_classes(tmp_path: Path) -> None:
    ids = write_image_folder(tmp_path, {"b_dog": 2, "a_cat": 3})
    (tmp_path / "a_cat" / "notes.TXT").write_bytes(b"not an image")
    decoded = rows(ImageFolderDataset(tmp_path, shuffle=False, decode=True, extensions=[".png"]))
    assert hwc_ids([r["image"] for r in decoded]) == ids["a_cat"] + ids["b_dog"]
    assert [int(r["label"]) for r in decoded] == [0, 0, 0, 1, 1]
    assert decoded[0]["image"].shape == (5, 6, 3) and decoded[0]["label"].dtype == np.int32
    raw = ImageFolderDataset(tmp_path, shuffle=False)  # every file, bytes as uint8
    assert raw.get_dataset_size() == 6
    first = rows(raw)[0]["image"]
    assert first.dtype == np.uint8 and first.ndim == 1
    assert first.tobytes() == (tmp_path / "a_cat" / "img0000.png").read_bytes()
    assert raw.get_class_indexing() == {"a_cat": 0, "b_dog": 1}
    only_dogs = ImageFolderDataset(tmp_path, shuffle=False, class_indexing={"b_dog": 4})
    assert [int(r["label"]) for r in rows(only_dogs)] == [4, 4]
    assert only_dogs.get_class_indexing() == {"b_dog": 4}
    assert ImageFolderDataset(tmp_path, extensions=[".PNG"]).get_dataset_size() == 0


def test_image_folder_walks_subfolders_in_name_order_and_skips_hidden_files(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"cat": 1})
    (tmp_path / "cat" / "b_sub").mkdir()
    (tmp_path / "cat" / "a_file.png").write_bytes(b"A")
    (tmp_path / "cat" / "b_sub" / "deep.png").write_bytes(b"D")
    (tmp_path / "cat" / ".hidden.png").write_bytes(b"H")
    (tmp_path / ".git").mkdir()
    got = [r["image"].tobytes() for r in rows(ImageFolderDataset(tmp_path, shuffle=False))]
    first = (tmp_path / "cat" / "img0000.png").read_bytes()
    assert got == [b"A", first, b"D"]  # files of a folder, then its subfolders


_NAME = st.text(alphabet="ab.J", min_size=1, max_size=5).filter(lambda n: n not in (".", ".."))


@given(names=st.lists(_NAME, max_size=8, unique=True), ignore_case=st.booleans())
def test_image_folder_lists_what_pathlib_would(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], ignore_case: bool
) -> None:
    """The listing's paths and its extension match are pathlib's (``folder / name``,
    ``Path.suffix``), for names with dots anywhere ("a.", ".a", "a..J", "J.a.b")."""
    root = tmp_path_factory.mktemp("walk")
    (root / "cls").mkdir()
    for name in names:
        (root / "cls" / name).write_bytes(b"x")
    wanted = {".a", ".J", "."}  # "." would be a wrong suffix of "a."
    listing = walk_image_folder(root, extensions=wanted, ignore_case=ignore_case)
    visible = sorted(n for n in names if not n.startswith("."))

    def kept(name: str) -> bool:
        suffix = Path(name).suffix
        return (suffix.lower() if ignore_case else suffix) in (
            {w.lower() for w in wanted} if ignore_case else wanted
        )

    assert listing.files == [root / "cls" / n for n in visible if kept(n)]
    assert listing.ignored == [root / "cls" / n for n in visible if not kept(n)]


def test_image_folder_errors_name_the_folder_or_file(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"cat": 1})
    with pytest.raises(RawDataError, match=r"class_indexing names \['dog'\]"):
        ImageFolderDataset(tmp_path, class_indexing={"dog": 0})
    (tmp_path / "cat" / "z.txt").write_bytes(b"plain text")
    ds = ImageFolderDataset(tmp_path, shuffle=False, decode=True)
    with pytest.raises(RawDataError, match=r"cat/z\.txt.*cannot be decoded.*extensions="):
        rows(ds)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RawDataError, match="no class subfolders"):
        ImageFolderDataset(empty)
    with pytest.raises(TypeError, match="extensions"):
        ImageFolderDataset(tmp_path, extensions=".png")  # type: ignore[arg-type]


# ------------------------------------------------- one order for every random-access source


@pytest.fixture(scope="module")
def same_rows(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], tuple[Path, Path]]:
    """An MNIST folder and an mrecord dataset with the same ``n`` rows (ids 0..n-1)."""
    made: dict[int, tuple[Path, Path]] = {}

    def make(n: int) -> tuple[Path, Path]:
        if n not in made:
            root = tmp_path_factory.mktemp(f"same{n}")
            write_mnist(root / "mnist", {"train": n}, size=(3, 3))
            with FileWriter(root / "ids.mrecord") as writer:
                writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
                writer.write_raw_data(
                    {"id": np.arange(n), "label": (np.arange(n) % 10).astype(np.int32)}
                )
            made[n] = (root / "mnist", writer.files[0])
        return made[n]

    return make


@given(
    n=st.sampled_from([1, 7, 23]),
    shuffle=st.booleans(),
    shards=st.sampled_from([None, (3, 0), (3, 2), (5, 4)]),
    num_samples=st.sampled_from([None, 1, 4, 100]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_source_orders_rows_exactly_as_mind_dataset(
    same_rows: Callable[[int], tuple[Path, Path]],
    n: int,
    shuffle: bool,
    shards: tuple[int, int] | None,
    num_samples: int | None,
    seed: int,
) -> None:
    mnist, mind = same_rows(n)
    config.set_seed(seed)
    k, s = shards or (None, None)
    args: dict[str, Any] = {
        "shuffle": shuffle,
        "num_shards": k,
        "shard_id": s,
        "num_samples": num_samples,
    }
    want = [int(r["id"]) for r in MindDataset(str(mind), **args).create_dict_iterator(num_epochs=2)]
    it = MnistDataset(mnist, **args).create_dict_iterator(num_epochs=2)
    got = [mnist_ids(r["image"])[0] for r in it]
    assert got == want


def test_concat_use_sampler_reads_each_source_range(tmp_path: Path) -> None:
    write_cifar10(tmp_path / "a", {"data_batch_1.bin": 5})
    write_cifar10(tmp_path / "b", {"data_batch_1.bin": 4})
    both = Cifar10Dataset(tmp_path / "a", shuffle=False) + Cifar10Dataset(
        tmp_path / "b", shuffle=False
    )
    both.use_sampler(DistributedSampler(2, 1, shuffle=False))
    assert hwc_ids([r["image"] for r in rows(both)]) == [3, 4, 2, 3]


# ---------------------------------------------------------------------------- use_sampler


def test_use_sampler_works_on_every_kind_of_node(tmp_path: Path) -> None:
    with FileWriter(tmp_path / "ids.mrecord") as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(10)})
    mind = MindDataset(str(writer.files[0]))
    mind.use_sampler(DistributedSampler(2, 1, shuffle=False))  # the example
    assert [int(r["id"]) for r in rows(mind)] == [1, 3, 5, 7, 9]
    assert mind.get_dataset_size() == 5

    mapped = MindDataset(str(writer.files[0]), shuffle=False).map(lambda x: x * 10, "id")
    mapped.use_sampler(SequentialSampler(start_index=7))  # passed down to the source
    assert [int(r["id"]) for r in rows(mapped)] == [70, 80, 90]

    gen = GeneratorDataset([(np.int64(i),) for i in range(6)], ["x"], shuffle=False)
    gen.use_sampler(DistributedSampler(3, 0, shuffle=False))
    assert [int(r["x"]) for r in rows(gen)] == [0, 3]

    parent = SequentialSampler(num_samples=3)
    parent.add_child(SubsetSampler([9, 2, 6, 4]))
    keeps_child = MindDataset(str(writer.files[0]), sampler=parent)
    keeps_child.use_sampler(SequentialSampler(start_index=1))  # MindSpore keeps the child
    assert [int(r["id"]) for r in rows(keeps_child)] == [2, 6, 4]

    with pytest.raises(ArgumentError, match="cannot take a sampler"):
        GeneratorDataset(lambda: iter([(1,)]), ["x"]).use_sampler(SequentialSampler())
    with pytest.raises(PipelineError, match="has 2 inputs"):
        mind.zip(gen).use_sampler(SequentialSampler())
    with pytest.raises(TypeError, match="can not be None"):
        mind.use_sampler(None)
    with pytest.raises(TypeError, match="not an instance of a sampler"):
        mind.use_sampler([1, 2])


# -------------------------------------------------------------------------- padded_batch


def ragged() -> GeneratorDataset:
    data = [(np.arange(i + 1, dtype=np.int16), np.array(["s"])) for i in range(3)]
    return GeneratorDataset(data, ["a", "s"], shuffle=False)


def test_padded_batch_pads_named_columns_and_refuses_what_it_cannot_pad() -> None:
    ds = ragged().project("a").padded_batch(2, pad_info={"a": ([4], 7)})
    batches = [b["a"] for b in ds.create_dict_iterator(num_epochs=1)]
    assert [b.tolist() for b in batches] == [[[0, 7, 7, 7], [0, 1, 7, 7]], [[0, 1, 2, 7]]]
    assert batches[0].dtype == np.int16
    assert ds.get_batch_size() == 2 and ds.get_dataset_size() == 2
    assert ds.output_shapes() == [[2, 4]]
    with pytest.raises(PipelineError, match=r"column 'a' row 2 has shape \[3\], larger than"):
        rows(ragged().project("a").padded_batch(3, pad_info={"a": ([2], 0)}))

    def fixed() -> mrecord.Dataset:  # every row [2]: padded with one copy
        return mrecord.NumpySlicesDataset({"x": np.arange(6).reshape(3, 2)}, shuffle=False)

    (whole,) = fixed().padded_batch(3, pad_info={"x": ([4], 9)}).create_dict_iterator(1)
    assert whole["x"].tolist() == [[0, 1, 9, 9], [2, 3, 9, 9], [4, 5, 9, 9]]
    with pytest.raises(PipelineError, match="has 2 dimensions, its rows have 1"):
        rows(fixed().padded_batch(3, pad_info={"x": ([2, 2], 0)}))
    with pytest.raises(PipelineError, match="holds <U1 values; only numeric arrays"):
        rows(ragged().padded_batch(2, pad_info={}))
    with pytest.raises(PipelineError, match=r"pad_info names \['b'\]"):
        rows(ragged().padded_batch(2, pad_info={"b": (None, 0)}))
    with pytest.raises(TypeError, match="pad value must be a number"):
        ragged().padded_batch(2, pad_info={"a": (None, "x")})
    with pytest.raises(ValueError, match="shape entries must be ints >= 1 or None"):
        ragged().padded_batch(2, pad_info={"a": ([0], 1)})


def test_metadata_methods_on_a_source_pipeline(tmp_path: Path) -> None:
    write_cifar10(tmp_path, {"data_batch_1.bin": 6})
    ds = Cifar10Dataset(tmp_path, shuffle=False).batch(4).repeat(3)
    assert ds.get_batch_size() == 4
    assert ds.get_repeat_count() == 3
    assert ds.output_shapes() == [[4, 32, 32, 3], [4]]
    assert [str(t) for t in ds.output_types()] == ["uint8", "uint32"]


# ------------------------------------------------------------- converters share the parsers


def test_converters_read_the_same_rows_as_the_sources(tmp_path: Path) -> None:
    write_cifar10(tmp_path / "c", {"test_batch.bin": 4})
    write_mnist(tmp_path / "m", {"test": 3}, gz=True)
    (batch,) = Cifar10Source(tmp_path / "c", split="test").iter_batches()
    source = rows(Cifar10Dataset(tmp_path / "c", shuffle=False))
    np.testing.assert_array_equal(batch["image"], np.stack([r["image"] for r in source]))
    (mbatch,) = MnistSource(tmp_path / "m", split="test").iter_batches()
    msource = rows(MnistDataset(tmp_path / "m", shuffle=False))
    # both [28, 28, 1] since issue 17 (the converter used to drop the channel axis)
    np.testing.assert_array_equal(mbatch["image"], np.stack([r["image"] for r in msource]))
