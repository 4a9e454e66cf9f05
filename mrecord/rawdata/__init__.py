"""Readers of raw dataset formats: the CIFAR-10 binaries, MNIST idx files, image folders.

One parser per format, shared by the pipeline sources (``Cifar10Dataset``,
``MnistDataset``, ``ImageFolderDataset``) and the converters (``mrecord convert``).
Files are memory-mapped where the format allows (CIFAR-10, plain MNIST) and rows are
gathered a batch at a time; nothing here knows about the pipeline or the writer.
Malformed input raises :class:`~mrecord.errors.RawDataError` naming the file.
"""

from __future__ import annotations

from mrecord.rawdata.cifar10 import Cifar10Files, find_cifar10_files
from mrecord.rawdata.common import check_usage
from mrecord.rawdata.imagefolder import ImageFolderListing, walk_image_folder
from mrecord.rawdata.mnist import MnistFiles, find_mnist_files, read_idx

__all__ = [
    "Cifar10Files",
    "ImageFolderListing",
    "MnistFiles",
    "check_usage",
    "find_cifar10_files",
    "find_mnist_files",
    "read_idx",
    "walk_image_folder",
]
