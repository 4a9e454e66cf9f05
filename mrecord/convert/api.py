"""One ``convert_*`` function per source kind, and the registry ``mrecord convert`` uses.

Each function opens its source, writes it with :func:`write_source` and returns
a :class:`ConversionSummary`. Writing options (``shard_num``, ``page_size``,
``compression``, ``compress_fields``, ``index_fields``, ``overwrite``, ...) are
the fields of :class:`WriteOptions`, passed as keywords::

    from mrecord.convert import convert_cifar10
    summary = convert_cifar10("cifar-10-batches-bin", "cifar_train.mrecord", shard_num=4)
    print(summary.rows, summary.bytes)
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from mrecord.convert.base import Source
from mrecord.convert.driver import ConversionSummary, ProgressCallback, WriteOptions, write_source

__all__ = [
    "SOURCES",
    "convert",
    "convert_arrow",
    "convert_cifar10",
    "convert_csv",
    "convert_hf",
    "convert_imagefolder",
    "convert_mindrecord",
    "convert_mnist",
    "convert_mrecord",
    "convert_npz",
    "convert_parquet",
]

PathLike = str | os.PathLike[str]


class _Sources(Mapping[str, Callable[..., Source]]):
    """Source kind → class, each class's module imported when its kind is first looked
    up: a conversion of an image folder does not load the MindRecord, mrecord, Arrow or
    CIFAR-10 readers (about 35 ms of a cold start, `python -X importtime`)."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = where

    def __getitem__(self, kind: str) -> Callable[..., Source]:
        module, name = self._where[kind].split(":")
        found: Callable[..., Source] = getattr(importlib.import_module(module), name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


SOURCES: Mapping[str, Callable[..., Source]] = _Sources(
    {
        "cifar10": "mrecord.convert.cifar10:Cifar10Source",
        "mnist": "mrecord.convert.mnist:MnistSource",
        "imagefolder": "mrecord.convert.imagefolder:ImageFolderSource",
        "csv": "mrecord.convert.csvfile:CsvSource",
        "npz": "mrecord.convert.npz:NpzSource",
        "npy": "mrecord.convert.npz:NpzSource",
        "mindrecord": "mrecord.convert.mindrecord_source:MindRecordSource",
        "mrecord": "mrecord.convert.mrecord_source:MrecordSource",
        "parquet": "mrecord.convert.arrow_sources:ParquetSource",
        "arrow": "mrecord.convert.arrow_sources:ArrowSource",
        "hf": "mrecord.convert.arrow_sources:HfSource",
    }
)
"""Source kind → class taking ``(src, **source_options)``."""


def convert(
    kind: str,
    src: PathLike | Sequence[PathLike],
    dst: PathLike,
    *,
    source_options: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """Convert ``src`` of ``kind`` (a key of :data:`SOURCES`) to the dataset ``dst``.

    A write option not given (or None) takes the source's suggestion where it has one
    (:attr:`Source.write_defaults <mrecord.convert.base.Source>`: an mrecord source keeps
    its shard count and page size), else the :class:`WriteOptions` default."""
    from mrecord.errors import ArgumentError

    if kind not in SOURCES:
        raise ArgumentError(f"unknown source kind {kind!r}; choose one of {sorted(SOURCES)}")
    options = WriteOptions(**write_options)
    with SOURCES[kind](src, **dict(source_options or {})) as source:
        options = with_source_defaults(options, source, given=write_options)
        return write_source(source, dst, options, progress=progress)


def with_source_defaults(
    options: WriteOptions, source: Source, *, given: Mapping[str, Any]
) -> WriteOptions:
    """``options`` with each of the source's ``write_defaults`` filled in where ``given``
    (the options the caller named) has no value for it."""
    fill = {k: v for k, v in source.write_defaults.items() if given.get(k) is None}
    return dataclasses.replace(options, **fill) if fill else options


def convert_cifar10(
    src: PathLike,
    dst: PathLike,
    *,
    split: str = "train",
    png: bool = False,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """CIFAR-10 binary files → ``image`` (uint8[32,32,3], or PNG bytes) + ``label`` (int32)."""
    return convert(
        "cifar10",
        src,
        dst,
        source_options={"split": split, "png": png},
        progress=progress,
        **write_options,
    )


def convert_mnist(
    src: PathLike,
    dst: PathLike,
    *,
    split: str = "train",
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """MNIST idx files (plain or .gz) → ``image`` (uint8[28,28]) + ``label`` (int32)."""
    return convert(
        "mnist", src, dst, source_options={"split": split}, progress=progress, **write_options
    )


def convert_imagefolder(
    src: PathLike,
    dst: PathLike,
    *,
    resize: int | Sequence[int] | None = None,
    reencode: str | None = None,
    on_error: str = "raise",
    check: bool | str = True,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """Class subfolders of images → ``image`` (bytes) + ``label`` + ``file_name``.

    ``check``: ``True``/``"structure"`` (header, and a JPEG's end-of-image marker),
    ``"decode"`` (also decodes JPEGs), ``False``/``"none"`` (stores the files unread; a
    damaged image is then found only when training reads it): ``--check-images``."""
    return convert(
        "imagefolder",
        src,
        dst,
        source_options={
            "resize": resize,
            "reencode": reencode,
            "on_error": on_error,
            "check": check,
        },
        progress=progress,
        **write_options,
    )


def convert_csv(
    src: PathLike,
    dst: PathLike,
    *,
    schema: Mapping[str, Any] | PathLike | None = None,
    delimiter: str = ",",
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """A CSV file → one row per record (schema given, or inferred from the file)."""
    return convert(
        "csv",
        src,
        dst,
        source_options={"schema": schema, "delimiter": delimiter},
        progress=progress,
        **write_options,
    )


def convert_npz(
    src: PathLike,
    dst: PathLike,
    *,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """A .npz / .npy file (or a folder of .npy) → one row per index of the first dimension."""
    return convert("npz", src, dst, progress=progress, **write_options)


def convert_mindrecord(
    src: PathLike,
    dst: PathLike,
    *,
    check_index: bool = True,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """A MindRecord dataset written by MindSpore (any shard file) → the same rows in mrecord."""
    return convert(
        "mindrecord",
        src,
        dst,
        source_options={"check_index": check_index},
        progress=progress,
        **write_options,
    )


def convert_mrecord(
    src: PathLike | Sequence[PathLike],
    dst: PathLike,
    *,
    check_index: bool = True,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """An mrecord dataset (any shard file, or a list of shard files) → the same rows,
    schema, description and index fields, written by this mrecord (the current format
    version). The shard count and page size are kept unless ``shard_num`` /
    ``page_size`` are given. ``dst`` must not be ``src``'s dataset (ArgumentError): write
    elsewhere, then rename. A damaged source chunk stops the conversion with the
    reader's ChecksumError, and nothing is left at ``dst``."""
    return convert(
        "mrecord",
        src,
        dst,
        source_options={"check_index": check_index},
        progress=progress,
        **write_options,
    )


def convert_parquet(
    src: PathLike,
    dst: PathLike,
    *,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """A Parquet file (or a folder of them) → one field per column (docs/ARROW.md)."""
    return convert("parquet", src, dst, progress=progress, **write_options)


def convert_arrow(
    src: PathLike,
    dst: PathLike,
    *,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """An Arrow IPC file or stream (or a folder of them) → one field per column."""
    return convert("arrow", src, dst, progress=progress, **write_options)


def convert_hf(
    src: PathLike,
    dst: PathLike,
    *,
    split: str | None = None,
    progress: ProgressCallback | None = None,
    **write_options: Any,
) -> ConversionSummary:
    """A folder written by ``datasets.Dataset.save_to_disk`` → one field per column."""
    return convert(
        "hf", src, dst, source_options={"split": split}, progress=progress, **write_options
    )
