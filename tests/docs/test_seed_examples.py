"""Every code example of the MindSpore documents in ``shared/seeds/`` runs on mrecord.

Each example is the document's code with only its imports and data paths changed
(``import mindspore.dataset as ds`` becomes ``import mrecord as ds``), on small files
this module writes in the real formats. A line that needs MindSpore's network,
compiler or tensor API is replaced, and a comment says so. mrecord takes numpy
dtypes, so ``ms.int32`` / ``mstype.int32`` become ``np.int32``.

Where each seed is covered:

- 000 "Dataset Slicing": ``create_dataset`` on rank 5 of 8 with 1x8 patches is the block
  of docs/SLICING.md, run by ``tests/docs/test_docs_examples.py``.
- 001 "Enabling Offload": below (both options, the multi-column example, constraint 2).
- 002 DistributedSampler: below (the sampler examples, add_child/get_child/get_num_samples).
- 003 on-device LeNet: below, through ``Model.train(..., dataset_sink_mode=True, sink_size=...)``.
- 004 data FAQ: below (prefetch size, GeneratorDataset shuffle and sharding, merging
  columns, the multi-image and multi-label MindRecords with ``Decode``, the
  ``ImageDataset`` examples, the "not a tree" error).
"""

# The documents' lines are kept as written: long lines, and the FAQ's ``f.close`` without a call.
# ruff: noqa: E501, B018
from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import mrecord as ds
from mrecord import config, transforms, vision
from mrecord.errors import ArgumentError, OperationError, PipelineError
from mrecord.testing.rawdata import hwc_ids, write_cifar10, write_image_folder, write_mnist


@pytest.fixture(autouse=True)
def _reset_config() -> Iterator[None]:
    yield
    config.reset()


def write_jpeg(path: Path, height: int, width: int, seed: int) -> Path:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="JPEG")
    return path


# ------------------------------------------------------------------- 001 offload


def test_offload_option_1_sets_automatic_offload() -> None:
    ds.config.set_auto_offload(True)
    assert ds.config.get_auto_offload() is True


def test_offload_option_2_and_the_multi_column_example(tmp_path: Path) -> None:
    import numpy as mstype  # import mindspore.common.dtype as mstype: mrecord takes numpy dtypes

    import mrecord as ds
    import mrecord.transforms as c_tranforms
    import mrecord.vision as c_vision

    for name in ("cat", "dog"):
        (tmp_path / name).mkdir()
        for i in range(3):
            write_jpeg(tmp_path / name / f"{i}.jpg", 40, 48, seed=i)
    dir = str(tmp_path)  # the document's name
    train_image_size = 32
    mean, std = [0.485 * 255, 0.456 * 255, 0.406 * 255], [0.229 * 255, 0.224 * 255, 0.225 * 255]

    # the document writes ds.ImageFolder(dir): MindSpore's class is ImageFolderDataset
    dataset: ds.Dataset = ds.ImageFolderDataset(dir)
    type_cast_op = c_tranforms.TypeCast(mstype.int32)
    image_ops = [
        c_vision.RandomCropDecodeResize(train_image_size),
        c_vision.RandomHorizontalFlip(prob=0.5),
        c_vision.Normalize(mean=mean, std=std),
        c_vision.HWC2CHW(),
    ]
    dataset = dataset.map(operations=type_cast_op, input_columns="label", offload=True)
    dataset = dataset.map(operations=image_ops, input_columns="image", offload=True)

    plan = str(dataset.plan())  # the offloadable tail of each map moved to the offload step
    assert "  label: TypeCast(data_type='int32')" in plan
    assert "  image: RandomHorizontalFlip(prob=0.5), Normalize(" in plan
    assert plan.split("  image: ")[1].split("\n")[0].endswith("HWC2CHW()")
    got = list(dataset.create_dict_iterator(num_epochs=1))
    assert len(got) == 6
    assert got[0]["image"].shape == (3, 32, 32) and got[0]["image"].dtype == np.float32
    assert sorted(int(r["label"]) for r in got) == [0, 0, 0, 1, 1, 1]

    def copy_column(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return x, x, y

    dataset = ds.ImageFolderDataset(dir, shuffle=False)
    dataset = dataset.map(operations=type_cast_op, input_columns="label")
    dataset = dataset.map(
        operations=copy_column,
        input_columns=["image", "label"],
        output_columns=["image1", "image2", "label"],
    )
    # column_order= left map in MindSpore 2.0; project orders the columns
    dataset = dataset.project(["image1", "image2", "label"])
    dataset = dataset.map(operations=image_ops, input_columns=["image1"], offload=True)
    dataset = dataset.map(operations=image_ops, input_columns=["image2"], offload=True)
    row = next(iter(dataset.create_dict_iterator(num_epochs=1)))
    assert list(row) == ["image1", "image2", "label"]
    assert row["image1"].shape == row["image2"].shape == (3, 32, 32)
    assert row["label"].dtype == np.int32

    # Constraint 2: an offloaded map on "label" followed by a plain one on "image".
    dataset = ds.ImageFolderDataset(dir)
    dataset = dataset.map(operations=type_cast_op, input_columns="label", offload=True)
    dataset = dataset.map(operations=image_ops, input_columns="image", offload=False)
    assert len(list(dataset.create_dict_iterator(num_epochs=1))) == 6


# --------------------------------------------------------- 002 DistributedSampler


def test_distributed_sampler_examples(tmp_path: Path) -> None:
    import mrecord as ds

    image_folder_dataset_dir = str(tmp_path / "images")
    ids = write_image_folder(image_folder_dataset_dir, {"a": 12, "b": 11})
    cifar10_dataset_dir = str(tmp_path / "cifar")
    write_cifar10(cifar10_dataset_dir, {"data_batch_1.bin": 20})

    # creates a distributed sampler with 10 shards in total. This shard is shard 5.
    sampler: ds.Sampler = ds.DistributedSampler(10, 5)
    dataset: ds.Dataset = ds.ImageFolderDataset(
        image_folder_dataset_dir, num_parallel_workers=2, sampler=sampler
    )  # the document asks for 8 workers; this test machine has 2 cores
    assert dataset.get_dataset_size() == 3  # ceil(23 / 10)
    shard = [int(r["label"]) for r in dataset.create_dict_iterator(num_epochs=1)]
    assert len(shard) == 3
    every = set()
    for shard_id in range(10):
        part = ds.ImageFolderDataset(
            image_folder_dataset_dir, decode=True, sampler=ds.DistributedSampler(10, shard_id)
        )
        every |= set(hwc_ids([r["image"] for r in part.create_dict_iterator(num_epochs=1)]))
    assert every == set(ids["a"] + ids["b"])  # the 10 shards cover the data

    sampler = ds.SequentialSampler(start_index=0, num_samples=3)
    sampler.add_child(ds.RandomSampler(num_samples=4))
    dataset = ds.Cifar10Dataset(cifar10_dataset_dir, sampler=sampler)
    got = hwc_ids([r["image"] for r in dataset.create_dict_iterator(num_epochs=1)])
    assert len(got) == 3 and len(set(got)) == 3 and set(got) <= set(range(20))

    sampler = ds.SequentialSampler(start_index=0, num_samples=3)
    sampler.add_child(ds.RandomSampler(num_samples=2))
    child_sampler = sampler.get_child()
    assert isinstance(child_sampler, ds.RandomSampler)

    sampler = ds.SequentialSampler(start_index=0, num_samples=3)
    num_samplers = sampler.get_num_samples()
    assert num_samplers == 3


# ------------------------------------------------------------ 003 on-device LeNet


def test_lenet_data_pipeline_trains_with_data_sinking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as ms_dtype  # ms.int32: mrecord takes numpy dtypes

    import mrecord as ds
    import mrecord as ms  # Model, LossMonitor: mrecord's training-loop driver
    import mrecord.transforms as transforms
    import mrecord.vision as vision
    from mrecord.vision import Inter

    def create_dataset(data_path: str, batch_size: int = 32, repeat_size: int = 1, num_parallel_workers: int = 1) -> ds.Dataset:
        """
        create dataset for train or test
        """
        # define dataset
        mnist_ds: ds.Dataset = ds.MnistDataset(data_path)

        resize_height, resize_width = 32, 32
        rescale = 1.0 / 255.0
        shift = 0.0
        rescale_nml = 1 / 0.3081
        shift_nml = -1 * 0.1307 / 0.3081

        # define map operations
        resize_op = vision.Resize((resize_height, resize_width), interpolation=Inter.LINEAR)
        rescale_nml_op = vision.Rescale(rescale_nml, shift_nml)
        rescale_op = vision.Rescale(rescale, shift)
        hwc2chw_op = vision.HWC2CHW()
        type_cast_op = transforms.TypeCast(ms_dtype.int32)

        # apply map operations on images
        mnist_ds = mnist_ds.map(input_columns="label", operations=type_cast_op, num_parallel_workers=num_parallel_workers)
        mnist_ds = mnist_ds.map(input_columns="image", operations=resize_op, num_parallel_workers=num_parallel_workers)
        mnist_ds = mnist_ds.map(input_columns="image", operations=rescale_op, num_parallel_workers=num_parallel_workers)
        mnist_ds = mnist_ds.map(input_columns="image", operations=rescale_nml_op, num_parallel_workers=num_parallel_workers)
        mnist_ds = mnist_ds.map(input_columns="image", operations=hwc2chw_op, num_parallel_workers=num_parallel_workers)

        # apply DatasetOps
        buffer_size = 10000
        mnist_ds = mnist_ds.shuffle(buffer_size=buffer_size)  # 10000 as in LeNet train script
        mnist_ds = mnist_ds.batch(batch_size, drop_remainder=True)
        mnist_ds = mnist_ds.repeat(repeat_size)
        return mnist_ds

    # ms.set_context(mode=ms.GRAPH_MODE, device_target="GPU")  # MindSpore's compiler
    ds_train_path = str(tmp_path / "datasets" / "MNIST_Data" / "train")
    # download_dataset(...train-labels/images...): the files are written here instead
    write_mnist(ds_train_path, {"train": 100})
    ds_train = create_dataset(ds_train_path, 32)
    assert ds_train.get_dataset_size() == 3  # 100 rows, batches of 32, remainder dropped

    # network = LeNet5(10); net_loss = ...; net_opt = ...  # MindSpore's network API:
    # a numpy step stands in, checking each batch and returning a loss
    seen: list[tuple[tuple[int, ...], Any, tuple[int, ...], Any]] = []

    def network(image: np.ndarray, label: np.ndarray) -> float:
        seen.append((image.shape, image.dtype, label.shape, label.dtype))
        return float(np.mean(image))

    model = ms.Model(network)
    print("============== Starting Training ==============")
    model.train(
        epoch=4,
        train_dataset=ds_train,
        callbacks=[ms.LossMonitor()],
        dataset_sink_mode=True,
        sink_size=2,
    )  # the document trains 10 epochs of 1000 batches of 60,000 images
    assert len(seen) == 4 * 2  # epoch * sink_size steps, the dataset traversed endlessly
    assert set(seen) == {((32, 1, 32, 32), np.dtype(np.float32), (32,), np.dtype(np.int32))}
    printed = [line for line in capsys.readouterr().out.splitlines() if "loss is" in line]
    assert [line.split(",")[0] for line in printed] == [
        f"epoch: {e} step: 2" for e in range(1, 5)
    ]  # one loss per sink, i.e. per epoch


# ---------------------------------------------------------------------- 004 FAQ


def test_faq_lower_memory_settings_and_prefetch_size(tmp_path: Path) -> None:
    import mrecord as ds

    write_mnist(tmp_path, {"train": 40})
    ds.config.set_prefetch_size(2)
    assert ds.config.get_prefetch_size() == 2
    dataset: ds.Dataset = ds.MnistDataset(str(tmp_path), num_parallel_workers=1)
    dataset = dataset.map(operations=vision.Rescale(1 / 255, 0), input_columns="image", num_parallel_workers=1)
    dataset = dataset.batch(8, num_parallel_workers=1)
    dataset = dataset.shuffle(buffer_size=2)
    assert sum(len(b["label"]) for b in dataset.create_dict_iterator(num_epochs=1)) == 40


def test_faq_generator_shuffle_needs_a_random_access_source() -> None:
    import mrecord as ds

    class MyDataset:  # random access: __getitem__ and __len__
        def __getitem__(self, index: int) -> tuple[np.ndarray]:
            return (np.array(index),)

        def __len__(self) -> int:
            return 50

    def generator() -> Iterator[tuple[np.ndarray]]:  # yield: no random access
        for i in range(50):
            yield (np.array(i),)

    def order(dataset: ds.Dataset) -> list[int]:
        return [int(r["data"]) for r in dataset.create_dict_iterator(num_epochs=1)]

    shuffled = order(ds.GeneratorDataset(MyDataset(), ["data"], shuffle=True))
    assert sorted(shuffled) == list(range(50)) and shuffled != list(range(50))
    assert order(ds.GeneratorDataset(MyDataset(), ["data"], shuffle=False)) == list(range(50))
    # MindSpore silently ignores shuffle=True here (the FAQ's question); mrecord says why
    with pytest.raises(ArgumentError, match="needs a random-access source"):
        ds.GeneratorDataset(generator, ["data"], shuffle=True)
    assert order(ds.GeneratorDataset(generator, ["data"])) == list(range(50))


def test_faq_merging_two_columns_with_map() -> None:
    import mrecord as ds

    data = np.arange(12).reshape(2, 2, 3)
    data2 = np.arange(100, 108).reshape(2, 4)
    dataset: ds.Dataset = ds.NumpySlicesDataset({"data": data, "data2": data2}, shuffle=False)

    def combine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x = x.flatten()
        y = y.flatten()
        return np.append(x, y)

    dataset = dataset.map(operations=combine, input_columns=["data", "data2"], output_columns=["data"])
    rows = list(dataset.create_dict_iterator(num_epochs=1))
    assert dataset.get_col_names() == ["data"]
    np.testing.assert_array_equal(rows[1]["data"], [6, 7, 8, 9, 10, 11, 104, 105, 106, 107])


def test_faq_generator_dataset_shards_across_cards() -> None:
    import mrecord as ds

    class Source:
        def __getitem__(self, index: int) -> tuple[np.ndarray]:
            return (np.array(index),)

        def __len__(self) -> int:
            return 30

    num_shards = 8
    cards = []
    for device_id in range(num_shards):  # 卡0 .. 卡7
        dataset = ds.GeneratorDataset(Source(), ["data"], num_shards=num_shards, shard_id=device_id)
        cards.append([int(r["data"]) for r in dataset.create_dict_iterator(num_epochs=1)])
    assert all(len(c) == 4 for c in cards)  # ceil(30 / 8), the short shards wrap around
    assert set().union(*map(set, cards)) == set(range(30))


def test_faq_mindrecord_with_several_images_per_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mrecord as ds
    import mrecord.vision as vision
    from mrecord import FileWriter
    from mrecord.vision import Inter

    monkeypatch.chdir(tmp_path)
    for i, (h, w) in enumerate([(20, 30), (40, 16), (24, 24)], start=1):
        write_jpeg(tmp_path / f"{i}.jpg", h, w, seed=i)

    #1 The defined schema is as follows: Among them, data1, data2, data3, ... These fields store your image, and only the binary of the image is stored here.
    cv_schema_json = {"label": {"type": "int32"}, "data1": {"type": "bytes"}, "data2": {"type": "bytes"}, "data3": {"type": "bytes"}}

    #2 The organized data can be as follows, and then this data_list can be written by FileWriter.write_raw_data(...).
    data_list = []
    data: dict[str, Any] = {}
    data['label'] = 1

    f = open("1.jpg", "rb")  # noqa: SIM115  (as written)
    image_bytes = f.read()
    f.close

    data['data1'] = image_bytes

    f2 = open("2.jpg", "rb")  # noqa: SIM115
    image_bytes2 = f2.read()
    f2.close

    data['data2'] = image_bytes2

    f3 = open("3.jpg", "rb")  # noqa: SIM115
    image_bytes3 = f3.read()
    f3.close

    data['data3'] = image_bytes3

    data_list.append(data)
    for handle in (f, f2, f3):  # the document's f.close lacks the call
        handle.close()

    writer = FileWriter("mindrecord_file_name", shard_num=1)  # the "..." of step #2
    writer.add_schema(cv_schema_json, "schema")
    writer.write_raw_data(data_list)
    writer.commit()

    #3 Use MindDataset to load, then use the decode operation we provide to decode, and then perform subsequent processing.
    data_set: ds.Dataset = ds.MindDataset("mindrecord_file_name")
    data_set = data_set.map(input_columns=["data1"], operations=vision.Decode(), num_parallel_workers=2)
    data_set = data_set.map(input_columns=["data2"], operations=vision.Decode(), num_parallel_workers=2)
    data_set = data_set.map(input_columns=["data3"], operations=vision.Decode(), num_parallel_workers=2)
    resize_op = vision.Resize((32, 32), interpolation=Inter.LINEAR)
    data_set = data_set.map(operations=resize_op, input_columns=["data1"], num_parallel_workers=2)
    items = []
    for item in data_set.create_dict_iterator(output_numpy=True):
        print(item)
        items.append(item)
    (item,) = items
    assert item["data1"].shape == (32, 32, 3)
    assert item["data2"].shape == (40, 16, 3) and item["data3"].shape == (24, 24, 3)
    assert int(item["label"]) == 1


def test_faq_multi_label_mindrecord(tmp_path: Path) -> None:
    import mrecord as ds

    cv_schema_json = {"label": {"type": "int32", "shape": [-1]}, "data": {"type": "bytes"}}
    writer = ds.FileWriter(str(tmp_path / "multi.mrecord"), shard_num=1)
    writer.add_schema(cv_schema_json, "multi-label")
    writer.write_raw_data(
        [
            {"label": np.array([1, 1, 0, 1, 0, 1], dtype=np.int32), "data": b"same image"},
            {"label": np.array([0, 1], dtype=np.int32), "data": b"another"},
        ]
    )
    writer.commit()
    rows = list(ds.MindDataset(str(tmp_path / "multi.mrecord"), shuffle=False).create_dict_iterator(num_epochs=1))
    assert [r["label"].tolist() for r in rows] == [[1, 1, 0, 1, 0, 1], [0, 1]]


def test_faq_image_dataset_returning_bytes_arrays_or_decoded_images(tmp_path: Path) -> None:
    import mrecord as ds
    import mrecord.vision as py_vision

    data_path = [str(write_jpeg(tmp_path / f"{i}.jpg", 12 + i, 10, seed=i)) for i in range(3)]

    class ImageDataset:
        def __init__(self, data_path: list[str]) -> None:
            self.data = data_path

        def __getitem__(self, index: int) -> tuple[Any, ...]:
            # use file open and read method
            f = open(self.data[index], 'rb')  # noqa: SIM115
            img_bytes = f.read()
            f.close()

            # return bytes directly
            return (img_bytes, )

        def __len__(self) -> int:
            return len(self.data)

    # data_path is a list of image file name
    dataset1: ds.Dataset = ds.GeneratorDataset(ImageDataset(data_path), ["data"])
    decode_op = py_vision.Decode()
    # py_vision.ToTensor(output_type=np.int32) is not in mrecord: these three ops are what it does
    to_tensor = [py_vision.Rescale(1.0 / 255.0, 0.0), py_vision.HWC2CHW(), transforms.TypeCast(np.int32)]
    dataset1 = dataset1.map(operations=[decode_op, *to_tensor], input_columns=["data"])
    shapes = sorted(r["data"].shape for r in dataset1.create_dict_iterator(num_epochs=1))
    assert shapes == [(3, 12, 10), (3, 13, 10), (3, 14, 10)]

    Dataset = ImageDataset(data_path)  # the FAQ's debugging loop over the source itself
    # iterates through __getitem__ until IndexError, a protocol mypy does not model
    assert sum(1 for _item in Dataset) == 3  # type: ignore[attr-defined,misc]

    class ArrayDataset(ImageDataset):
        def __getitem__(self, index: int) -> tuple[Any, ...]:
            # use np.fromfile to read image
            img_np = np.fromfile(self.data[index])
            # return Numpy array directly
            return (img_np, )

    # np.fromfile without dtype=np.uint8 reads float64: Decode takes its raw bytes (as MindSpore
    # does since issue 17), but fromfile dropped the file's last size % 8 bytes: a truncated JPEG
    arrays = ds.GeneratorDataset(ArrayDataset(data_path), ["data"]).map(operations=decode_op, input_columns=["data"])
    with pytest.raises(OperationError, match=r"truncated"):
        list(arrays.create_dict_iterator(num_epochs=1))

    class DecodedDataset(ImageDataset):
        def __getitem__(self, index: int) -> tuple[Any, ...]:
            # use Image.Open to open file, and convert to RGC
            img_rgb = Image.open(self.data[index]).convert("RGB")  # the FAQ's Image.Open is a typo
            return (img_rgb, )

    decoded = ds.GeneratorDataset(DecodedDataset(data_path), ["data"])
    first = next(iter(decoded.create_dict_iterator(num_epochs=1)))["data"]
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3


def test_faq_random_access_dataset_with_copied_arrays() -> None:
    import mrecord as ds

    class RandomAccessDataset:
        def __init__(self) -> None:
            pass

        def __getitem__(self, item: int) -> np.ndarray:
            ndarray = np.zeros((544, 1056, 3))
            # tensor = Tensor.from_numpy(ndarray); ndarray_1 = tensor.asnumpy()  # MindSpore tensors
            ndarray_1 = ndarray
            ndarray_2 = copy.deepcopy(ndarray_1)
            return ndarray_2

        def __len__(self) -> int:
            return 8

    data1 = ds.GeneratorDataset(RandomAccessDataset(), ["data"])
    shapes = [r["data"].shape for r in data1.create_dict_iterator(num_epochs=1)]
    assert shapes == [(544, 1056, 3)] * 8


def test_faq_a_node_with_two_consumers_is_not_a_tree() -> None:
    import mrecord as ds

    dataset1 = ds.NumpySlicesDataset({"image": [b"x", b"y"]}, shuffle=False)
    dataset2 = dataset1.map(operations=lambda x: x, input_columns="image")
    dataset3 = dataset1.map(operations=lambda x: x, input_columns="image")
    with pytest.raises(PipelineError, match="not a tree"):
        list(dataset3.create_dict_iterator(num_epochs=1))
    del dataset2
    # the right way: dataset3 is built from dataset2
    dataset1 = ds.NumpySlicesDataset({"image": [b"x", b"y"]}, shuffle=False)
    dataset2 = dataset1.map(operations=lambda x: x, input_columns="image")
    dataset3 = dataset2.map(operations=lambda x: x, input_columns="image")
    assert len(list(dataset3.create_dict_iterator(num_epochs=1))) == 2

