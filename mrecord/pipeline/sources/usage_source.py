"""The shared base of ``Cifar10Dataset`` and ``MnistDataset``: image/label files picked by usage.

Both take MindSpore's arguments ``(dataset_dir, usage=None, num_samples=None,
num_parallel_workers=None, shuffle=None, sampler=None, num_shards=None,
shard_id=None)``, yield columns ``image`` (uint8, HWC) and ``label`` (uint32), and
read through a parser of :mod:`mrecord.rawdata` that returns ``(images, labels)``
for any row ids. ``shuffle`` is True/False only; None shuffles (as MindSpore).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from mrecord.block import Block, ColumnValues
from mrecord.pipeline.sources.random_access import (
    RandomAccessSource,
    block_rows_for,
    check_bool_shuffle,
)
from mrecord.sampling import Sampler

__all__ = ["ImageLabelFiles", "UsageSource"]


class ImageLabelFiles(Protocol):
    """What a :mod:`mrecord.rawdata` parser gives a :class:`UsageSource`."""

    @property
    def file_row_counts(self) -> list[int]:
        """Rows per file, in order."""

    @property
    def row_bytes(self) -> int:
        """Bytes of one image (sets the rows per block)."""

    def read(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(images, labels)`` of the rows ``ids``."""

    def labels(self) -> np.ndarray:
        """Every row's label, without reading images."""


class UsageSource(RandomAccessSource):
    """Base of the sources whose files are chosen by ``usage`` (see the module docstring)."""

    def __init__(
        self,
        dataset_dir: str | os.PathLike[str],
        usage: str | None = None,
        num_samples: int | None = None,
        num_parallel_workers: int | None = None,
        shuffle: bool | None = None,
        sampler: Sampler | None = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
    ) -> None:
        super().__init__(
            num_parallel_workers=num_parallel_workers,
            shuffle=check_bool_shuffle(shuffle, sampler),
            num_shards=num_shards,
            shard_id=shard_id,
            sampler=sampler,
            num_samples=num_samples,
        )
        self.dataset_dir = dataset_dir
        self.usage = usage
        self._data = self._open(dataset_dir, usage)
        self._block_rows = block_rows_for(self._data.row_bytes)
        self._count_rows()

    def _open(self, dataset_dir: str | os.PathLike[str], usage: str | None) -> ImageLabelFiles:
        """Find and open the files of ``usage``."""
        raise NotImplementedError

    def _images(self, images: np.ndarray) -> np.ndarray:
        """The ``image`` column from the parser's images (default: as they are)."""
        return images

    def _source_column_names(self) -> list[str]:
        return ["image", "label"]

    def _file_row_counts(self) -> Sequence[int]:
        return self._data.file_row_counts

    def _read_rows(self, ids: np.ndarray) -> Block:
        images, labels = self._data.read(ids)
        columns: dict[str, ColumnValues] = {
            "image": self._images(images),
            "label": labels.astype(np.uint32),
        }
        return Block(columns, ids.astype(np.int64))

    def _column_values(self, column: str) -> np.ndarray:
        if column == "label":
            return self._data.labels().astype(np.uint32)
        return super()._column_values(column)

    def _describe(self) -> str:
        where = str(self.dataset_dir)
        return f"{type(self).__name__}({where!r}, usage={self.usage!r}, sampler={self._sampler!r})"
