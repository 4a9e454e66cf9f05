"""MNIST idx files as a conversion source (plain or gzip-compressed).

idx layout (all integers big-endian)::

    images: [magic 2051: 4] [count: 4] [rows: 4] [cols: 4] [pixels: count*rows*cols uint8]
    labels: [magic 2049: 4] [count: 4] [labels: count uint8]

Files are looked up as ``{train,t10k}-{images-idx3,labels-idx1}-ubyte`` with an
optional ``.gz`` (also the ``images.idx3-ubyte`` spelling). The counts of the
two files must agree.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.errors import ArgumentError, ConversionError

__all__ = ["IMAGES_MAGIC", "LABELS_MAGIC", "MnistSource", "find_mnist_files", "read_idx"]

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
_PREFIX = {"train": "train", "test": "t10k"}


def _read_file(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise ConversionError(f"cannot read MNIST file {str(path)!r}: {exc}") from exc


def read_idx(path: Path, magic: int) -> np.ndarray:
    """Read an idx file of unsigned bytes; return shape ``(count, *dims)``."""
    data = _read_file(path)
    name = str(path)
    ndim = 3 if magic == IMAGES_MAGIC else 1
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ConversionError(
            f"{name!r} is truncated: {len(data)} bytes, an idx header needs {header}"
        )
    got = int.from_bytes(data[:4], "big")
    if got != magic:
        kind = "images" if magic == IMAGES_MAGIC else "labels"
        raise ConversionError(
            f"{name!r} has magic number {got}, expected {magic} for MNIST {kind} "
            "(is it the right file, and not gzip data without a .gz name?)"
        )
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    need = header + int(np.prod(dims, dtype=np.int64))
    if len(data) != need:
        state = "truncated" if len(data) < need else "longer than its header says"
        raise ConversionError(
            f"{name!r} is {state}: header says {dims} ({need} bytes), file has {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def _find(root: Path, split: str, kind: str) -> Path:
    prefix = _PREFIX[split]
    idx = "idx3" if kind == "images" else "idx1"
    names = [f"{prefix}-{kind}-{idx}-ubyte", f"{prefix}-{kind}.{idx}-ubyte"]
    for name in names:
        for candidate in (root / name, root / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    raise ConversionError(
        f"MNIST {split} {kind} not found in {str(root)!r}: expected {names[0]!r} or "
        f"{names[0] + '.gz'!r}"
    )


def find_mnist_files(src: str | os.PathLike[str], split: str) -> tuple[Path, Path]:
    """``(images, labels)`` files of ``split`` in the folder ``src``."""
    if split not in _PREFIX:
        raise ArgumentError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(src)
    if not root.is_dir():
        raise ConversionError(f"MNIST source folder {str(root)!r} does not exist")
    return _find(root, split, "images"), _find(root, split, "labels")


class MnistSource(Source):
    """MNIST idx files → rows ``image`` (uint8[rows, cols, 1]: HWC, as MindSpore's
    MnistDataset gives them and LeNet's first convolution expects) and ``label`` (int32)."""

    kind = "mnist"

    def __init__(self, src: str | os.PathLike[str], *, split: str = "train"):
        self.images_file, self.labels_file = find_mnist_files(src, split)
        self.images = read_idx(self.images_file, IMAGES_MAGIC)
        self.labels = read_idx(self.labels_file, LABELS_MAGIC).astype(np.int32)
        if len(self.images) != len(self.labels):
            raise ConversionError(
                f"MNIST counts disagree: {str(self.images_file)!r} has {len(self.images)} "
                f"images, {str(self.labels_file)!r} has {len(self.labels)} labels"
            )
        rows, cols = self.images.shape[1:]
        desc = {"source": "mnist", "split": split, "classes": {str(i): i for i in range(10)}}
        super().__init__(
            name=str(src),
            schema={
                "image": {"type": "uint8", "shape": [rows, cols, 1]},
                "label": {"type": "int32"},
            },
            desc=json.dumps(desc),
            num_rows=len(self.labels),
            index_fields=["label"],
        )

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in file order, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        for start in range(0, len(self.labels), batch_rows):
            yield {
                "image": self.images[start : start + batch_rows, :, :, None],
                "label": self.labels[start : start + batch_rows],
            }
