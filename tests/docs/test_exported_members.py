"""The public API is what we mean it to be (MindSpore's names, importable from ``mrecord``)."""

from __future__ import annotations

import mrecord

EXPECTED = {
    "BatchInfo",
    "Callback",
    "DeviceQueue",
    "LambdaCallback",
    "LossMonitor",
    "Model",
    "RunContext",
    "TimeMonitor",
    "data_sink",
    "train",
    "Block",
    "Cifar10Dataset",
    "ImageFolderDataset",
    "MnistDataset",
    "ConcatDataset",
    "Dataset",
    "DatasetReader",
    "DistributedSampler",
    "FileWriter",
    "GeneratorDataset",
    "MindDataset",
    "MindPage",
    "MrecordError",
    "NumpySlicesDataset",
    "PKSampler",
    "RaggedColumn",
    "RandomSampler",
    "RemoteDataset",
    "Sampler",
    "SequentialSampler",
    "Shuffle",
    "SourceDataset",
    "SubsetRandomSampler",
    "SubsetSampler",
    "WeightedRandomSampler",
    "__version__",
    "config",
    "errors",
    "from_hf",
    "reindex",
    "to_hf",
    "transforms",
    "verify_dataset",
    "vision",
    # issue 17: MindSpore names a switched user reaches for
    "Schema",
    "Tensor",
    "zip",
    "dtype",
    "mstype",
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "string",
}


def test_all_is_exactly_the_public_api() -> None:
    assert set(mrecord.__all__) == EXPECTED


def test_every_exported_name_exists_and_has_a_docstring() -> None:
    for name in mrecord.__all__:
        member = getattr(mrecord, name)
        if name != "__version__":
            assert member.__doc__, f"mrecord.{name} has no docstring"


def test_shuffle_modes_are_mindspores() -> None:
    assert {m.name for m in mrecord.Shuffle} == {
        "FALSE",
        "GLOBAL",
        "PARTIAL",
        "FILES",
        "INFILE",
        "ADAPTIVE",
        "BLOCK",  # mrecord's own, for low-IOPS storage (docs/MINDSPORE_DIFFERENCES.md)
    }


def test_mindspore_vision_and_transforms_names_exist() -> None:
    for name in [
        "Decode",
        "Resize",
        "CenterCrop",
        "RandomCrop",
        "RandomResizedCrop",
        "RandomCropDecodeResize",
        "RandomHorizontalFlip",
        "RandomVerticalFlip",
        "RandomColorAdjust",
        "RandomSharpness",
        "Rescale",
        "Normalize",
        "HWC2CHW",
        "SlicePatches",
        "Inter",
        "SliceMode",
        # issue 17
        "ToTensor",
        "ToPIL",
        "Pad",
        "Crop",
        "Grayscale",
        "Rotate",
        "Invert",
        "ConvertColor",
        "ConvertMode",
        "ResizedCrop",
        "PadToSize",
        "ToType",
    ]:
        assert hasattr(mrecord.vision, name), name
        assert name in mrecord.vision.__all__, name
        assert getattr(mrecord.vision, name).__doc__, name
    for name in [
        "TypeCast",
        "Compose",
        "OneHot",
        "Fill",
        "Duplicate",
        # issue 17
        "Concatenate",
        "PadEnd",
        "Slice",
        "Mask",
        "Relational",
        "Unique",
        "RandomApply",
        "RandomChoice",
    ]:
        assert hasattr(mrecord.transforms, name), name
        assert name in mrecord.transforms.__all__, name
        assert getattr(mrecord.transforms, name).__doc__, name
    for name in ["split", "apply", "flat_map", "bucket_batch_by_length", "add_sampler"]:
        assert getattr(mrecord.Dataset, name).__doc__, name
    assert mrecord.Dataset.num_classes.__doc__
    assert mrecord.Shuffle.FALSE.value == "false"
    for name in [
        "set_seed",
        "get_seed",
        "set_prefetch_size",
        "set_num_parallel_workers",
        "set_auto_offload",
    ]:
        assert hasattr(mrecord.config, name), name


def test_errors_inherit_the_builtins_users_catch() -> None:
    e = mrecord.errors
    assert issubclass(e.SchemaError, ValueError)
    assert issubclass(e.MissingIndexError, FileNotFoundError)
    assert issubclass(e.SinkTimeoutError, TimeoutError)
    assert issubclass(e.DatasetLockedError, BlockingIOError)
    for name in e.__all__:
        assert issubclass(getattr(e, name), e.MrecordError)
