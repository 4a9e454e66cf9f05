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

from mrecord import config, errors, train, transforms, vision
from mrecord.block import Block
from mrecord.errors import MrecordError
from mrecord.pipeline import (
    BatchInfo,
    ConcatDataset,
    Dataset,
    GeneratorDataset,
    NumpySlicesDataset,
    SourceDataset,
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
from mrecord.pipeline.sources import Cifar10Dataset, ImageFolderDataset, MnistDataset
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
    "RunContext",
    "Sampler",
    "SequentialSampler",
    "Shuffle",
    "SourceDataset",
    "SubsetRandomSampler",
    "SubsetSampler",
    "TimeMonitor",
    "WeightedRandomSampler",
    "__version__",
    "config",
    "data_sink",
    "errors",
    "reindex",
    "train",
    "transforms",
    "verify_dataset",
    "vision",
]
