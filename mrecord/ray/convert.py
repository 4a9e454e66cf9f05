"""Distributed conversion: ``mrecord.convert``'s sources parsed in Ray tasks.

The driver opens the source once (folder listing, schema, description) and cuts it
into *units*, one Ray task each:

- ``imagefolder``: each class subfolder, in runs of at most ``files_per_task`` images;
- ``cifar10``: each binary file;
- any other kind: the whole source in one task (its parsing is one sequential pass).

Every task runs the same source class as the single-process converter on its unit and
yields its columnar batches; :class:`~mrecord.ray.MRecordDatasink` writes them, so the
result is committed atomically, with the rows in the single-process order (units in
order, rows in order inside each unit).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import ray.data

from mrecord.convert import SOURCES, ConversionSummary, WriteOptions
from mrecord.convert.cifar10 import Cifar10Source
from mrecord.convert.imagefolder import ImageFolderSource
from mrecord.errors import ArgumentError
from mrecord.format.compression import DEFAULT_ZSTD_LEVEL
from mrecord.ray.datasink import DEFAULT_PAGE_SIZE, MRecordDatasink

__all__ = ["DEFAULT_FILES_PER_TASK", "convert"]

DEFAULT_FILES_PER_TASK = 2048
"""Most images one image-folder task converts (a big class is split into several tasks)."""


def _units(source: Any, kind: str, files_per_task: int) -> list[dict[str, Any]]:
    if isinstance(source, ImageFolderSource):
        root = source.root
        labels = np.array([label for _, label in source.items], dtype=np.int64)
        units = []
        for label in np.unique(labels).tolist():
            members = np.flatnonzero(labels == label).tolist()
            for a in range(0, len(members), files_per_task):
                chosen = members[a : a + files_per_task]
                names = [Path(source.items[i][0]).relative_to(root).as_posix() for i in chosen]
                units.append({"files": "\n".join(names), "label": int(label)})
        return units
    if isinstance(source, Cifar10Source):
        return [{"files": str(f), "label": -1} for f in source.files]
    return [{"files": "", "label": -1}]


class _UnitConverter:
    """The map function of a conversion task: one unit in, its source's batches out."""

    def __init__(
        self,
        kind: str,
        src: str,
        source_options: Mapping[str, Any],
        classes: list[str],
        batch_rows: int,
    ):
        self.kind = kind
        self.src = src
        self.options = dict(source_options)
        self.classes = classes
        self.batch_rows = batch_rows

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, Any]]:
        for files, label in zip(batch["files"].tolist(), batch["label"].tolist(), strict=True):
            with self._source(str(files), int(label)) as source:
                yield from source.iter_batches(self.batch_rows)
                for problem in source.problems:
                    logging.getLogger("mrecord.ray").warning("%s: %s", self.src, problem)

    def _source(self, files: str, label: int) -> Any:
        if self.kind == "imagefolder":
            root = Path(self.src)
            items = [(root / name, label) for name in files.split("\n") if name]
            return ImageFolderSource(root, items=items, classes=self.classes, **self.options)
        if self.kind == "cifar10":
            return Cifar10Source(files, **self.options)
        return SOURCES[self.kind](self.src, **self.options)


def convert(
    kind: str,
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    source_options: Mapping[str, Any] | None = None,
    shard_num: int | Literal["per_task"] | None = None,
    index_fields: list[str] | None = None,
    compression: str | None = None,
    compress_fields: Sequence[str] | None = None,
    compression_level: int = DEFAULT_ZSTD_LEVEL,
    page_size: int | None = None,
    overwrite: bool = False,
    batch_rows: int = 4096,
    files_per_task: int = DEFAULT_FILES_PER_TASK,
    ray_remote_args: dict[str, Any] | None = None,
) -> ConversionSummary:
    """Convert ``src`` of ``kind`` (a key of ``mrecord.convert.SOURCES``) to ``dst`` with Ray.

    Options as :func:`mrecord.convert.convert` (``index_fields=None`` uses the source's
    suggestion, ``compress_fields`` limits ``compression="zstd"`` to some fields);
    ``shard_num`` as for :class:`~mrecord.ray.MRecordDatasink` (``None``: from the data's
    size; ``"per_task"``: one shard per task). Uses the Ray cluster that is
    initialized, or starts a local one. Images skipped with ``on_error="skip"`` are counted
    in ``problems`` (their names stay in the tasks' logs).
    """
    if kind not in SOURCES:
        raise ArgumentError(f"unknown source kind {kind!r}; choose one of {sorted(SOURCES)}")
    if type(files_per_task) is not int or files_per_task < 1:
        raise ArgumentError(f"files_per_task must be an int >= 1, got {files_per_task!r}")
    options = dict(source_options or {})
    started = time.perf_counter()
    with SOURCES[kind](src, **options) as source:
        WriteOptions(
            compression=compression,
            compress_fields=compress_fields,
            index_fields=index_fields,
            batch_rows=batch_rows,
        ).check(source.schema)
        units = _units(source, kind, files_per_task)
        schema = {
            name: dict(spec, compression="zstd")
            if compression == "zstd" and (compress_fields is None or name in compress_fields)
            else dict(spec)
            for name, spec in source.schema.items()
        }
        desc = source.desc
        index = list(source.index_fields if index_fields is None else index_fields)
        expected_rows = source.num_rows
        problems = list(source.problems)
        classes = list(getattr(source, "classes", []))
    ds = ray.data.from_items(units, override_num_blocks=len(units)).map_batches(
        _UnitConverter(kind, str(src), options, classes, batch_rows),
        batch_size=1,
        **(ray_remote_args or {}),
    )
    ds.context.execution_options.preserve_order = True
    sink = MRecordDatasink(
        dst,
        shard_num=shard_num,
        schema=schema,
        index_fields=index,
        compression_level=compression_level,
        overwrite=overwrite,
        desc=desc,
        page_size=DEFAULT_PAGE_SIZE if page_size is None else page_size,
    )
    ds.write_datasink(sink)
    seconds = time.perf_counter() - started
    return _summary(kind, src, dst, sink.files, seconds, expected_rows, problems)


def _summary(
    kind: str,
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    data_files: list[Path],
    seconds: float,
    expected_rows: int | None,
    problems: list[str],
) -> ConversionSummary:
    from mrecord import DatasetReader

    with DatasetReader.open(data_files, check_index=False) as reader:
        files = [str(f) for f in reader.files]
        rows = reader.num_rows
    if expected_rows is not None and rows < expected_rows:
        problems.append(
            f"skipped {expected_rows - rows} unreadable input row(s) (each task logs the "
            "files it skipped as a warning of the 'mrecord.ray' logger)"
        )
    size = sum(
        p.stat().st_size for f in files for p in (Path(f), Path(f + ".db")) if p.exists()
    )
    return ConversionSummary(
        kind=kind,
        source=str(src),
        destination=str(dst),
        rows=rows,
        shards=len(files),
        files=files,
        bytes=size,
        seconds=seconds,
        problems=problems,
    )
