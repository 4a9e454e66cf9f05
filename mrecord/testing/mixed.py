"""A small dataset with one column of every kind, for tests of readers and servers.

::

    first_file = write_mixed(tmp / "mixed.mrecord", rows=240)

Columns: ``id`` int64, ``label`` int32 (``id % 7``), ``vec`` float32[4], ``blob`` bytes
(random, ``0 .. max_blob`` bytes), ``text`` string (may be empty, non-ASCII),
``points`` float64[-1, 2] (0 to 4 rows each); 3 shards (by default) of 4 KiB pages, so
every shard has several pages of each column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mrecord.writer.file_writer import FileWriter

__all__ = ["MIXED_SCHEMA", "write_mixed"]

MIXED_SCHEMA = {
    "id": {"type": "int64"},
    "label": {"type": "int32"},
    "vec": {"type": "float32", "shape": [4]},
    "blob": {"type": "bytes"},
    "text": {"type": "string"},
    "points": {"type": "float64", "shape": [-1, 2]},
}


def write_mixed(
    path: Path,
    rows: int,
    *,
    shards: int = 3,
    seed: int = 5,
    max_blob: int = 40,
    text_repeats: int = 3,
    index_label: bool = False,
    compress: bool = False,
) -> Path:
    """Write the dataset at ``path`` in ``shards`` files (``path0`` .. ``path2`` for 3, ``path``
    itself for 1); returns the first file.

    ``text_repeats``: row ``i``'s text is ``"row i ✓"`` repeated ``i % text_repeats``
    times. ``index_label``: a ``.db`` index on ``label``. ``compress``: the bytes and
    string columns stored with zstd.
    """
    rng = np.random.default_rng(seed)
    with FileWriter(path, shard_num=shards, overwrite=True) as writer:
        writer.add_schema(MIXED_SCHEMA)
        if index_label:
            writer.add_index(["label"])
        writer.set_page_size(1 << 12)
        if compress:
            writer.set_compression("zstd", ["blob", "text"])
        writer.write_raw_data(
            {
                "id": np.arange(rows, dtype=np.int64),
                "label": (np.arange(rows) % 7).astype(np.int32),
                "vec": rng.standard_normal((rows, 4)).astype(np.float32),
                "blob": [rng.bytes(int(n)) for n in rng.integers(0, max_blob, rows)],
                "text": [f"row {i} ✓" * (i % text_repeats) for i in range(rows)],
                "points": [rng.standard_normal((int(k), 2)) for k in rng.integers(0, 5, rows)],
            }
        )
    return writer.files[0]
