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

from mrecord import config, errors, transforms, vision
from mrecord.block import Block
from mrecord.errors import MrecordError
from mrecord.pipeline import (
    ConcatDataset,
    Dataset,
    GeneratorDataset,
    NumpySlicesDataset,
    SourceDataset,
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
    "Block",
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
    "RandomSampler",
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
    "reindex",
    "transforms",
    "verify_dataset",
    "vision",
]
