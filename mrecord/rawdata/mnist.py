"""MNIST idx files (plain or gzip-compressed): finding them, mapping them, gathering rows.

idx layout (all integers big-endian)::

    images: [magic 2051: 4] [count: 4] [rows: 4] [cols: 4] [pixels: count*rows*cols uint8]
    labels: [magic 2049: 4] [count: 4] [labels: count uint8]

Files are looked up as ``{train,t10k}-{images-idx3,labels-idx1}-ubyte`` with an
optional ``.gz`` (also the ``images.idx3-ubyte`` spelling). Plain files are
memory-mapped; ``.gz`` files are decompressed into memory once. ``usage="all"``
reads the ``t10k`` files before the ``train`` files, as MindSpore does (its files
are sorted by name).
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

from mrecord.errors import RawDataError
from mrecord.rawdata.common import check_dir, check_usage, gather

__all__ = ["IMAGES_MAGIC", "LABELS_MAGIC", "MnistFiles", "find_mnist_files", "read_idx"]

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
_PREFIX = {"train": "train", "test": "t10k"}
_USAGE_SPLITS = {"train": ("train",), "test": ("test",), "all": ("test", "train")}


def _header(path: Path, ndim: int) -> tuple[bytes, int]:
    """The header bytes of an idx file and the file's length (after decompression)."""
    need = 4 + 4 * ndim
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                data = fh.read()
            return data, len(data)
        with path.open("rb") as fh:
            head = fh.read(need)
        return head, path.stat().st_size
    except (OSError, EOFError, zlib.error) as exc:
        raise RawDataError(f"cannot read MNIST file {str(path)!r}: {exc}") from exc


def read_idx(path: Path, magic: int) -> np.ndarray:
    """An idx file of unsigned bytes as ``uint8[count, *dims]`` (memory-mapped when plain)."""
    name = str(path)
    ndim = 3 if magic == IMAGES_MAGIC else 1
    header = 4 + 4 * ndim
    data, size = _header(path, ndim)
    got = int.from_bytes(data[:4], "big")
    if size >= 4 and got != magic:
        kind = "images" if magic == IMAGES_MAGIC else "labels"
        raise RawDataError(
            f"{name!r} has magic number {got}, expected {magic} for MNIST {kind} "
            "(is it the right file, and not gzip data without a .gz name?)"
        )
    if size < header:
        raise RawDataError(f"{name!r} is truncated: {size} bytes, an idx header needs {header}")
    dims = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    need = header + int(np.prod(dims, dtype=np.int64))
    if size != need:
        state = "truncated" if size < need else "longer than its header says"
        raise RawDataError(
            f"{name!r} is {state}: header says {list(dims)} ({need} bytes), file has {size} bytes"
        )
    if len(data) == size:  # decompressed in memory
        return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)
    if need == header:
        return np.zeros(dims, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=header, shape=dims)


def _find(root: Path, split: str, kind: str) -> Path | None:
    prefix = _PREFIX[split]
    idx = "idx3" if kind == "images" else "idx1"
    for name in (f"{prefix}-{kind}-{idx}-ubyte", f"{prefix}-{kind}.{idx}-ubyte"):
        for candidate in (root / name, root / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _require(root: Path, split: str, kind: str) -> Path:
    found = _find(root, split, kind)
    if found is None:
        name = _expected(split, kind)
        raise RawDataError(
            f"MNIST {split} {kind} not found in {str(root)!r}: expected {name!r} or "
            f"{name + '.gz'!r}"
        )
    return found


def _expected(split: str, kind: str) -> str:
    return f"{_PREFIX[split]}-{kind}-{'idx3' if kind == 'images' else 'idx1'}-ubyte"


def find_mnist_files(
    dataset_dir: str | os.PathLike[str], usage: str | None = None
) -> list[tuple[Path, Path]]:
    """``[(images, labels), ...]`` of ``usage`` in ``dataset_dir`` (``all``: t10k, then train).

    For ``all``, a split whose images are absent is left out; at least one must be there.
    """
    mode = check_usage(usage)
    root = check_dir(dataset_dir, "MNIST idx files (train-images-idx3-ubyte ...)")
    pairs: list[tuple[Path, Path]] = []
    for split in _USAGE_SPLITS[mode]:
        if mode == "all" and _find(root, split, "images") is None:
            continue
        pairs.append((_require(root, split, "images"), _require(root, split, "labels")))
    if not pairs:
        raise RawDataError(
            f"no MNIST files in {str(root)!r}: expected {_expected('train', 'images')!r} and/or "
            f"{_expected('test', 'images')!r} with their labels files (plain or .gz)"
        )
    return pairs


class MnistFiles:
    """MNIST idx file pairs read as one sequence of rows, pair after pair.

    ``read(ids)`` returns ``(images uint8[n, rows, cols], labels uint8[n])``.
    """

    def __init__(self, pairs: list[tuple[Path, Path]]) -> None:
        self.pairs = pairs
        self._images: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []
        for images_file, labels_file in pairs:
            images = read_idx(images_file, IMAGES_MAGIC)
            labels = read_idx(labels_file, LABELS_MAGIC)
            if len(images) != len(labels):
                raise RawDataError(
                    f"MNIST counts disagree: {str(images_file)!r} has {len(images)} "
                    f"images, {str(labels_file)!r} has {len(labels)} labels"
                )
            if self._images and images.shape[1:] != self._images[0].shape[1:]:
                raise RawDataError(
                    f"{str(images_file)!r} has images of {list(images.shape[1:])}, "
                    f"{str(pairs[0][0])!r} of {list(self._images[0].shape[1:])}; "
                    "one dataset needs one image size"
                )
            self._images.append(images)
            self._labels.append(labels)

    @property
    def file_row_counts(self) -> list[int]:
        """Rows per file pair, in order."""
        return [len(x) for x in self._labels]

    @property
    def num_rows(self) -> int:
        """Rows over all pairs."""
        return sum(self.file_row_counts)

    @property
    def row_bytes(self) -> int:
        """Bytes of one image."""
        rows, cols = self.image_shape
        return rows * cols

    def labels(self) -> np.ndarray:
        """Every row's label."""
        return np.concatenate(self._labels)

    @property
    def image_shape(self) -> tuple[int, int]:
        """``(rows, cols)`` of every image."""
        rows, cols = self._images[0].shape[1:]
        return int(rows), int(cols)

    def read(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(images, labels)`` of the rows ``ids`` (fresh arrays, not views of the files)."""
        images = gather(self._images, ids)
        labels = gather(self._labels, ids)
        return np.array(images), np.array(labels)
