"""mrecord: a MindRecord-style storage format and reader for machine-learning training data.

MindSpore users switch by changing imports::

    from mrecord import FileWriter, MindDataset, Shuffle, DistributedSampler
    from mrecord import vision, transforms, config

Layers (docs/ARCHITECTURE.md): ``format`` (bytes), ``storage`` (files on disk),
``writer`` (FileWriter), ``reader`` (DatasetReader, MindPage), ``sampling`` (shuffles,
sharding, samplers), ``pipeline`` (MindDataset and the other sources, map/batch/...),
``train`` (the sink and Model), ``maintenance`` (verify, inspect, reindex),
``vision``/``transforms`` (ops), ``convert`` and ``cli`` (the ``mrecord`` command),
``serve`` (``mrecord serve``; ``mrecord.RemoteDataset`` is imported on first use).

Every name here is imported on first use (PEP 562 ``__getattr__``): ``import mrecord``
loads nothing but this table, so ``mrecord convert`` does not pay for the reader,
the pipeline, OpenCV and the training code it never touches (a cold start of the
command took 1.0 s, 0.36 s of which is numpy; docs/CONVERT.md). Type checkers see
the eager imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mrecord import config, dtype, errors, train, transforms, vision
    from mrecord.block import Block
    from mrecord.dtype import (
        bool_,
        float16,
        float32,
        float64,
        int8,
        int16,
        int32,
        int64,
        string,
        uint8,
        uint16,
        uint32,
        uint64,
    )
    from mrecord.errors import MrecordError
    from mrecord.format.ragged_column import RaggedColumn
    from mrecord.hf import from_hf, to_hf
    from mrecord.maintenance.reindex import reindex
    from mrecord.maintenance.verify import verify_dataset
    from mrecord.pipeline import (
        BatchInfo,
        Cifar10Dataset,
        ConcatDataset,
        Dataset,
        GeneratorDataset,
        ImageFolderDataset,
        MindDataset,
        MnistDataset,
        NumpySlicesDataset,
        Schema,
        SourceDataset,
        Tensor,
        zip,
    )
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.reader.mindpage import MindPage
    from mrecord.sampling import (
        DistributedSampler,
        PKSampler,
        RandomSampler,
        Sampler,
        SequentialSampler,
        Shuffle,
        SubsetRandomSampler,
        SubsetSampler,
        WeightedRandomSampler,
    )
    from mrecord.train import (
        Callback,
        DeviceQueue,
        LambdaCallback,
        LossMonitor,
        Model,
        RunContext,
        TimeMonitor,
    )
    from mrecord.train.data_sink import data_sink
    from mrecord.writer.file_writer import FileWriter

    mstype = dtype

__version__ = "0.1.0"

__all__ = [
    "BatchInfo",
    "Block",
    "Callback",
    "Cifar10Dataset",
    "ConcatDataset",
    "Dataset",
    "DatasetReader",
    "DeviceQueue",
    "DistributedSampler",
    "FileWriter",
    "GeneratorDataset",
    "ImageFolderDataset",
    "LambdaCallback",
    "LossMonitor",
    "MindDataset",
    "MindPage",
    "MnistDataset",
    "Model",
    "MrecordError",
    "NumpySlicesDataset",
    "PKSampler",
    "RaggedColumn",
    "RandomSampler",
    "RemoteDataset",
    "RunContext",
    "Sampler",
    "Schema",
    "SequentialSampler",
    "Shuffle",
    "SourceDataset",
    "SubsetRandomSampler",
    "SubsetSampler",
    "Tensor",
    "TimeMonitor",
    "WeightedRandomSampler",
    "__version__",
    "bool_",
    "config",
    "data_sink",
    "dtype",
    "errors",
    "float16",
    "float32",
    "float64",
    "from_hf",
    "int8",
    "int16",
    "int32",
    "int64",
    "mstype",
    "reindex",
    "string",
    "to_hf",
    "train",
    "transforms",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "verify_dataset",
    "vision",
    "zip",
]

# ``from mrecord import vision``: these are submodules, loaded as themselves.
_SUBMODULES = frozenset({"config", "dtype", "errors", "train", "transforms", "vision"})

# Every other public name and the module that defines it.
_WHERE: dict[str, str] = {
    "Block": "mrecord.block",
    "RaggedColumn": "mrecord.format.ragged_column",
    "bool_": "mrecord.dtype",
    "float16": "mrecord.dtype",
    "float32": "mrecord.dtype",
    "float64": "mrecord.dtype",
    "int16": "mrecord.dtype",
    "int32": "mrecord.dtype",
    "int64": "mrecord.dtype",
    "int8": "mrecord.dtype",
    "string": "mrecord.dtype",
    "uint16": "mrecord.dtype",
    "uint32": "mrecord.dtype",
    "uint64": "mrecord.dtype",
    "uint8": "mrecord.dtype",
    "MrecordError": "mrecord.errors",
    "from_hf": "mrecord.hf",
    "to_hf": "mrecord.hf",
    "reindex": "mrecord.maintenance.reindex",
    "verify_dataset": "mrecord.maintenance.verify",
    "BatchInfo": "mrecord.pipeline",
    "Cifar10Dataset": "mrecord.pipeline",
    "ConcatDataset": "mrecord.pipeline",
    "Dataset": "mrecord.pipeline",
    "GeneratorDataset": "mrecord.pipeline",
    "ImageFolderDataset": "mrecord.pipeline",
    "MindDataset": "mrecord.pipeline",
    "MnistDataset": "mrecord.pipeline",
    "NumpySlicesDataset": "mrecord.pipeline",
    "Schema": "mrecord.pipeline",
    "SourceDataset": "mrecord.pipeline",
    "Tensor": "mrecord.pipeline",
    "zip": "mrecord.pipeline",
    "DatasetReader": "mrecord.reader.dataset_reader",
    "MindPage": "mrecord.reader.mindpage",
    "DistributedSampler": "mrecord.sampling",
    "PKSampler": "mrecord.sampling",
    "RandomSampler": "mrecord.sampling",
    "Sampler": "mrecord.sampling",
    "SequentialSampler": "mrecord.sampling",
    "Shuffle": "mrecord.sampling",
    "SubsetRandomSampler": "mrecord.sampling",
    "SubsetSampler": "mrecord.sampling",
    "WeightedRandomSampler": "mrecord.sampling",
    "RemoteDataset": "mrecord.serve.client.dataset",
    "Callback": "mrecord.train",
    "DeviceQueue": "mrecord.train",
    "LambdaCallback": "mrecord.train",
    "LossMonitor": "mrecord.train",
    "Model": "mrecord.train",
    "RunContext": "mrecord.train",
    "TimeMonitor": "mrecord.train",
    "data_sink": "mrecord.train.data_sink",
    "FileWriter": "mrecord.writer.file_writer",
}


def __getattr__(name: str) -> Any:
    """Import the public name ``name`` on first use (see the module docstring)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"mrecord.{name}")
    if name == "mstype":  # ``from mindspore import dtype as mstype``
        return importlib.import_module("mrecord.dtype")
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'mrecord' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    """The public names (loaded or not) and what is loaded."""
    return sorted(set(globals()) | set(__all__))
