"""``MnistDataset``: MNIST idx files as a pipeline source (MindSpore's API).

::

    ds = MnistDataset("MNIST_Data/train", usage="train", shuffle=False)
    ds.output_types()    # [uint8, uint32]
    ds.output_shapes()   # [[28, 28, 1], []]

Files ``train-*`` (``usage="train"``), ``t10k-*`` (``"test"``) or both, t10k first
(``"all"`` or None: MindSpore's order), plain (memory-mapped) or ``.gz``
(decompressed once), read by :mod:`mrecord.rawdata.mnist`.
"""

from __future__ import annotations

import os

import numpy as np

from mrecord.pipeline.sources.usage_source import ImageLabelFiles, UsageSource
from mrecord.rawdata.mnist import MnistFiles, find_mnist_files

__all__ = ["MnistDataset"]


class MnistDataset(UsageSource):
    """Read the MNIST idx files in ``dataset_dir``: ``image`` uint8[28, 28, 1], ``label``.

    Args:
        dataset_dir: the folder holding ``train-images-idx3-ubyte`` etc. (or ``.gz``).
        usage: ``"train"``, ``"test"`` or ``"all"`` (None: all).
        num_samples, num_parallel_workers, shuffle, sampler, num_shards, shard_id:
            as for :class:`~mrecord.Cifar10Dataset`.
    """

    def _open(self, dataset_dir: str | os.PathLike[str], usage: str | None) -> ImageLabelFiles:
        return MnistFiles(find_mnist_files(dataset_dir, usage))

    def _images(self, images: np.ndarray) -> np.ndarray:
        return images[..., None]  # HWC with one channel, as MindSpore
