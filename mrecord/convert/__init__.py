"""Conversion library: CIFAR-10, MNIST, image folders, CSV, NumPy, MindRecord, Parquet,
Arrow and Hugging Face datasets → mrecord, and mrecord datasets rewritten by the current
writer (``convert_mrecord``).

``tools/`` and ``mrecord convert`` are thin layers over these functions::

    from mrecord.convert import convert_mnist
    convert_mnist("mnist/", "mnist_train.mrecord", split="train", shard_num=2)

Sources (``mrecord.convert.*Source``) can also be iterated on their own: they
yield columnar batches without writing anything. Each name is imported on first use
(PEP 562 ``__getattr__``), so a conversion loads only its own source's module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mrecord.convert.api import (
        SOURCES,
        convert,
        convert_arrow,
        convert_cifar10,
        convert_csv,
        convert_hf,
        convert_imagefolder,
        convert_mindrecord,
        convert_mnist,
        convert_mrecord,
        convert_npz,
        convert_parquet,
    )
    from mrecord.convert.arrow_sources import ArrowSource, HfSource, ParquetSource
    from mrecord.convert.base import Source
    from mrecord.convert.cifar10 import Cifar10Source
    from mrecord.convert.csvfile import CsvSource, infer_csv_schema
    from mrecord.convert.driver import ConversionSummary, WriteOptions, write_source
    from mrecord.convert.imagefolder import ImageFolderSource
    from mrecord.convert.mindrecord import MindRecordDataset
    from mrecord.convert.mindrecord_source import MindRecordSource
    from mrecord.convert.mnist import MnistSource
    from mrecord.convert.mrecord_source import MrecordSource
    from mrecord.convert.npz import NpzSource

_WHERE = {
    "SOURCES": "api",
    "convert": "api",
    "convert_arrow": "api",
    "convert_cifar10": "api",
    "convert_csv": "api",
    "convert_hf": "api",
    "convert_imagefolder": "api",
    "convert_mindrecord": "api",
    "convert_mnist": "api",
    "convert_mrecord": "api",
    "convert_npz": "api",
    "convert_parquet": "api",
    "ArrowSource": "arrow_sources",
    "HfSource": "arrow_sources",
    "ParquetSource": "arrow_sources",
    "Source": "base",
    "Cifar10Source": "cifar10",
    "CsvSource": "csvfile",
    "infer_csv_schema": "csvfile",
    "ConversionSummary": "driver",
    "WriteOptions": "driver",
    "write_source": "driver",
    "ImageFolderSource": "imagefolder",
    "MindRecordDataset": "mindrecord",
    "MindRecordSource": "mindrecord_source",
    "MnistSource": "mnist",
    "MrecordSource": "mrecord_source",
    "NpzSource": "npz",
}
"""Public name → the module of this package that defines it (imported on first use)."""


def __getattr__(name: str) -> Any:
    """Import the public name ``name`` on first use: a conversion loads only its own
    source's module."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'mrecord.convert' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"mrecord.convert.{where}"), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    """The public names (loaded or not) and what is loaded."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "SOURCES",
    "ArrowSource",
    "Cifar10Source",
    "ConversionSummary",
    "CsvSource",
    "HfSource",
    "ImageFolderSource",
    "MindRecordDataset",
    "MindRecordSource",
    "MnistSource",
    "MrecordSource",
    "NpzSource",
    "ParquetSource",
    "Source",
    "WriteOptions",
    "convert",
    "convert_arrow",
    "convert_cifar10",
    "convert_csv",
    "convert_hf",
    "convert_imagefolder",
    "convert_mindrecord",
    "convert_mnist",
    "convert_mrecord",
    "convert_npz",
    "convert_parquet",
    "infer_csv_schema",
    "write_source",
]
