"""CIFAR-10, binary version, as a conversion source.

The files are read by the same parser as ``Cifar10Dataset``
(:mod:`mrecord.rawdata.cifar10`, which documents the record layout): memory-mapped,
a batch of records at a time, turned to HWC ``uint8[32, 32, 3]`` with one strided
copy per colour plane, or encoded to PNG with ``png=True`` (in a thread pool, or in
worker processes through :meth:`Cifar10Source.plan`).
A split must be complete (``data_batch_1..5.bin`` or ``test_batch.bin``).
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.convert.parallel import BatchPlan
from mrecord.errors import ArgumentError, RawDataError
from mrecord.format.features import describe
from mrecord.pool import ThreadPool
from mrecord.rawdata.cifar10 import Cifar10Files, find_cifar10_files

__all__ = ["CIFAR10_CLASSES", "Cifar10Source", "encode_png", "split_files"]

CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
SPLIT_FILES = {
    "train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
    "test": ("test_batch.bin",),
}


def encode_png(image: np.ndarray) -> bytes:
    """Encode one HWC uint8 image as PNG bytes (needs Pillow)."""
    from mrecord.convert._pillow import require_pillow

    image_mod = require_pillow()
    buf = io.BytesIO()
    image_mod.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def split_files(src: str | os.PathLike[str], split: str) -> list[Path]:
    """The binary files of ``split`` under ``src`` (a folder), or ``[src]`` for one file."""
    if split not in SPLIT_FILES:
        raise ArgumentError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(src)
    if root.is_file():
        return [root]
    files = find_cifar10_files(root, split)
    names = {f.name for f in files}
    missing = [str(files[0].parent / n) for n in SPLIT_FILES[split] if n not in names]
    if missing:
        raise RawDataError(
            f"CIFAR-10 {split} split is incomplete: missing {missing} (expected the binary "
            "version, folder cifar-10-batches-bin)"
        )
    return [f for f in files if f.name in SPLIT_FILES[split]]


def _class_names(folder: Path) -> list[str]:
    meta = folder / "batches.meta.txt"
    if meta.is_file():
        names = [line.strip() for line in meta.read_text(errors="replace").splitlines()]
        names = [n for n in names if n]
        if len(names) == len(CIFAR10_CLASSES):
            return names
    return list(CIFAR10_CLASSES)


class Cifar10Source(Source):
    """CIFAR-10 binary files → rows ``image`` (uint8[32,32,3] or PNG bytes), ``label`` (int32)."""

    kind = "cifar10"

    def __init__(
        self,
        src: str | os.PathLike[str],
        *,
        split: str = "train",
        png: bool = False,
        workers: int | None = None,
    ):
        self.files = split_files(src, split)
        self._data = Cifar10Files(self.files)
        self.png = png
        self.workers = workers
        classes = _class_names(self.files[0].parent)
        image = {"type": "bytes"} if png else {"type": "uint8", "shape": [32, 32, 3]}
        desc = {
            "source": "cifar10",
            "split": split,
            "image": "png" if png else "uint8 HWC",
            "classes": {name: i for i, name in enumerate(classes)},
        }
        super().__init__(
            name=str(src),
            schema={"image": image, "label": {"type": "int32"}},
            desc=describe(
                desc, class_names={"label": classes}, images=["image"] if png else []
            ),
            num_rows=self._data.num_rows,
            index_fields=["label"],
        )

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows file by file, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        workers = self.workers or os.cpu_count() or 1
        pool = ThreadPool(encode_png, workers, "mrecord-png") if self.png else None
        try:
            total = self._data.num_rows
            for start in range(0, total, batch_rows):
                ids = np.arange(start, min(start + batch_rows, total), dtype=np.int64)
                imgs, labels = self._data.read(ids)
                batch: Batch = {"label": labels.astype(np.int32)}
                if pool is not None:
                    batch["image"] = list(pool.map(imgs))
                else:
                    batch["image"] = imgs
                yield {"image": batch["image"], "label": batch["label"]}
        finally:
            if pool is not None:
                pool.shutdown()

    def plan(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> BatchPlan[Any, Any] | None:
        """With ``png=True``: batches read and PNG-encoded in pieces of ``_PIECE_ROWS``
        records; None for uint8 arrays (a strided copy, nothing worth a process)."""
        check_batch_rows(batch_rows)
        if not self.png:
            return None
        total = self._data.num_rows
        files = tuple(str(f) for f in self.files)

        def pieces(b: int) -> list[tuple[int, int]]:
            stop = min((b + 1) * batch_rows, total)
            starts = range(b * batch_rows, stop, _PIECE_ROWS)
            return [(i, min(i + _PIECE_ROWS, stop)) for i in starts]

        def collect(b: int, results: list[tuple[list[bytes], np.ndarray]]) -> Batch | None:
            images = [png for piece, _labels in results for png in piece]
            labels = np.concatenate([labels for _piece, labels in results])
            return {"image": images, "label": labels.astype(np.int32)}

        return BatchPlan(
            num_batches=-(-total // batch_rows),
            pieces=pieces,
            work=functools.partial(_png_piece, files),
            collect=collect,
            finish=lambda: None,
        )


_PIECE_ROWS = 256  # records per piece of PNG work


@functools.lru_cache(maxsize=4)
def _open_files(files: tuple[str, ...]) -> Cifar10Files:
    return Cifar10Files([Path(f) for f in files])


def _png_piece(files: tuple[str, ...], span: tuple[int, int]) -> tuple[list[bytes], np.ndarray]:
    """Run in a worker: records ``span`` of ``files`` as PNG bytes, and their labels."""
    ids = np.arange(span[0], span[1], dtype=np.int64)
    imgs, labels = _open_files(files).read(ids)
    return [encode_png(img) for img in imgs], np.asarray(labels)
