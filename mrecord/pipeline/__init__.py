"""The data pipeline: sources, ops (map, batch, shuffle, ...), iterators, offload.

MindSpore names: ``GeneratorDataset``, ``NumpySlicesDataset``, and the op methods
of :class:`Dataset` (``map``, ``batch``, ``shuffle``, ``repeat``, ``project``,
``rename``, ``concat``/``+``, ``zip``, ``take``, ``skip``, ``filter``).
Sources plug in by subclassing :class:`SourceDataset` (docs/PIPELINE.md).

Rooms (docs/ARCHITECTURE.md): ``dataset.py`` (the definition and its fluent API),
``engine/`` (what runs it), ``ops/``, ``sources/``. This module only re-exports them.
"""

from __future__ import annotations

from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.engine.graph import Plan
from mrecord.pipeline.engine.iterator import BlockIterator, DictIterator, TupleIterator
from mrecord.pipeline.engine.tensor import Tensor
from mrecord.pipeline.ops.batch import BatchDataset, BatchInfo
from mrecord.pipeline.ops.concat import ConcatDataset
from mrecord.pipeline.ops.filter import FilterDataset
from mrecord.pipeline.ops.map import MapDataset
from mrecord.pipeline.ops.project import ProjectDataset
from mrecord.pipeline.ops.rename import RenameDataset
from mrecord.pipeline.ops.repeat import RepeatDataset
from mrecord.pipeline.ops.shuffle import ShuffleDataset
from mrecord.pipeline.ops.skip import SkipDataset
from mrecord.pipeline.ops.take import TakeDataset
from mrecord.pipeline.ops.zip import ZipDataset, zip
from mrecord.pipeline.sources import (
    Cifar10Dataset,
    GeneratorDataset,
    ImageFolderDataset,
    MindDataset,
    MnistDataset,
    NumpySlicesDataset,
    Schema,
)
from mrecord.pipeline.sources.base import SourceDataset

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
