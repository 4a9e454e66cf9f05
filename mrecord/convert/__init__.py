"""Conversion library: CIFAR-10, MNIST, image folders, CSV, NumPy, MindRecord, Parquet,
Arrow and Hugging Face datasets → mrecord, and mrecord datasets rewritten by the current
writer (``convert_mrecord``).

``tools/`` and ``mrecord convert`` are thin layers over these functions::

    from mrecord.convert import convert_mnist
    convert_mnist("mnist/", "mnist_train.mrecord", split="train", shard_num=2)

Sources (``mrecord.convert.*Source``) can also be iterated on their own: they
yield columnar batches without writing anything.
"""

from __future__ import annotations

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
