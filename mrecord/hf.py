"""Hugging Face datasets ⇄ mrecord: :func:`to_hf` and :func:`from_hf`.

``to_hf(path)`` reads a dataset into an in-memory ``datasets.Dataset``, or with
``cache_dir`` into one Arrow file there that the dataset maps (fixed shapes become
fixed-length ``List`` features, so ``with_format("numpy")`` gives ``(n, *shape)``
arrays); ``from_hf(dataset, path)`` writes a ``datasets.Dataset`` (its current
selection and order) as an mrecord dataset, streaming Arrow batches.
Neither ever downloads: build or load the Hugging Face dataset yourself.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mrecord.errors import ArgumentError
from mrecord.storage.probe import memory_budget

__all__ = ["from_hf", "to_hf"]


def to_hf(
    path: str | os.PathLike[str],
    *,
    columns: Sequence[str] | None = None,
    batch_rows: int = 4096,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """The rows of the mrecord dataset at ``path`` as a ``datasets.Dataset``.

    ``columns`` picks fields (default: all). Rows are read ``batch_rows`` at a time, fewer
    where that many would hold more than 8 MiB. Class names and encoded images recorded
    in the description come back as ``ClassLabel`` and ``Image`` features.

    Without ``cache_dir`` the whole dataset is held in memory, and a dataset larger than
    the memory budget (``mrecord.storage.probe.memory_budget``: a memory group's limit
    less what is charged to it, or the machine's available memory) is refused with an
    :class:`~mrecord.errors.ArgumentError` (it was read until the process was killed).
    With ``cache_dir`` the rows are written there as one Arrow file (what ``datasets``
    itself keeps on disk; replaced on each call) and the dataset maps it: for data larger
    than memory.
    Needs ``pip install 'mrecord[arrow]'``.
    """
    from mrecord.convert.arrow_sources import import_datasets
    from mrecord.format.arrow_types import import_pyarrow
    from mrecord.reader.dataset_reader import DatasetReader

    pa = import_pyarrow()
    datasets = import_datasets()
    cols = list(columns) if columns is not None else None
    with DatasetReader.open(path, columns=cols) as reader:
        fields = [reader.schema[name] for name in reader.column_names]
        desc = reader.shards[0].meta.desc if reader.shards else None
        features = _features(datasets, fields, desc)
        info = datasets.DatasetInfo(description=desc or "", features=features)
        if cache_dir is None:
            _check_fits(reader, path)
            tables = [features.arrow_schema.empty_table()]
            tables += [_hf_table(t, features) for t in _arrow_tables(reader, fields, batch_rows)]
            return datasets.Dataset(pa.concat_tables(tables), info=info)
        target = Path(cache_dir) / _cache_name(reader, cols)
        target.parent.mkdir(parents=True, exist_ok=True)
        # a name of this process's own: another writing the same file at once keeps its own
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        try:
            with (
                pa.OSFile(str(partial), "wb") as sink,
                pa.ipc.new_stream(sink, features.arrow_schema) as writer,
            ):
                for table in _arrow_tables(reader, fields, batch_rows):
                    writer.write_table(_hf_table(table, features))
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return datasets.Dataset.from_file(str(target), info=info)


def _features(datasets: Any, fields: list[Any], desc: str | None) -> Any:
    """The ``datasets.Features`` of ``fields``: Arrow's types, with the class names and
    encoded images the description records (docs/FORMAT.md "features") as ``ClassLabel``
    and ``Image``."""
    from mrecord.format.arrow_types import arrow_schema_for
    from mrecord.format.features import class_names, image_columns

    features = datasets.Features.from_arrow_schema(arrow_schema_for(fields))
    for name, names in class_names(desc).items():
        if name in features:
            features[name] = datasets.ClassLabel(names=names)
    for name in image_columns(desc):
        if name in features:
            features[name] = datasets.Image()
    return features


def _arrow_tables(reader: Any, fields: list[Any], batch_rows: int) -> Iterator[Any]:
    """The reader's rows as Arrow tables of ``batch_rows`` rows, fewer where those would
    hold more than 8 MiB (``iter_dataset_blocks``): 4,096 rows were 410 MB of 100 KB
    images a read."""
    from mrecord.convert.base import check_batch_rows
    from mrecord.reader.passes import iter_dataset_blocks

    check_batch_rows(batch_rows)
    for block in iter_dataset_blocks(reader, batch_rows):
        yield block.to_arrow(fields)


def _hf_table(table: Any, features: Any) -> Any:
    """``table`` in the storage types of ``features``: class labels as int64, images as
    ``{bytes, path}`` structs (what ``cast_column`` made of them, without a second copy of
    the dataset)."""
    from mrecord.format.arrow_types import import_pyarrow

    pa = import_pyarrow()
    schema = features.arrow_schema
    arrays = []
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        kind = schema.field(name).type
        if pa.types.is_struct(kind):  # an Image: the encoded bytes, no path
            paths = pa.nulls(len(column), pa.string())
            column = pa.StructArray.from_arrays([column, paths], fields=list(kind))
        elif column.type != kind:
            column = column.cast(kind)
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=schema)


def _check_fits(reader: Any, path: str | os.PathLike[str]) -> None:
    """Refuse to hold in memory a dataset larger than the memory budget."""
    budget = memory_budget()
    size = reader.mean_row_bytes * reader.num_rows
    if budget is not None and size > budget:
        raise ArgumentError(
            f"{os.fspath(path)!r} holds {size / 2**20:,.0f} MiB of rows, more than the memory "
            f"this process may fill ({budget / 2**20:,.0f} MiB): give "
            "to_hf(..., cache_dir=DIR) to write them as an Arrow file there that the "
            "dataset maps, or pick fewer columns"
        )


def _cache_name(reader: Any, columns: list[str] | None) -> str:
    """The cache file of this dataset and column choice: its id, generation and the
    columns (another generation, after an append, is another file)."""
    meta = reader.shards[0].meta if reader.shards else None
    key = json.dumps([meta.dataset_id if meta else "", meta.generation if meta else 0, columns])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"mrecord-{digest}.arrow"


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
