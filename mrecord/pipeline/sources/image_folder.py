"""``ImageFolderDataset``: a folder of class subfolders of images as a pipeline source.

::

    ds = ImageFolderDataset("photos", extensions=[".jpg"], decode=True, shuffle=False)
    ds.get_class_indexing()   # {"cat": 0, "dog": 1}

Columns ``image`` and ``label`` (``int32``), as MindSpore: ``image`` is the file's
bytes as a ``uint8`` array, or with ``decode=True`` an RGB ``uint8[H, W, 3]``
array. Class folders are sorted by name (labelled 0, 1, ... unless
``class_indexing`` gives the labels and picks the folders), files are sorted
inside each (:func:`mrecord.rawdata.imagefolder.walk_image_folder`); ``extensions``
keeps only the files with those exact suffixes (None: every file). Shuffling,
sharding, ``num_samples`` and samplers are those of every random-access source;
``shuffle=None`` shuffles.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from mrecord.block import Block
from mrecord.errors import WrongTypeError
from mrecord.pipeline.sources.random_access import (
    RandomAccessSource,
    block_rows_for,
    check_bool_shuffle,
)
from mrecord.rawdata.imagefolder import load_image, walk_image_folder
from mrecord.sampling import Sampler

__all__ = ["ImageFolderDataset"]

_ROW_BYTES_GUESS = 64 << 10  # a typical encoded image; sets the rows per block


class ImageFolderDataset(RandomAccessSource):
    """Read the images under ``dataset_dir`` (see the module docstring).

    Args:
        dataset_dir: the folder holding one subfolder per class.
        num_samples, num_parallel_workers, shuffle, sampler, num_shards, shard_id:
            as for :class:`~mrecord.Cifar10Dataset`.
        extensions: file suffixes to read, e.g. ``[".jpg", ".JPEG"]`` (None: every file).
        class_indexing: ``{folder name: label}``; only these folders are read.
        decode: decode every image to RGB ``uint8[H, W, 3]`` (default: raw bytes).
    """

    def __init__(
        self,
        dataset_dir: str | os.PathLike[str],
        num_samples: int | None = None,
        num_parallel_workers: int | None = None,
        shuffle: bool | None = None,
        sampler: Sampler | None = None,
        extensions: Sequence[str] | None = None,
        class_indexing: Mapping[str, int] | None = None,
        decode: bool = False,
        num_shards: int | None = None,
        shard_id: int | None = None,
    ) -> None:
        if not isinstance(decode, bool):
            raise WrongTypeError(f"decode must be a bool, got {decode!r}")
        if extensions is not None and (
            isinstance(extensions, str) or not all(isinstance(e, str) for e in extensions)
        ):
            raise WrongTypeError(
                f"extensions must be a list of suffixes such as ['.jpg'], got {extensions!r}"
            )
        super().__init__(
            num_parallel_workers=num_parallel_workers,
            shuffle=check_bool_shuffle(shuffle, sampler),
            num_shards=num_shards,
            shard_id=shard_id,
            sampler=sampler,
            num_samples=num_samples,
        )
        self.dataset_dir = dataset_dir
        self.decode = decode
        self._listing = walk_image_folder(
            dataset_dir, extensions=extensions, class_indexing=class_indexing
        )
        self._labels = self._listing.label_array()
        self._block_rows = block_rows_for(_ROW_BYTES_GUESS)
        self._count_rows()

    def get_class_indexing(self) -> dict[str, int]:
        """``{class folder name: label}`` (MindSpore's method)."""
        return dict(self._listing.classes)

    def _source_column_names(self) -> list[str]:
        return ["image", "label"]

    def _file_row_counts(self) -> list[int]:
        return [len(self._listing.paths)]

    def _read_rows(self, ids: np.ndarray) -> Block:
        paths = self._listing.paths
        images = [load_image(paths[i], decode=self.decode) for i in ids.tolist()]
        return Block({"image": images, "label": self._labels[ids]}, ids.astype(np.int64))

    def _column_values(self, column: str) -> np.ndarray:
        if column != "label":
            return super()._column_values(column)
        return self._labels

    def _describe(self) -> str:
        where = str(self.dataset_dir)
        return f"ImageFolderDataset({where!r}, decode={self.decode}, sampler={self._sampler!r})"
