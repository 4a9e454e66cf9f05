"""CIFAR-10, binary version: finding the files, memory-mapping them, gathering rows.

Each file (``data_batch_1.bin`` … ``data_batch_5.bin``, ``test_batch.bin``) is a
sequence of records of 3,073 bytes::

    [label: 1 byte, 0..9] [red: 1024] [green: 1024] [blue: 1024]   (each plane 32x32, row-major)

The released files hold 10,000 records each; any whole number of records is
accepted (MindSpore insists on 10,000). A file is memory-mapped as a
``(records, 3073)`` uint8 array; a batch of rows is gathered with one indexing
operation and turned from planes (CHW) to ``uint8[n, 32, 32, 3]`` (HWC) with one
strided copy per colour plane, never per pixel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mrecord.errors import RawDataError
from mrecord.rawdata.common import check_dir, check_usage, gather

__all__ = [
    "NUM_CLASSES",
    "RECORD_BYTES",
    "Cifar10Files",
    "find_cifar10_files",
    "records_to_images",
]

RECORD_BYTES = 1 + 3 * 32 * 32
NUM_CLASSES = 10
_PREFIXES = {"train": ("data_batch",), "test": ("test_batch",), "all": ("data_batch", "test_batch")}
_RELEASE_FOLDER = "cifar-10-batches-bin"


def find_cifar10_files(dataset_dir: str | os.PathLike[str], usage: str | None = None) -> list[Path]:
    """The ``.bin`` files of ``usage`` in ``dataset_dir``, sorted by name (MindSpore's rule).

    ``train`` is ``data_batch*.bin``, ``test`` is ``test_batch*.bin``, ``all`` (or
    None) both. A folder holding only the release's ``cifar-10-batches-bin`` is
    looked into.
    """
    mode = check_usage(usage)
    root = check_dir(dataset_dir, "CIFAR-10 binary files (data_batch_1.bin ... test_batch.bin)")
    if not any(root.glob("*.bin")) and (root / _RELEASE_FOLDER).is_dir():
        root = root / _RELEASE_FOLDER
    files = sorted(
        p
        for p in root.iterdir()
        if p.suffix == ".bin" and p.name.startswith(_PREFIXES[mode]) and p.is_file()
    )
    if not files:
        want = " or ".join(f"{prefix}*.bin" for prefix in _PREFIXES[mode])
        raise RawDataError(
            f"no CIFAR-10 {mode} files in {str(root)!r}: expected {want} (the binary version "
            "of CIFAR-10, folder cifar-10-batches-bin)"
        )
    return files


def map_records(path: Path) -> np.ndarray:
    """Memory-map one CIFAR-10 file as ``uint8[records, 3073]`` (checks the size)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise RawDataError(f"cannot read CIFAR-10 file {str(path)!r}: {exc}") from exc
    if size % RECORD_BYTES:
        whole = size // RECORD_BYTES
        raise RawDataError(
            f"{str(path)!r} is not a CIFAR-10 binary file or is truncated: {size} bytes is not "
            f"a whole number of {RECORD_BYTES}-byte records (record {whole} is cut after "
            f"{size - whole * RECORD_BYTES} bytes); download the binary version again"
        )
    if size == 0:
        return np.zeros((0, RECORD_BYTES), dtype=np.uint8)
    try:
        return np.memmap(path, dtype=np.uint8, mode="r", shape=(size // RECORD_BYTES, RECORD_BYTES))
    except OSError as exc:
        raise RawDataError(f"cannot memory-map CIFAR-10 file {str(path)!r}: {exc}") from exc


def records_to_images(records: np.ndarray) -> np.ndarray:
    """``uint8[n, 3073]`` records → ``uint8[n, 32, 32, 3]`` HWC images (one copy per plane).

    One strided copy per colour plane is faster than a 4-D transpose followed by
    ``ascontiguousarray``, which walks memory with a bad stride.
    """
    images = np.empty((len(records), 32, 32, 3), dtype=np.uint8)
    for c in range(3):
        images[..., c] = records[:, 1 + 1024 * c : 1 + 1024 * (c + 1)].reshape(-1, 32, 32)
    return images


def check_labels(labels: np.ndarray, *, path: str, first: int = 0) -> None:
    """Raise if a label is not 0..9 (the mark of a file that is not CIFAR-10)."""
    bad = np.flatnonzero(labels >= NUM_CLASSES)
    if bad.size:
        i = first + int(bad[0])
        raise RawDataError(
            f"{path!r} is not a CIFAR-10 binary file: record {i} (byte {i * RECORD_BYTES}) "
            f"has label {int(labels[bad[0]])}, CIFAR-10 labels are 0..9"
        )


class Cifar10Files:
    """Memory-mapped CIFAR-10 files read as one sequence of rows, file after file.

    ``read(ids)`` returns ``(images uint8[n, 32, 32, 3], labels uint8[n])`` for any
    global row ids (any order, repeats allowed).
    """

    def __init__(self, files: Sequence[str | os.PathLike[str]]) -> None:
        self.files = [Path(f) for f in files]
        self._records = [map_records(f) for f in self.files]

    @property
    def file_row_counts(self) -> list[int]:
        """Records per file, in file order."""
        return [len(r) for r in self._records]

    @property
    def num_rows(self) -> int:
        """Records over all files."""
        return sum(self.file_row_counts)

    @property
    def row_bytes(self) -> int:
        """Bytes of one image."""
        return RECORD_BYTES - 1

    def labels(self) -> np.ndarray:
        """Every row's label (one strided read of the label bytes)."""
        parts = [r[:, 0] for r in self._records]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)

    def read(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(images, labels)`` of the rows ``ids``."""
        rows = gather(self._records, ids)
        labels = np.array(rows[:, 0])
        if labels.size and int(labels.max()) >= NUM_CLASSES:
            self._raise_bad_label(np.asarray(ids, dtype=np.int64), labels)
        return records_to_images(rows), labels

    def _raise_bad_label(self, ids: np.ndarray, labels: np.ndarray) -> None:
        row = int(ids[int(np.argmax(labels >= NUM_CLASSES))])
        for path, records in zip(self.files, self._records, strict=True):
            if row < len(records):
                check_labels(records[row : row + 1, 0], path=str(path), first=row)
            row -= len(records)
