"""NumPy arrays (``.npz``, ``.npy``, or a folder of ``.npy``) as a conversion source.

Each array is one column; its first dimension is the row count (all arrays must
agree) and the rest is the field's shape: an array of shape ``(n, 28, 28)`` and
dtype uint8 becomes a ``uint8`` field of shape ``[28, 28]``, one of shape ``(n,)``
a scalar field. Unicode arrays become ``string`` fields, byte-string arrays
``bytes``; uint32 widens to int64 (lossless). Object arrays are refused (they
need pickle, which mrecord never loads). ``.npy`` files are memory-mapped.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.convert.base import (
    DEFAULT_BATCH_ROWS,
    Batch,
    Source,
    check_batch_rows,
    check_field_name,
)
from mrecord.errors import ConversionError

__all__ = ["NpzSource", "field_for_array", "load_arrays"]

_SAME_TYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "float16",
    "float32",
    "float64",
)


def field_for_array(name: str, arr: np.ndarray, *, path: str) -> dict[str, Any]:
    """The schema entry for column ``name`` holding ``arr`` (rows along axis 0)."""
    if arr.ndim == 0:
        raise ConversionError(
            f"{path!r}: array {name!r} is a scalar; arrays need a first dimension (rows)"
        )
    kind = arr.dtype.kind
    if kind in "US":
        if arr.ndim != 1:
            raise ConversionError(
                f"{path!r}: array {name!r} holds strings with shape {arr.shape}; only 1-D "
                "string arrays (one string per row) can be converted"
            )
        return {"type": "string" if kind == "U" else "bytes"}
    type_name = arr.dtype.name
    if type_name == "uint32":
        type_name = "int64"
    if type_name not in _SAME_TYPES:
        raise ConversionError(
            f"{path!r}: array {name!r} has dtype {arr.dtype.name!r}, which mrecord cannot "
            f"store; convert it to one of {list(_SAME_TYPES)}"
        )
    field: dict[str, Any] = {"type": type_name}
    if arr.ndim > 1:
        field["shape"] = list(arr.shape[1:])
    return field


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ConversionError(f"{str(path)!r} is not a readable .npy file: {exc}") from exc
    return arr


def load_arrays(src: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Columns from a ``.npz`` file, a ``.npy`` file (column named by its stem) or a folder."""
    path = Path(src)
    name = str(path)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise ConversionError(f"folder {name!r} has no .npy files")
        return {check_field_name(f.stem, what=f"{str(f)!r}: column"): _load_npy(f) for f in files}
    if not path.is_file():
        raise ConversionError(f"NumPy source {name!r} does not exist")
    if path.suffix == ".npy":
        return {check_field_name(path.stem, what=f"{name!r}: column"): _load_npy(path)}
    try:
        with open(path, "rb") as fh:
            loaded = np.load(fh, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                raise ConversionError(
                    f"{name!r} holds a single array (.npy data), not an .npz archive; name it .npy"
                )
            with loaded as npz:
                return {
                    check_field_name(key, what=f"{name!r}: array"): npz[key] for key in npz.files
                }
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ConversionError(f"{name!r} is not a readable .npz file: {exc}") from exc


class NpzSource(Source):
    """NumPy arrays → one row per index of the first dimension (see the module docstring)."""

    kind = "npz"

    def __init__(self, src: str | os.PathLike[str]):
        self.arrays = load_arrays(src)
        name = str(src)
        if not self.arrays:
            raise ConversionError(f"{name!r} holds no arrays")
        schema = {k: field_for_array(k, a, path=name) for k, a in self.arrays.items()}
        lengths = {k: len(a) for k, a in self.arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ConversionError(
                f"{name!r}: arrays disagree on the row count (first dimension): {lengths}"
            )
        desc = {"source": "npz", "file": Path(src).name}
        super().__init__(
            name=name,
            schema=schema,
            desc=json.dumps(desc),
            num_rows=next(iter(lengths.values())),
        )

    def row_bytes(self) -> int | None:
        """A row's bytes: each array's item size times its row's items."""
        return max(1, sum(a.itemsize * int(np.prod(a.shape[1:])) for a in self.arrays.values()))

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in order, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        n = self.num_rows or 0
        for start in range(0, n, batch_rows):
            batch: Batch = {}
            for key, arr in self.arrays.items():
                part = np.asarray(arr[start : start + batch_rows])
                kind = self.schema[key]["type"]
                if kind == "string":
                    batch[key] = [str(v) for v in part]
                elif kind == "bytes":
                    batch[key] = [bytes(v) for v in part]
                else:
                    batch[key] = np.ascontiguousarray(part, dtype=kind)
            yield batch
