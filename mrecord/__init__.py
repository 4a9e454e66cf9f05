"""mrecord: a MindRecord-style storage format and reader for machine-learning training data.

MindSpore users switch by changing imports::

    from mrecord import FileWriter, MindDataset, Shuffle, DistributedSampler
    from mrecord import vision, transforms, config

Layers (docs/ARCHITECTURE.md): ``format`` (bytes), ``writer`` (FileWriter),
``reader`` (DatasetReader, MindDataset, MindPage, samplers), ``pipeline``
(map/batch/... and the sink), ``vision``/``transforms`` (ops), ``convert`` and
``cli`` (the ``mrecord`` command), ``serve`` (``mrecord serve`` and ``RemoteDataset``,
imported on first use).
"""

from __future__ import annotations

from typing import Any

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
    "RemoteDataset",
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


def __getattr__(name: str) -> Any:
    """``mrecord.RemoteDataset`` is imported on first use, so ``import mrecord`` needs no httpx."""
    if name == "RemoteDataset":
        from mrecord.serve.remote import RemoteDataset

        return RemoteDataset
    raise AttributeError(f"module 'mrecord' has no attribute {name!r}")
