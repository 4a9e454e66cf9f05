"""The data pipeline: sources, ops (map, batch, shuffle, ...), iterators, offload.

MindSpore names: ``GeneratorDataset``, ``NumpySlicesDataset``, and the op methods
of :class:`Dataset` (``map``, ``batch``, ``shuffle``, ``repeat``, ``project``,
``rename``, ``concat``/``+``, ``zip``, ``take``, ``skip``, ``filter``).
Sources plug in by subclassing :class:`SourceDataset` (docs/PIPELINE.md).
"""

from __future__ import annotations

from mrecord.pipeline.batch import BatchDataset, BatchInfo
from mrecord.pipeline.concat import ConcatDataset
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.filter import FilterDataset
from mrecord.pipeline.graph import Plan
from mrecord.pipeline.iterator import BlockIterator, DictIterator, TupleIterator
from mrecord.pipeline.map import MapDataset
from mrecord.pipeline.project import ProjectDataset
from mrecord.pipeline.rename import RenameDataset
from mrecord.pipeline.repeat import RepeatDataset
from mrecord.pipeline.shuffle import ShuffleDataset
from mrecord.pipeline.skip import SkipDataset
from mrecord.pipeline.source import SourceDataset
from mrecord.pipeline.sources import (
    Cifar10Dataset,
    GeneratorDataset,
    ImageFolderDataset,
    MindDataset,
    MnistDataset,
    NumpySlicesDataset,
    Schema,
)
from mrecord.pipeline.take import TakeDataset
from mrecord.pipeline.tensor import Tensor
from mrecord.pipeline.zip import ZipDataset, zip

__all__ = [
    "BatchDataset",
    "BatchInfo",
    "BlockIterator",
    "Cifar10Dataset",
    "ConcatDataset",
    "Dataset",
    "DictIterator",
    "FilterDataset",
    "GeneratorDataset",
    "ImageFolderDataset",
    "MapDataset",
    "MindDataset",
    "MnistDataset",
    "NumpySlicesDataset",
    "Plan",
    "ProjectDataset",
    "RenameDataset",
    "RepeatDataset",
    "Schema",
    "ShuffleDataset",
    "SkipDataset",
    "SourceDataset",
    "TakeDataset",
    "Tensor",
    "TupleIterator",
    "ZipDataset",
    "zip",
]
