"""The benchmark workloads, built deterministically from seeded numpy generators.

Both sides of a comparison (mrecord here, MindSpore in its own virtual environment via
``benchmarks/mindspore_side.py``) import this module, so it needs only numpy (Pillow for
the JPEG workload) and generates byte-identical rows for the same ``(name, scale)``.

Rows are produced in chunks of ``Workload.chunk_rows``; chunk ``c`` is drawn from
``np.random.default_rng([SEED, workload.index, c])``, so a chunk never depends on the
others. The JPEG workload is cached on disk (``bench_out/cache/``) since encoding is slow.

===========  ==========  ========================================================
workload     full rows   fields
===========  ==========  ========================================================
images           8,000   ``data``: bytes, incompressible, 90,000-110,000 bytes;
                         ``label``: int32
tabular        400,000   ``id``: int64 (= row number); ``label``: int32;
                         ``vector``: float32[16]
varshape        50,000   ``points``: float32[k, 3] with k in 1..64; ``label``: int32
cifar           50,000   ``image``: bytes, a 32x32x3 uint8 image (3,072 bytes);
                         ``label``: int32 in 0..9
jpeg             2,000   ``image``: bytes, a 320x256 (WxH) JPEG at quality 90 of a
                         smooth synthetic picture; ``label``: int32 in 0..999
===========  ==========  ========================================================

Columns of a chunk are "columnar": a fixed-shape numeric field is one array of shape
``(n, *shape)``, a bytes or variable-shape field a list of ``n`` values.
:func:`to_rows` turns a chunk into the row dicts that ``FileWriter.write_raw_data``
takes (scalars as Python ``int``, arrays as numpy arrays, blobs as ``bytes``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMAT_WORKLOADS",
    "PIPELINE_WORKLOADS",
    "SEED",
    "WORKLOADS",
    "Chunk",
    "Workload",
    "cache_dir",
    "chunk_nbytes",
    "get",
    "to_rows",
]

SEED = 20_240_601
"""Root seed of every workload."""

Chunk = dict[str, Any]
"""Columns of a run of rows: field name -> array ``(n, ...)`` or list of ``n`` values."""


@dataclass(frozen=True)
class Workload:
    """A named, deterministic table of rows with its MindRecord schema."""

    name: str
    index: int
    full_rows: int
    chunk_rows: int
    schema: dict[str, dict[str, Any]]
    make_chunk: Callable[[np.random.Generator, int, int], Chunk]
    description: str

    def num_rows(self, scale: float = 1.0) -> int:
        """Rows at ``scale`` (at least 1); ``scale=1`` is the full workload."""
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale!r}")
        return max(1, math.ceil(self.full_rows * scale))

    def chunks(self, scale: float = 1.0) -> Iterator[Chunk]:
        """Yield the rows at ``scale`` as consecutive columnar chunks."""
        total = self.num_rows(scale)
        for c, start in enumerate(range(0, total, self.chunk_rows)):
            n = min(self.chunk_rows, total - start)
            rng = np.random.default_rng([SEED, self.index, c])
            yield self.make_chunk(rng, start, n)


def to_rows(chunk: Chunk) -> list[dict[str, Any]]:
    """Row dicts of a columnar chunk, in the form ``write_raw_data`` accepts everywhere."""
    names = list(chunk)
    cols: list[list[Any]] = []
    for name in names:
        values = chunk[name]
        if isinstance(values, np.ndarray) and values.ndim == 1:
            cols.append(values.tolist())  # numpy scalars -> Python int/float
        else:
            cols.append(list(values))
    return [dict(zip(names, vals, strict=True)) for vals in zip(*cols, strict=True)]


def chunk_nbytes(chunk: Chunk) -> int:
    """Payload bytes of a chunk (array data and blob lengths; no per-row overhead)."""
    total = 0
    for values in chunk.values():
        if isinstance(values, np.ndarray):
            total += values.nbytes
        else:
            total += sum(len(v) if isinstance(v, bytes) else int(v.nbytes) for v in values)
    return total


def cache_dir() -> Path:
    """Where generated files are cached: ``$MRECORD_BENCH_OUT/cache`` or ``bench_out/cache``."""
    root = Path(os.environ.get("MRECORD_BENCH_OUT", "bench_out"))
    path = root / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- generators -------------------------------------------------------------------------


def _images(rng: np.random.Generator, start: int, n: int) -> Chunk:
    sizes = rng.integers(90_000, 110_001, size=n)
    data = [rng.bytes(int(s)) for s in sizes]
    labels = rng.integers(0, 1000, size=n, dtype=np.int32)
    return {"data": data, "label": labels}


def _tabular(rng: np.random.Generator, start: int, n: int) -> Chunk:
    ids = np.arange(start, start + n, dtype=np.int64)
    labels = rng.integers(0, 1000, size=n, dtype=np.int32)
    vectors = rng.standard_normal((n, 16), dtype=np.float32)
    return {"id": ids, "label": labels, "vector": vectors}


def _varshape(rng: np.random.Generator, start: int, n: int) -> Chunk:
    ks = rng.integers(1, 65, size=n)
    flat = rng.standard_normal((int(ks.sum()), 3), dtype=np.float32)
    points = np.split(flat, np.cumsum(ks)[:-1])
    labels = rng.integers(0, 1000, size=n, dtype=np.int32)
    return {"points": points, "label": labels}


def _cifar(rng: np.random.Generator, start: int, n: int) -> Chunk:
    pixels = rng.integers(0, 256, size=(n, 32 * 32 * 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.int32)
    return {"image": [row.tobytes() for row in pixels], "label": labels}


JPEG_WIDTH, JPEG_HEIGHT, JPEG_QUALITY = 320, 256, 90


def smooth_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth HxWx3 uint8 picture: low-frequency waves per channel plus faint noise."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    yy /= height
    xx /= width
    img = np.empty((height, width, 3), dtype=np.float32)
    for c in range(3):
        acc = np.zeros((height, width), dtype=np.float32)
        for _ in range(3):
            fx, fy = rng.uniform(0.3, 3.0, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            acc += np.sin(2 * np.pi * (fx * xx + fy * yy) + phase).astype(np.float32)
        img[:, :, c] = 128 + 40 * acc
    img += rng.normal(0.0, 3.0, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def _encode_jpeg(img: np.ndarray) -> bytes:
    import io

    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the jpeg workload needs Pillow: pip install Pillow") from exc
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def _jpeg_generate(rng: np.random.Generator, start: int, n: int) -> Chunk:
    images = [_encode_jpeg(smooth_image(rng, JPEG_HEIGHT, JPEG_WIDTH)) for _ in range(n)]
    labels = rng.integers(0, 1000, size=n, dtype=np.int32)
    return {"image": images, "label": labels}


@lru_cache(maxsize=4)
def _jpeg_cached(start: int, n: int, chunk_index: int) -> tuple[tuple[bytes, ...], np.ndarray]:
    path = cache_dir() / f"jpeg_v1_{SEED}_{chunk_index}_{start}_{n}.npz"
    if path.exists():
        with np.load(path) as npz:
            flat, offsets, labels = npz["flat"], npz["offsets"], npz["labels"]
    else:
        rng = np.random.default_rng([SEED, 4, chunk_index])
        chunk = _jpeg_generate(rng, start, n)
        flat = np.frombuffer(b"".join(chunk["image"]), dtype=np.uint8)
        offsets = np.cumsum([0] + [len(b) for b in chunk["image"]]).astype(np.int64)
        labels = chunk["label"]
        tmp = path.with_name(path.name + ".partial.npz")
        np.savez(tmp, flat=flat, offsets=offsets, labels=labels)
        os.replace(tmp, path)
    blobs = tuple(flat[offsets[i] : offsets[i + 1]].tobytes() for i in range(n))
    return blobs, labels


def _jpeg(rng: np.random.Generator, start: int, n: int) -> Chunk:
    # The rng argument is ignored: the cache regenerates from the same seed when missing.
    chunk_index = start // WORKLOADS["jpeg"].chunk_rows
    blobs, labels = _jpeg_cached(start, n, chunk_index)
    return {"image": list(blobs), "label": labels.copy()}


_INT32 = {"type": "int32"}

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload(
            "images",
            0,
            8_000,
            500,
            {"data": {"type": "bytes"}, "label": _INT32},
            _images,
            "8,000 rows: incompressible 90-110 KB bytes blob + int32 label",
        ),
        Workload(
            "tabular",
            1,
            400_000,
            20_000,
            {
                "id": {"type": "int64"},
                "label": _INT32,
                "vector": {"type": "float32", "shape": [16]},
            },
            _tabular,
            "400,000 rows: int64 id, int32 label, float32[16] vector",
        ),
        Workload(
            "varshape",
            2,
            50_000,
            10_000,
            {"points": {"type": "float32", "shape": [-1, 3]}, "label": _INT32},
            _varshape,
            "50,000 rows: float32[k, 3] (k in 1..64) + int32 label",
        ),
        Workload(
            "cifar",
            3,
            50_000,
            10_000,
            {"image": {"type": "bytes"}, "label": _INT32},
            _cifar,
            "50,000 rows: 32x32x3 uint8 image as bytes + int32 label",
        ),
        Workload(
            "jpeg",
            4,
            2_000,
            500,
            {"image": {"type": "bytes"}, "label": _INT32},
            _jpeg,
            "2,000 rows: 320x256 JPEG (quality 90) of a smooth picture + int32 label",
        ),
    ]
}

FORMAT_WORKLOADS = ("images", "tabular", "varshape")
"""Workloads of the format benchmarks (issues 2 and 3)."""

PIPELINE_WORKLOADS = ("cifar", "jpeg")
"""Workloads of the pipeline benchmarks (issue 4)."""


def get(name: str) -> Workload:
    """The workload called ``name``; ``ValueError`` listing the known names otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; choose one of {sorted(WORKLOADS)}") from None
