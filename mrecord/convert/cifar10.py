"""CIFAR-10, binary version, as a conversion source.

Each file (``data_batch_1.bin`` … ``data_batch_5.bin``, ``test_batch.bin``) is a
sequence of 10,000 records of 3,073 bytes::

    [label: 1 byte, 0..9] [red: 1024] [green: 1024] [blue: 1024]   (each plane 32x32, row-major)

A whole file is decoded with one ``np.frombuffer`` + reshape and one strided copy
per colour plane to HWC (``uint8[32, 32, 3]``), or encoded to PNG with
``png=True`` (in a thread pool).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.errors import ArgumentError, ConversionError

__all__ = ["CIFAR10_CLASSES", "RECORD_BYTES", "Cifar10Source", "decode_cifar10", "encode_png"]

RECORD_BYTES = 1 + 3 * 32 * 32
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


def decode_cifar10(data: bytes | np.ndarray, *, path: str) -> tuple[np.ndarray, np.ndarray]:
    """Decode a CIFAR-10 binary file's bytes into ``(images HWC uint8, labels int32)``."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size % RECORD_BYTES:
        whole = raw.size // RECORD_BYTES
        raise ConversionError(
            f"{path!r} is not a CIFAR-10 binary file or is truncated: {raw.size} bytes is not "
            f"a whole number of {RECORD_BYTES}-byte records (record {whole} is cut after "
            f"{raw.size - whole * RECORD_BYTES} bytes)"
        )
    records = raw.reshape(-1, RECORD_BYTES)
    labels = records[:, 0].astype(np.int32)
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        i = int(bad[0])
        raise ConversionError(
            f"{path!r} is not a CIFAR-10 binary file: record {i} (byte {i * RECORD_BYTES}) "
            f"has label {int(labels[i])}, CIFAR-10 labels are 0..9"
        )
    # CHW -> HWC: one strided copy per colour plane (about 2x faster than a
    # 4-D transpose + ascontiguousarray, which walks memory with a bad stride).
    images = np.empty((len(records), 32, 32, 3), dtype=np.uint8)
    for c in range(3):
        images[..., c] = records[:, 1 + 1024 * c : 1 + 1024 * (c + 1)].reshape(-1, 32, 32)
    return images, labels


def encode_png(image: np.ndarray) -> bytes:
    """Encode one HWC uint8 image as PNG bytes (needs Pillow)."""
    from mrecord.convert._pillow import require_pillow

    image_mod = require_pillow()
    buf = io.BytesIO()
    image_mod.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def find_cifar10_files(src: str | os.PathLike[str], split: str) -> list[Path]:
    """The binary files of ``split`` under ``src`` (a folder), or ``[src]`` for one file."""
    if split not in SPLIT_FILES:
        raise ArgumentError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(src)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ConversionError(f"CIFAR-10 source {str(root)!r} does not exist")
    if not (root / SPLIT_FILES[split][0]).exists() and (root / "cifar-10-batches-bin").is_dir():
        root = root / "cifar-10-batches-bin"
    files = [root / name for name in SPLIT_FILES[split]]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConversionError(
            f"CIFAR-10 {split} split is incomplete: missing {missing} (expected the binary "
            "version, folder cifar-10-batches-bin)"
        )
    return files


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
        self.files = find_cifar10_files(src, split)
        sizes = [f.stat().st_size for f in self.files]
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
            desc=json.dumps(desc),
            num_rows=sum(s // RECORD_BYTES for s in sizes),
            index_fields=["label"],
        )

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows file by file, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        pool = ThreadPoolExecutor(self.workers or os.cpu_count() or 1) if self.png else None
        try:
            for f in self.files:
                images, labels = decode_cifar10(f.read_bytes(), path=str(f))
                for start in range(0, len(labels), batch_rows):
                    imgs = images[start : start + batch_rows]
                    batch: Batch = {"label": labels[start : start + batch_rows]}
                    if pool is not None:
                        batch["image"] = list(pool.map(encode_png, imgs))
                    else:
                        batch["image"] = imgs
                    yield {"image": batch["image"], "label": batch["label"]}
        finally:
            if pool is not None:
                pool.shutdown()
