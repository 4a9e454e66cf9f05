"""``mrecord shuffle-report``: how well each shuffle mode mixes a dataset, and a plot of it.

:func:`shuffle_report` reads a dataset's shard sizes and, optionally, one scalar label
column, and measures the orders ``MindDataset`` would read (the metrics and their
uniform-permutation values are in :mod:`mrecord.sampling.quality`).
:func:`plot_shuffle_report` draws one panel per metric and one series per mode
(matplotlib, ``pip install 'mrecord[plot]'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mrecord.errors import ArgumentError, MissingDependencyError, SchemaError
from mrecord.format.schema import FieldKind
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.layout import dataset_layout, measured_numbers, memory_budget
from mrecord.sampling.quality import DEFAULT_MODES, METRICS, ShuffleReport, shuffle_quality
from mrecord.sampling.shuffle import DEFAULT_PARTIAL_WINDOW, BlockLayout
from mrecord.sampling.shuffle.block import choose_layout
from mrecord.storage.naming import PathArg

__all__ = ["plot_shuffle_report", "read_labels", "shuffle_report"]

_LABEL_CHUNK = 1 << 20


def read_labels(reader: DatasetReader, column: str) -> np.ndarray:
    """Every row's value of the scalar ``column``, in global row order."""
    if column not in reader.schema:
        raise SchemaError(
            f"label column {column!r} is not in the schema {reader.schema.names!r}; "
            "pass --label-column with one of them"
        )
    field = reader.schema[column]
    if field.kind is FieldKind.FIXED and field.row_shape:
        raise ArgumentError(
            f"label column {column!r} has shape {field.row_shape}; a label must be a scalar"
        )
    if field.kind is FieldKind.VARARRAY:
        raise ArgumentError(f"label column {column!r} is a variable-shape array, not a label")
    parts = []
    for lo in range(0, reader.num_rows, _LABEL_CHUNK):
        ids = np.arange(lo, min(lo + _LABEL_CHUNK, reader.num_rows), dtype=np.int64)
        values = reader.read_rows(ids, columns=[column]).columns[column]
        parts.append(np.asarray(values if isinstance(values, np.ndarray) else list(values)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def shuffle_report(
    dataset_files: PathArg,
    *,
    modes: Sequence[str] | None = None,
    num_shards: int = 1,
    batch_size: int = 32,
    label_column: str | None = None,
    epochs: int = 3,
    seed: int = 5489,
    partial_window: int = DEFAULT_PARTIAL_WINDOW,
    block_rows: int | None = None,
    window_blocks: int | None = None,
) -> ShuffleReport:
    """Measure how each shuffle mode mixes the rows of ``dataset_files``.

    ``modes``: shuffle mode names (default GLOBAL, BLOCK, PARTIAL, FILES, INFILE;
    ``"none"`` is the stored order). The orders are those of rank 0 of ``num_shards``.
    BLOCK cuts on the dataset's page boundaries with ``block_rows``/``window_blocks``,
    or, when not given, the sizes ``MindDataset`` would choose here (measured storage
    and memory on one rank).
    """
    names = [str(m).lower() for m in (DEFAULT_MODES if modes is None else modes)]
    with DatasetReader.open(dataset_files) as reader:
        counts = list(reader.file_row_counts)
        labels = None if label_column is None else read_labels(reader, label_column)
        layout = (
            _block_layout(reader, num_shards, block_rows, window_blocks)
            if "block" in names
            else None
        )
    return shuffle_quality(
        counts,
        modes=modes,
        labels=labels,
        num_shards=num_shards,
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        partial_window=partial_window,
        layout=layout,
    )


def _block_layout(
    reader: DatasetReader, num_shards: int, block_rows: int | None, window_blocks: int | None
) -> BlockLayout | None:
    facts = dataset_layout(reader)
    return choose_layout(
        adaptive=False,
        num_shards=num_shards,
        page_starts=facts.page_starts,
        num_rows=facts.num_rows,
        data_bytes=facts.data_bytes,
        page_bytes=facts.page_bytes,
        block_rows=block_rows,
        window_blocks=window_blocks,
        memory_budget=memory_budget() if num_shards == 1 else None,
        measure=lambda: measured_numbers(reader),
    )


def plot_shuffle_report(report: ShuffleReport, path: str | Path, title: str | None = None) -> None:
    """Write a PNG: one panel per metric (x: epoch), one series per mode, uniform dashed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise MissingDependencyError(
            "plotting a shuffle report needs matplotlib: pip install 'mrecord[plot]'"
        ) from exc
    keys = [k for k in METRICS if any(m.values.get(k) for m in report.modes)]
    cols = 4 if len(keys) > 4 else len(keys)
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        for mode in report.modes:
            values = mode.values.get(key, [])
            start = 1 if key == "epoch_corr" else 0
            ax.plot(range(start, start + len(values)), values, marker="o", label=mode.mode.upper())
        uniform = report.uniform.get(key, math.nan)
        if not math.isnan(uniform):
            ax.axhline(uniform, color="black", linestyle="--", linewidth=1, label="uniform")
        if key == "label_entropy" and report.num_classes:
            ax.axhline(math.log(report.num_classes), color="grey", linestyle=":", label="log C")
        ax.set_title(METRICS[key], fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    spare = list(axes.flat)[len(keys):]
    for ax in spare:
        ax.axis("off")
    # The legend of the panel with the most lines (label entropy also shows log C).
    handles, labels = max(
        (ax.get_legend_handles_labels() for ax in list(axes.flat)[: len(keys)]),
        key=lambda hl: len(hl[0]),
    )
    if spare:
        spare[0].legend(handles, labels, loc="center", fontsize=9)
    else:
        fig.legend(handles, labels, loc="lower right", fontsize=8)
    fig.suptitle(
        title
        or f"{report.num_rows:,} rows, {len(report.file_row_counts)} files, "
        f"batch {report.batch_size}, rank 0 of {report.num_shards}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(str(path), dpi=90)
    plt.close(fig)
