"""NumPy arrays (``.npz``, ``.npy``, or a folder of ``.npy``) as a conversion source.

Each array is one column; its first dimension is the row count (all arrays must
agree) and the rest is the field's shape: an array of shape ``(n, 28, 28)`` and
dtype uint8 becomes a ``uint8`` field of shape ``[28, 28]``, one of shape ``(n,)``
a scalar field. Unicode arrays become ``string`` fields, byte-string arrays
``bytes``; uint32 widens to int64 (lossless). Object arrays are refused (they
need pickle, which mrecord never loads). ``.npy`` files are memory-mapped, and so are the
arrays of an ``.npz`` written by ``np.savez``; those of ``np.savez_compressed`` are
decompressed a batch at a time: a conversion holds a few batches, whatever the arrays'
size.
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
from mrecord.errors import ArgumentError, ConversionError

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
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if m.filename.endswith(".npy")]
            return {
                check_field_name(m.filename[:-4], what=f"{name!r}: array"): _npz_member(
                    path, archive, m
                )
                for m in members
            }
    except zipfile.BadZipFile:
        pass  # not an archive: np.load says what it is
    except (ValueError, OSError, EOFError) as exc:
        raise ConversionError(f"{name!r} is not a readable .npz file: {exc}") from exc
    try:
        with open(path, "rb") as fh:
            loaded = np.load(fh, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                raise ConversionError(
                    f"{name!r} holds a single array (.npy data), not an .npz archive; name it .npy"
                )
            with loaded as npz:  # an archive zipfile could not read whole: as numpy reads it
                return {
                    check_field_name(key, what=f"{name!r}: array"): npz[key] for key in npz.files
                }
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ConversionError(f"{name!r} is not a readable .npz file: {exc}") from exc


def _npz_member(path: Path, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> Any:
    """One array of an ``.npz`` without reading it whole (``np.load`` of an archive reads
    each array whole when asked for it: a 393 MB ``np.savez`` file got the converter
    OOM-killed in a 250 MB memory group):

    - stored (``np.savez``): a memory map of its bytes in the archive;
    - compressed (``np.savez_compressed``): :class:`_StreamedArray`, its rows decompressed
      in order, a batch at a time;
    - read whole as before where neither can serve: Fortran order, a ``.npy`` header of
      format 3, or object arrays (which ``np.load`` refuses, without pickle)."""
    with archive.open(member) as fh:
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                fortran, dtype, shape = True, np.dtype(object), ()
        except ValueError:
            fortran, dtype, shape = True, np.dtype(object), ()
        header = fh.tell()
    if fortran or dtype.hasobject or not shape:
        with archive.open(member) as fh:
            whole: np.ndarray = np.load(fh, allow_pickle=False)
            return whole
    if member.compress_type == zipfile.ZIP_STORED:
        with open(path, "rb") as raw:
            raw.seek(member.header_offset)
            local = raw.read(30)  # the member's local header: its name and extra lengths
        names, extra = (
            int.from_bytes(local[26:28], "little"),
            int.from_bytes(local[28:30], "little"),
        )
        offset = member.header_offset + 30 + names + extra + header
        mapped: np.ndarray = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
        return mapped
    return _StreamedArray(archive.filename or str(path), member.filename, header, dtype, shape)


class _StreamedArray:
    """A compressed ``.npz`` member read row by row in order: what :class:`NpzSource`
    needs of an array (``dtype``, ``shape``, and slices of rows, each after the last)."""

    def __init__(
        self, path: str, member: str, header: int, dtype: np.dtype[Any], shape: tuple[int, ...]
    ) -> None:
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape)
        self.itemsize = dtype.itemsize
        self._row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        self._path, self._member, self._header = path, member, header
        self._archive: zipfile.ZipFile | None = None
        self._stream: Any = None
        self._next = 0  # the row the stream is at

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, step = rows.indices(len(self))
        if step != 1:
            raise ArgumentError("a streamed array is read in row ranges, one step at a time")
        if self._stream is None or start < self._next:
            self._open()
        if start > self._next:
            self._skip(start - self._next)
        count = max(0, stop - start)
        data = self._read(count * self._row_bytes)
        self._next = start + count
        return np.frombuffer(data, dtype=self.dtype).reshape(count, *self.shape[1:])

    def _open(self) -> None:
        self.close()
        self._archive = zipfile.ZipFile(self._path)
        self._stream = self._archive.open(self._member)
        self._read(self._header)
        self._next = 0

    def _skip(self, rows: int) -> None:
        left = rows * self._row_bytes
        while left:
            left -= len(self._read(min(left, 1 << 24)))

    def _read(self, nbytes: int) -> bytes:
        data: bytes = self._stream.read(nbytes)
        if len(data) != nbytes:
            raise ConversionError(
                f"{self._path!r}: array {self._member!r} ends before its rows do (a truncated "
                "archive)"
            )
        return data

    def close(self) -> None:
        """Close the member's stream and its archive."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._archive is not None:
            self._archive.close()
            self._archive = None


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

    def close(self) -> None:
        """Close the streams of compressed arrays (mapped ones go with the arrays)."""
        for arr in self.arrays.values():
            if isinstance(arr, _StreamedArray):
                arr.close()

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
