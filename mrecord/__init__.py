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
"""

from __future__ import annotations

from typing import Any

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
    data_sink,
)
from mrecord.writer.file_writer import FileWriter

__version__ = "0.1.0"

mstype = dtype  # ``from mindspore import dtype as mstype`` -> ``from mrecord import mstype``

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


def __getattr__(name: str) -> Any:
    """``mrecord.RemoteDataset``, imported on first use (``import mrecord`` loads no serve code)."""
    if name == "RemoteDataset":
        from mrecord.serve.client.dataset import RemoteDataset

        return RemoteDataset
    raise AttributeError(f"module 'mrecord' has no attribute {name!r}")
