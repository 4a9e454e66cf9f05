"""A small picture dataset for the ``mrecord serve`` tests, its docs screenshot and demos.

Each row is a 48x48 picture of a shape whose kind and colour depend on the label,
stored twice: PNG-encoded (``png``, bytes) and as a uint8 HWC array (``pixels``),
with ``label`` (indexed), ``name`` (indexed) and a ``score`` float.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from mrecord.writer.file_writer import FileWriter

__all__ = ["CLASSES", "picture", "write_gallery"]

CLASSES = ["red disc", "orange square", "yellow ring", "green cross", "teal stripes",
           "blue diamond", "indigo dots", "violet frame", "pink checker", "grey gradient"]
_COLOURS = [(224, 49, 49), (247, 103, 7), (250, 176, 5), (55, 178, 77), (18, 184, 134),
            (34, 139, 230), (76, 110, 245), (151, 117, 250), (230, 73, 128), (134, 142, 150)]
SIZE = 48


def picture(label: int, variant: int) -> np.ndarray:
    """A 48x48x3 uint8 picture of class ``label`` (``variant`` shifts and shades it)."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    rng = np.random.default_rng([label, variant])
    cy, cx = SIZE / 2 + rng.uniform(-6, 6, size=2)
    r = np.hypot(yy - cy, xx - cx)
    kind = label % 10
    masks = [
        r < 15,
        (abs(yy - cy) < 12) & (abs(xx - cx) < 12),
        (r < 16) & (r > 9),
        (abs(yy - cy) < 4) | (abs(xx - cx) < 4),
        (xx.astype(int) // 6) % 2 == 0,
        abs(yy - cy) + abs(xx - cx) < 16,
        ((yy.astype(int) % 10) < 5) & ((xx.astype(int) % 10) < 5),
        (abs(yy - cy) < 16) & (abs(xx - cx) < 16) & ~((abs(yy - cy) < 10) & (abs(xx - cx) < 10)),
        ((yy.astype(int) // 8 + xx.astype(int) // 8) % 2) == 0,
        np.ones_like(r, dtype=bool),
    ]
    mask = masks[kind]
    shade = 0.75 + 0.25 * rng.random()
    colour = np.array(_COLOURS[kind], dtype=np.float32) * shade
    background = np.array([246, 247, 251], dtype=np.float32)
    img = np.where(mask[..., None], colour, background)
    if kind == 9:
        img = img * (0.35 + 0.65 * xx[..., None] / SIZE)
    return np.clip(img, 0, 255).astype(np.uint8)


def _png(img: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(img).save(out, format="PNG")
    return out.getvalue()


def write_gallery(path: Path, rows: int = 200, shards: int = 2) -> Path:
    """Write the gallery dataset at ``path`` (``shards`` files); returns the first shard."""
    weights = np.array([14, 11, 9, 13, 6, 10, 8, 12, 7, 10], dtype=np.float64)
    labels = np.random.default_rng(7).choice(10, size=rows, p=weights / weights.sum())
    labels = labels.astype(np.int32)
    pictures = [picture(int(lab), i) for i, lab in enumerate(labels)]
    names = [f"{CLASSES[int(lab)].replace(' ', '_')}_{i:04d}" for i, lab in enumerate(labels)]
    with FileWriter(path, shard_num=shards, overwrite=True) as writer:
        writer.add_schema(
            {
                "png": {"type": "bytes"},
                "pixels": {"type": "uint8", "shape": [SIZE, SIZE, 3]},
                "label": {"type": "int32"},
                "name": {"type": "string"},
                "score": {"type": "float32"},
            },
            desc="gallery: 48x48 pictures of ten shape classes",
        )
        writer.add_index(["label", "name"])
        writer.write_raw_data(
            {
                "png": [_png(p) for p in pictures],
                "pixels": np.stack(pictures),
                "label": labels,
                "name": names,
                "score": np.linspace(0, 1, rows, dtype=np.float32),
            }
        )
    return Path(str(path) + "0") if shards > 1 else path
