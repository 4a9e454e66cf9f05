"""Parquet files, Arrow IPC files and Hugging Face datasets as conversion sources.

All three stream Arrow record batches through one mapping (:mod:`mrecord.format.arrow_types`):
the schema comes from the Arrow types, each batch becomes mrecord columns, and a type
mrecord cannot store fails up front naming the column. Needs ``pip install 'mrecord[arrow]'``.

- ``parquet``: one ``.parquet`` file, or a folder of them (sorted by name, same schema),
  read one row group slice of ``batch_rows`` rows at a time.
- ``arrow``: an Arrow IPC file (``.arrow`` / Feather v2) or stream, or a folder of them
  (what ``datasets.Dataset.save_to_disk`` writes), memory-mapped.
- ``hf``: a ``datasets.Dataset`` in memory, or a folder written by ``save_to_disk``
  (a ``DatasetDict`` needs ``split``). Never downloads anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.errors import ConversionError, MissingDependencyError

__all__ = [
    "ArrowSource",
    "ArrowTableSource",
    "HfSource",
    "ParquetSource",
    "arrow_batches",
    "import_datasets",
]


def import_datasets() -> ModuleType:
    """Hugging Face ``datasets``, or an ImportError naming the extra to install."""
    try:
        import datasets
    except ImportError as exc:
        raise MissingDependencyError(
            "Hugging Face support needs the datasets package: pip install 'mrecord[arrow]'"
        ) from exc
    return datasets  # type: ignore[no-any-return]


class ArrowTableSource(Source):
    """Rows from Arrow record batches with one Arrow schema (the base of the three sources)."""

    kind = "arrow"

    def __init__(
        self,
        *,
        name: str,
        arrow_schema: Any,
        num_rows: int | None,
        desc: dict[str, Any],
    ):
        from mrecord.format.arrow_types import schema_for_arrow
        from mrecord.format.schema import parse_schema

        schema = schema_for_arrow(arrow_schema)
        self.arrow_schema = arrow_schema
        self.fields = parse_schema(schema)
        # Index `label` by default, as the other converters do, when it is an integer scalar.
        label = schema.get("label", {})
        is_label = str(label.get("type", "")).lstrip("u").startswith("int") and "shape" not in label
        index = ["label"] if is_label else []
        super().__init__(
            name=name,
            schema=schema,
            desc=json.dumps(desc),
            num_rows=num_rows,
            index_fields=index,
        )

    def record_batches(self, batch_rows: int) -> Iterable[Any]:
        """Arrow record batches (or tables) of at most ``batch_rows`` rows, in order."""
        raise NotImplementedError

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield the rows as mrecord columns, ``batch_rows`` at a time at most."""
        from mrecord.format.arrow_columns import column_from_arrow
        from mrecord.format.arrow_types import import_pyarrow

        check_batch_rows(batch_rows)
        pool = import_pyarrow().default_memory_pool()
        names = self.fields.names
        for batch in self.record_batches(batch_rows):
            if batch.num_rows == 0:
                continue
            if batch.schema.names != names:
                raise ConversionError(
                    f"{self.name!r}: a batch has columns {batch.schema.names}, the first had "
                    f"{names}; every file must have the same schema"
                )
            columns = {
                f.name: column_from_arrow(f.name, batch.column(i), f)
                for i, f in enumerate(self.fields.fields)
            }
            del batch
            # Arrow's pool keeps what decoding freed: a Parquet file of row groups of 80
            # images (100 KB) grew the process by 104 MB (48 given back), and converting
            # 2.4 GB of them took 160 s in a 200 MB memory group (8.6 s given back).
            pool.release_unused()
            yield columns


def _files(src: Path, suffixes: tuple[str, ...], what: str) -> list[Path]:
    if src.is_dir():
        files = sorted(p for p in src.iterdir() if p.suffix in suffixes and p.is_file())
        if not files:
            raise ConversionError(f"folder {str(src)!r} has no {'/'.join(suffixes)} files")
        return files
    if not src.is_file():
        raise ConversionError(f"{what} {str(src)!r} does not exist")
    return [src]


def _same_schema(files: list[Path], schemas: list[Any]) -> Any:
    first = schemas[0]
    for path, schema in zip(files[1:], schemas[1:], strict=True):
        if not schema.equals(first, check_metadata=False):
            raise ConversionError(
                f"{str(path)!r} has schema {schema.to_string(show_schema_metadata=False)!r}, "
                f"but {str(files[0])!r} has {first.to_string(show_schema_metadata=False)!r}"
            )
    return first


class ParquetSource(ArrowTableSource):
    """A Parquet file or a folder of them (see the module docstring)."""

    kind = "parquet"

    def __init__(self, src: str | os.PathLike[str]):
        from mrecord.format.arrow_types import import_pyarrow

        import_pyarrow()
        import pyarrow.parquet as pq

        self.paths = _files(Path(src), (".parquet", ".parq", ".pq"), "Parquet source")
        self._files: list[Any] = []
        try:
            for path in self.paths:
                self._files.append(pq.ParquetFile(path, memory_map=True))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
            self.close()
            raise ConversionError(f"{str(path)!r} is not a readable Parquet file: {exc}") from exc
        schema = _same_schema(self.paths, [f.schema_arrow for f in self._files])
        rows = sum(f.metadata.num_rows for f in self._files)
        desc = {"source": "parquet", "files": [p.name for p in self.paths]}
        super().__init__(name=str(src), arrow_schema=schema, num_rows=rows, desc=desc)

    def row_bytes(self) -> int | None:
        """A row's bytes on average: the row groups' uncompressed sizes (their metadata)
        over the rows. Sizes as encoded: values repeated through a column, which Parquet
        keeps once in a dictionary, count once (their batches larger than ``BATCH_BYTES``
        in memory; ``--batch-rows`` sets them)."""
        rows = self.num_rows or 0
        if not rows:
            return None
        total: int = sum(
            int(f.metadata.row_group(i).total_byte_size)
            for f in self._files
            for i in range(f.metadata.num_row_groups)
        )
        return max(1, total // rows)

    def record_batches(self, batch_rows: int) -> Iterable[Any]:
        """Each file's batches in turn."""
        for path, f in zip(self.paths, self._files, strict=True):
            try:
                yield from f.iter_batches(batch_size=batch_rows)
            except OSError as exc:
                raise ConversionError(f"{str(path)!r}: cannot read Parquet data: {exc}") from exc

    def close(self) -> None:
        """Close the Parquet files."""
        for f in self._files:
            f.close()
        self._files = []


def _open_ipc(path: Path) -> Any:
    """The whole IPC file or stream at ``path`` as a table (memory-mapped, no copy)."""
    import pyarrow as pa

    try:
        source = pa.memory_map(str(path), "r")
    except OSError as exc:
        raise ConversionError(f"{str(path)!r} cannot be opened: {exc}") from exc
    try:
        try:
            return pa.ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            return pa.ipc.open_stream(source).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ConversionError(f"{str(path)!r} is not an Arrow IPC file or stream: {exc}") from exc


class ArrowSource(ArrowTableSource):
    """An Arrow IPC file or stream, or a folder of them (see the module docstring)."""

    kind = "arrow"

    def __init__(self, src: str | os.PathLike[str]):
        from mrecord.format.arrow_types import import_pyarrow

        import_pyarrow()
        self.paths = _files(Path(src), (".arrow", ".feather", ".ipc"), "Arrow source")
        self.tables = [_open_ipc(p) for p in self.paths]
        schema = _same_schema(self.paths, [t.schema for t in self.tables])
        rows = sum(t.num_rows for t in self.tables)
        desc = {"source": "arrow", "files": [p.name for p in self.paths]}
        super().__init__(name=str(src), arrow_schema=schema, num_rows=rows, desc=desc)

    def row_bytes(self) -> int | None:
        """A row's bytes on average: the tables' buffers (mapped, not read) over the rows."""
        rows = self.num_rows or 0
        return max(1, sum(int(t.nbytes) for t in self.tables) // rows) if rows else None

    def record_batches(self, batch_rows: int) -> Iterable[Any]:
        """Each table's rows, ``batch_rows`` at a time."""
        for table in self.tables:
            yield from table.to_batches(max_chunksize=batch_rows)

    def close(self) -> None:
        """Drop the memory-mapped tables."""
        self.tables = []


def _hf_dataset(src: Any, split: str | None) -> Any:
    datasets = import_datasets()
    if isinstance(src, (str, os.PathLike)):
        path = Path(src)
        if not path.is_dir():
            raise ConversionError(
                f"Hugging Face source {str(path)!r} is not a folder written by "
                "Dataset.save_to_disk (mrecord never downloads: load the dataset yourself and "
                "call mrecord.from_hf)"
            )
        try:
            src = datasets.load_from_disk(str(path))
        except (FileNotFoundError, ValueError) as exc:
            raise ConversionError(f"{str(path)!r} cannot be loaded by datasets: {exc}") from exc
    if isinstance(src, datasets.DatasetDict):
        splits = sorted(src)
        if split is None and len(splits) == 1:
            split = splits[0]
        if split not in src:
            raise ConversionError(
                f"the Hugging Face DatasetDict has splits {splits}; choose one with "
                "split=... (--split)"
            )
        src = src[split]
    elif split is not None:
        raise ConversionError(f"split={split!r} given, but the source is one Dataset, not a dict")
    if not isinstance(src, datasets.Dataset):
        raise ConversionError(
            f"expected a datasets.Dataset, got {type(src).__name__} (an IterableDataset has no "
            "length: materialize it with Dataset.from_generator first)"
        )
    return src


def _class_names(features: Any) -> dict[str, list[str]]:
    datasets = import_datasets()
    return {
        name: list(feature.names)
        for name, feature in features.items()
        if isinstance(feature, datasets.ClassLabel)
    }


class HfSource(ArrowTableSource):
    """A Hugging Face ``datasets.Dataset`` (or a ``save_to_disk`` folder), in row order."""

    kind = "hf"

    def __init__(self, src: Any, split: str | None = None):
        from mrecord.format.arrow_types import import_pyarrow
        from mrecord.format.features import describe

        self.dataset = _hf_dataset(src, split)
        features = self.dataset.features
        desc: dict[str, Any] = {"source": "huggingface"}
        classes = _class_names(features)
        if classes:
            desc["classes"] = classes  # (the older place; "features" is the documented one)
        if self.dataset.info.description:
            desc["description"] = self.dataset.info.description
        datasets = import_datasets()
        # Image columns are structs {bytes, path} in Arrow: mrecord keeps their bytes.
        self.images = [n for n, f in features.items() if isinstance(f, datasets.Image)]
        desc = json.loads(describe(desc, class_names=classes, images=self.images))
        arrow_schema = features.arrow_schema
        if self.images:
            pa = import_pyarrow()
            arrow_schema = pa.schema(
                [
                    pa.field(f.name, pa.binary()) if f.name in self.images else f
                    for f in arrow_schema
                ]
            )
        name = str(src) if isinstance(src, (str, os.PathLike)) else "datasets.Dataset"
        super().__init__(
            name=name, arrow_schema=arrow_schema, num_rows=len(self.dataset), desc=desc
        )

    def row_bytes(self) -> int | None:
        """A row's bytes on average over the dataset's Arrow table (mapped, not read;
        every row of it, where the dataset is a selection of them)."""
        table = self.dataset.data
        rows = int(table.num_rows)
        return max(1, int(table.nbytes) // rows) if rows else None

    def record_batches(self, batch_rows: int) -> Iterable[Any]:
        """The dataset's rows (its selection and order) as Arrow tables."""
        if not self.images:
            return arrow_batches(self.dataset, batch_rows)
        return (self._image_bytes(t) for t in arrow_batches(self.dataset, batch_rows))

    def _image_bytes(self, table: Any) -> Any:
        """``table`` with each Image column's struct replaced by its encoded bytes."""
        import pyarrow.compute as pc

        for name in self.images:
            i = table.schema.get_field_index(name)
            column = table.column(i)
            data = pc.struct_field(column, "bytes")
            if data.null_count > column.null_count:
                raise ConversionError(
                    f"{self.name!r}: Image column {name!r} has images given by path only; "
                    "embed them first (datasets: ds.cast_column(name, Image(decode=True)) "
                    "then ds.map(lambda x: x) or save_to_disk/load_from_disk)"
                )
            table = table.set_column(i, name, data)
        return table


def arrow_batches(dataset: Any, batch_rows: int) -> Iterator[Any]:
    """A ``datasets.Dataset`` as Arrow tables of at most ``batch_rows`` rows, in its order."""
    yield from dataset.with_format("arrow").iter(batch_size=batch_rows)
