"""mrecord: a MindRecord-style storage format and reader for machine-learning training data.

MindSpore users switch by changing imports::

    from mrecord import FileWriter, MindDataset, Shuffle, DistributedSampler
    from mrecord import vision, transforms, config

Layers (docs/ARCHITECTURE.md): ``format`` (bytes), ``writer`` (FileWriter),
``reader`` (DatasetReader, MindDataset, MindPage, samplers), ``pipeline``
(map/batch/... and the sink), ``vision``/``transforms`` (ops), ``convert`` and
``cli`` (the ``mrecord`` command).
"""

from __future__ import annotations

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
from mrecord.pipeline import (
    BatchInfo,
    ConcatDataset,
    Dataset,
    GeneratorDataset,
    NumpySlicesDataset,
    Schema,
    SourceDataset,
    Tensor,
    zip,
)
from mrecord.pipeline.sink import (
    Callback,
    DeviceQueue,
    LambdaCallback,
    LossMonitor,
    Model,
    RunContext,
    TimeMonitor,
    data_sink,
)
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.mind_dataset import MindDataset
from mrecord.reader.mindpage import MindPage
from mrecord.reader.samplers import (
    DistributedSampler,
    PKSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    SubsetSampler,
    WeightedRandomSampler,
)
from mrecord.reader.shuffle import Shuffle
from mrecord.reader.verify import verify_dataset
from mrecord.writer.file_writer import FileWriter
from mrecord.writer.reindex import reindex

__version__ = "0.1.0"

mstype = dtype  # ``from mindspore import dtype as mstype`` -> ``from mrecord import mstype``

__all__ = [
    "BatchInfo",
    "Block",
    "Callback",
    "ConcatDataset",
    "Dataset",
    "DatasetReader",
    "DeviceQueue",
    "DistributedSampler",
    "FileWriter",
    "GeneratorDataset",
    "LambdaCallback",
    "LossMonitor",
    "MindDataset",
    "MindPage",
    "Model",
    "MrecordError",
    "NumpySlicesDataset",
    "PKSampler",
    "RandomSampler",
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
    "int8",
    "int16",
    "int32",
    "int64",
    "mstype",
    "reindex",
    "string",
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
