"""``Cifar10Dataset``: the CIFAR-10 binary release as a pipeline source (MindSpore's API).

::

    ds = Cifar10Dataset("cifar-10-batches-bin", usage="train", shuffle=False)
    ds.output_types()    # [uint8, uint32]
    ds.output_shapes()   # [[32, 32, 3], []]

Files (``data_batch_*.bin`` for ``train``, ``test_batch*.bin`` for ``test``, both
for ``all`` or None) are read in name order, memory-mapped; a block of rows is one
gather plus one strided copy per colour plane (:mod:`mrecord.rawdata.cifar10`).
Any whole number of records per file is accepted (MindSpore requires 10,000).
"""

from __future__ import annotations

import os

from mrecord.pipeline.sources.usage_source import ImageLabelFiles, UsageSource
from mrecord.rawdata.cifar10 import Cifar10Files, find_cifar10_files

__all__ = ["Cifar10Dataset"]


class Cifar10Dataset(UsageSource):
    """Read the CIFAR-10 binary files in ``dataset_dir``: ``image`` uint8[32, 32, 3], ``label``.

    Args:
        dataset_dir: the folder holding ``data_batch_1.bin`` ... ``test_batch.bin``.
        usage: ``"train"``, ``"test"`` or ``"all"`` (None: all).
        num_samples: rows per epoch (per shard); drawn without replacement.
        num_parallel_workers: reader threads (default ``config.get_num_parallel_workers()``).
        shuffle: True (or None) shuffles globally every epoch, False keeps file order.
        sampler: a sampler instead of shuffle/sharding/num_samples.
        num_shards, shard_id: read one of ``num_shards`` strided shards.
    """

    def _open(self, dataset_dir: str | os.PathLike[str], usage: str | None) -> ImageLabelFiles:
        return Cifar10Files(find_cifar10_files(dataset_dir, usage))
