"""MNIST idx files as a conversion source (plain or gzip-compressed).

The files are read by the same parser as ``MnistDataset``
(:mod:`mrecord.rawdata.mnist`, which documents the idx layout and file names):
plain files memory-mapped, ``.gz`` files decompressed once. The counts of the
images and labels files must agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.errors import ArgumentError
from mrecord.format.features import describe
from mrecord.rawdata.mnist import MnistFiles, find_mnist_files

__all__ = ["MnistSource"]


class MnistSource(Source):
    """MNIST idx files → rows ``image`` (uint8[rows, cols, 1]: HWC, as MindSpore's
    MnistDataset gives them and LeNet's first convolution expects) and ``label`` (int32)."""

    kind = "mnist"

    def __init__(self, src: str | os.PathLike[str], *, split: str = "train"):
        if split not in ("train", "test"):
            raise ArgumentError(f"split must be 'train' or 'test', got {split!r}")
        ((self.images_file, self.labels_file),) = find_mnist_files(src, split)
        self._data = MnistFiles([(self.images_file, self.labels_file)])
        rows, cols = self._data.image_shape
        desc = {"source": "mnist", "split": split, "classes": {str(i): i for i in range(10)}}
        super().__init__(
            name=str(src),
            schema={
                "image": {"type": "uint8", "shape": [rows, cols, 1]},
                "label": {"type": "int32"},
            },
            desc=describe(desc, class_names={"label": [str(i) for i in range(10)]}),
            num_rows=self._data.num_rows,
            index_fields=["label"],
        )

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in file order, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        total = self._data.num_rows
        for start in range(0, total, batch_rows):
            images, labels = self._data.read(np.arange(start, min(start + batch_rows, total)))
            yield {"image": images[:, :, :, None], "label": labels.astype(np.int32)}
