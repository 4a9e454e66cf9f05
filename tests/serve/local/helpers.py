"""Datasets and value comparisons shared by the same-host transport tests (tests/serve/local/)."""


from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import mrecord
from mrecord import FileWriter
from mrecord.serve.server.run import ServerThread
from mrecord.testing.mixed import write_mixed

ROWS = 240
COLUMNS = ["blob", "id", "label", "points", "text", "vec"]  # RemoteDataset's default: sorted
TRANSPORTS = ["local", "http"]
MB = 1 << 20


# -- datasets and servers --------------------------------------------------------------------------


def _write_mixed(path: Path, compress: bool = False) -> Path:
    """``mixed``: every kind of column, 3 shards, small pages, no index;
    ``compress``: the same rows, with the bytes and string columns stored compressed."""
    return write_mixed(path, ROWS, seed=13, max_blob=60, text_repeats=4, compress=compress)


SIZES_ROWS = 48
BIG_ROWS = (5, 20, 33)
"""Rows of ``sizes`` whose values are 2 MB; every other value is a few bytes."""


def _write_sizes(path: Path) -> Path:
    """A bytes and a variable-shape column whose values differ in size by five orders of
    magnitude."""
    rng = np.random.default_rng(17)
    big = [i in BIG_ROWS for i in range(SIZES_ROWS)]
    blobs = [rng.bytes(2 * MB if b else int(rng.integers(0, 30))) for b in big]
    arrays = [rng.standard_normal(MB // 4 if b else int(rng.integers(0, 4))) for b in big]
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "blob": {"type": "bytes"},
                "arr": {"type": "float64", "shape": [-1]},
            }
        )
        writer.write_raw_data(
            {"id": np.arange(SIZES_ROWS, dtype=np.int64), "blob": blobs, "arr": arrays}
        )
    return Path(str(path) + "0")


def _write_images(path: Path, rows: int = 90) -> Path:
    """Image-sized bytes values (20-40 KB), stored compressed (so a same-host reader gets
    them copied into its segments, not as places in the files), and a label."""
    rng = np.random.default_rng(11)
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.set_compression("zstd", ["image"])
        writer.write_raw_data(
            {
                "image": [rng.bytes(int(n)) for n in rng.integers(20 << 10, 40 << 10, rows)],
                "label": np.arange(rows, dtype=np.int32),
            }
        )
    return Path(str(path) + "0")


# -- comparing values ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A value as something ``==`` compares exactly: bytes, str, or (dtype, shape, bytes)."""
    if isinstance(value, (bytes, str)):
        return value
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return value.tobytes()  # a bytes value as an array (MindSpore's iterators do this)
    a = np.asarray(value)
    if a.dtype.kind in "US":
        return str(a)
    return (a.dtype.str, a.shape, a.tobytes())


def _rows(ds: Any, epochs: int = 2) -> list[tuple[Any, ...]]:
    it = ds.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [tuple(_plain(v) for v in row) for _ in range(epochs) for row in it]


def _block(block: Any, columns: list[str]) -> dict[str, list[Any]]:
    return {c: [_plain(v) for v in block.columns[c]] for c in columns}


def _remote(server: ServerThread, transport: str, **kwargs: Any) -> mrecord.RemoteDataset:
    name = kwargs.pop("name", "mixed")
    ds = mrecord.RemoteDataset(server.url, name, transport=transport, **kwargs)
    assert ds.transport == transport
    return ds
