"""Write a conversion source into an mrecord dataset, atomically, with a summary.

:func:`write_source` is the one place that talks to :class:`mrecord.FileWriter`:
every ``convert_*`` function and ``mrecord convert`` go through it. All rows are
written inside one ``FileWriter`` context, so a conversion that fails (bad input
found halfway, Ctrl-C, disk full) leaves no dataset files behind.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrecord.convert._prefetch import prefetch
from mrecord.convert.base import DEFAULT_BATCH_ROWS, Source, check_batch_rows
from mrecord.errors import ArgumentError

__all__ = ["ConversionSummary", "WriteOptions", "output_files", "write_source"]

ProgressCallback = Callable[[int], None]
"""Called with the number of rows just written."""


@dataclass(frozen=True)
class WriteOptions:
    """How to write the converted dataset (mirrors ``mrecord convert``'s options).

    ``index_fields=None`` uses the source's suggestion (e.g. ``label``); ``[]``
    indexes nothing. ``compression="zstd"`` with ``compress_fields=None``
    compresses every field, else only the named ones.
    """

    shard_num: int = 1
    page_size: int | None = None
    compression: str | None = None
    compress_fields: Sequence[str] | None = None
    compression_level: int = 3
    index_fields: Sequence[str] | None = None
    overwrite: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS

    def check(self, schema: dict[str, dict[str, Any]]) -> None:
        """Raise :class:`ArgumentError` for options that cannot work with ``schema``."""
        if isinstance(self.shard_num, bool) or not isinstance(self.shard_num, int):
            raise ArgumentError(f"shard_num must be an int, got {self.shard_num!r}")
        if not 1 <= self.shard_num <= 1000:
            raise ArgumentError(f"shard_num must be in [1, 1000], got {self.shard_num!r}")
        check_batch_rows(self.batch_rows)
        if self.compression not in (None, "zstd"):
            raise ArgumentError(f"compression must be 'zstd' or None, got {self.compression!r}")
        if self.compress_fields is not None and self.compression is None:
            raise ArgumentError("compress_fields needs compression='zstd' (--compression zstd)")
        fields = list(schema)
        for name in self.compress_fields or ():
            if name not in schema:
                raise ArgumentError(f"compress field {name!r} is not a field; fields: {fields}")
        for name in self.index_fields or ():
            if name not in schema:
                raise ArgumentError(f"index field {name!r} is not a field; fields: {fields}")
            spec = schema[name]
            if spec.get("type") == "bytes" or "shape" in spec:
                raise ArgumentError(
                    f"index field {name!r} is {spec!r}; only scalar fields can be indexed"
                )


@dataclass(frozen=True)
class ConversionSummary:
    """What a conversion wrote."""

    kind: str
    source: str
    destination: str
    rows: int
    shards: int
    files: list[str]
    bytes: int
    seconds: float
    problems: list[str] = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        """Rows written per second of wall time."""
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able values."""
        out = asdict(self)
        out["rows_per_second"] = round(self.rows_per_second, 1)
        out["seconds"] = round(self.seconds, 3)
        return out


def output_files(file_name: str | os.PathLike[str], shard_num: int) -> list[Path]:
    """Data files a dataset of ``shard_num`` shards is written to (MindSpore's naming)."""
    from mrecord.storage.naming import shard_file_names

    return shard_file_names(file_name, shard_num)


def write_source(
    source: Source,
    dst: str | os.PathLike[str],
    options: WriteOptions | None = None,
    *,
    progress: ProgressCallback | None = None,
) -> ConversionSummary:
    """Write every row of ``source`` to the dataset ``dst``; return the summary.

    Nothing is visible at ``dst`` unless the whole conversion succeeds.
    """
    from mrecord.writer.file_writer import FileWriter  # imported when used

    opts = options or WriteOptions()
    opts.check(source.schema)
    index = list(source.index_fields if opts.index_fields is None else opts.index_fields)
    started = time.perf_counter()
    rows = 0
    with FileWriter(dst, shard_num=opts.shard_num, overwrite=opts.overwrite) as writer:
        writer.add_schema(source.schema, desc=source.desc)
        if index:
            writer.add_index(index)
        if opts.page_size is not None:
            writer.set_page_size(opts.page_size)
        if opts.compression is not None:
            fields = None if opts.compress_fields is None else list(opts.compress_fields)
            writer.set_compression(opts.compression, fields=fields, level=opts.compression_level)
        for batch in prefetch(source.iter_batches(opts.batch_rows)):
            n = len(next(iter(batch.values()))) if batch else 0
            if n == 0:
                continue
            writer.write_raw_data(batch)
            rows += n
            if progress is not None:
                progress(n)
    seconds = time.perf_counter() - started
    data_files = output_files(dst, opts.shard_num)
    all_files = [p for f in data_files for p in (f, f.with_name(f.name + ".db"))]
    total = sum(p.stat().st_size for p in all_files if p.exists())
    return ConversionSummary(
        kind=source.kind,
        source=source.name,
        destination=str(dst),
        rows=rows,
        shards=opts.shard_num,
        files=[str(f) for f in data_files],
        bytes=total,
        seconds=seconds,
        problems=list(source.problems),
    )
