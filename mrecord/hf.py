"""Hugging Face datasets ⇄ mrecord: :func:`to_hf` and :func:`from_hf`.

``to_hf(path)`` reads a dataset into an in-memory ``datasets.Dataset`` (fixed
shapes become fixed-length ``List`` features, so ``with_format("numpy")`` gives
``(n, *shape)`` arrays); ``from_hf(dataset, path)`` writes a ``datasets.Dataset``
(its current selection and order) as an mrecord dataset, streaming Arrow batches.
Neither ever downloads: build or load the Hugging Face dataset yourself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["from_hf", "to_hf"]


def to_hf(
    path: str | os.PathLike[str],
    *,
    columns: Sequence[str] | None = None,
    batch_rows: int = 4096,
) -> Any:
    """The rows of the mrecord dataset at ``path`` as an in-memory ``datasets.Dataset``.

    ``columns`` picks fields (default: all). The whole dataset is held in memory.
    Needs ``pip install 'mrecord[arrow]'``.
    """
    import numpy as np

    from mrecord.convert.arrow_sources import import_datasets
    from mrecord.format.arrow_types import arrow_schema_for, import_pyarrow
    from mrecord.format.features import class_names, image_columns
    from mrecord.reader.dataset_reader import DatasetReader

    pa = import_pyarrow()
    datasets = import_datasets()
    cols = list(columns) if columns is not None else None
    with DatasetReader.open(path, columns=cols) as reader:
        fields = [reader.schema[name] for name in reader.column_names]
        tables = [arrow_schema_for(fields).empty_table()]
        for lo in range(0, reader.num_rows, batch_rows):
            ids = np.arange(lo, min(lo + batch_rows, reader.num_rows), dtype=np.int64)
            tables.append(reader.read_rows(ids).to_arrow(fields))
        desc = reader.shards[0].meta.desc if reader.shards else None
    table = pa.concat_tables(tables)
    info = datasets.DatasetInfo(description=desc or "")
    out = datasets.Dataset(table, info=info)
    # What the columns mean ("features" in the description, docs/FORMAT.md): class names
    # come back as ClassLabel, encoded image bytes as Image.
    for name, names in class_names(desc).items():
        if name in out.column_names:
            out = out.cast_column(name, datasets.ClassLabel(names=names))
    for name in image_columns(desc):
        if name in out.column_names:
            out = out.cast_column(name, datasets.Image())
    return out


def from_hf(
    dataset: Any,
    path: str | os.PathLike[str],
    *,
    split: str | None = None,
    **write_options: Any,
) -> Any:
    """Write a ``datasets.Dataset`` (or one ``split`` of a ``DatasetDict``) to ``path``.

    Keywords are :class:`mrecord.convert.WriteOptions` fields (``shard_num``,
    ``compression``, ``overwrite``, ...). Returns the
    :class:`~mrecord.convert.ConversionSummary`. ClassLabel names and Image columns
    (stored as their encoded bytes) go into the description's ``"features"``
    (docs/FORMAT.md), which :func:`to_hf` turns back into ClassLabel and Image. Types
    mrecord cannot store (timestamps, ...) raise :class:`~mrecord.errors.ConversionError`
    naming the column.
    """
    from mrecord.convert.arrow_sources import HfSource
    from mrecord.convert.driver import WriteOptions, write_source

    options = WriteOptions(**write_options)
    with HfSource(dataset, split=split) as source:
        return write_source(source, path, options)
