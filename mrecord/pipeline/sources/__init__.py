"""Pipeline sources built on :class:`~mrecord.pipeline.sources.base.SourceDataset`."""

from __future__ import annotations

from mrecord.pipeline.sources.cifar10 import Cifar10Dataset
from mrecord.pipeline.sources.generator import GeneratorDataset
from mrecord.pipeline.sources.image_folder import ImageFolderDataset
from mrecord.pipeline.sources.mind_dataset import MindDataset
from mrecord.pipeline.sources.mnist import MnistDataset
from mrecord.pipeline.sources.numpy_slices import NumpySlicesDataset
from mrecord.pipeline.sources.schema import Schema

__all__ = [
    "Cifar10Dataset",
    "GeneratorDataset",
    "ImageFolderDataset",
    "MindDataset",
    "MnistDataset",
    "NumpySlicesDataset",
    "Schema",
]
