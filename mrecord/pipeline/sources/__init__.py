"""Pipeline sources built on :class:`~mrecord.pipeline.source.SourceDataset`."""

from __future__ import annotations

from mrecord.pipeline.sources.generator import GeneratorDataset
from mrecord.pipeline.sources.mind_dataset import MindDataset
from mrecord.pipeline.sources.numpy_slices import NumpySlicesDataset
from mrecord.pipeline.sources.schema import Schema

__all__ = ["GeneratorDataset", "MindDataset", "NumpySlicesDataset", "Schema"]
