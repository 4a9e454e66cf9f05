"""``mrecord cat PATH --format jsonl|parquet|arrow``: export rows."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import click

from mrecord.block import Block
from mrecord.cli._errors import EXIT_USAGE, CommandError
from mrecord.cli._paths import DatasetArg
from mrecord.cli._render import row_to_json

__all__ = ["cat", "write_arrow"]

_CHUNK = 1024


def write_arrow(blocks: Iterator[Block], fields: list[Any], fmt: str, out: IO[bytes]) -> int:
    """Write ``blocks`` as one Parquet file or Arrow IPC file to ``out``; return the rows."""
    from mrecord.format.arrow_types import arrow_schema_for, import_pyarrow
    from mrecord.format.schema import FieldKind

    pa = import_pyarrow()
    schema = arrow_schema_for(fields)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        writer: Any = pq.ParquetWriter(out, schema)
    else:
        writer = pa.ipc.new_file(out, schema)
    pool = pa.default_memory_pool()
    # Arrow's pool keeps what encoding a block of bytes or strings freed: 20-55 MB more
    # for 8 MB blocks of 100 B-1 MB values, and an export to Parquet of 2.4 GB of 100 KB
    # images was OOM-killed in a 150 MB memory group (9.4 s now). Numeric columns'
    # encodings reuse what it keeps; given back, tabular rows were 1.45x slower.
    give_back = any(f.kind in (FieldKind.BYTES, FieldKind.STRING) for f in fields)
    rows = 0
    with writer:
        for block in blocks:
            writer.write_table(block.to_arrow(fields))
            rows += len(block)
            if give_back:
                pool.release_unused()
    return rows


@click.command()
@click.argument("path", type=DatasetArg())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet", "arrow"]),
    default="jsonl",
    show_default=True,
    help="JSON lines, one Parquet file, or one Arrow IPC file (these need mrecord[arrow]).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Write to this file instead of stdout.",
)
@click.option("--columns", default=None, help="Comma-separated columns to export.")
@click.option("--start", type=click.IntRange(0), default=0, show_default=True, help="First row id.")
@click.option("-n", "--limit", type=click.IntRange(0), default=None, help="At most this many rows.")
def cat(
    path: str, fmt: str, output: str | None, columns: str | None, start: int, limit: int | None
) -> None:
    """Write rows to stdout (or --output): JSON lines, Parquet or Arrow.

    JSON lines: numbers stay numbers (NaN and infinities become null), arrays
    become nested lists, bytes become {"base64": "..."}. Parquet and Arrow keep
    the types: fixed shapes as fixed-size lists, variable shapes as lists
    (docs/ARROW.md).

    \b
    Examples:
      mrecord cat train.mrecord --columns label,file_name -n 100 > rows.jsonl
      mrecord cat train.mrecord --format parquet -o train.parquet
    """
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.reader.passes import iter_dataset_blocks

    binary = fmt != "jsonl"
    if binary and output is None and sys.stdout.isatty():
        raise CommandError(
            f"refusing to write {fmt} bytes to a terminal: redirect stdout or give -o FILE",
            EXIT_USAGE,
        )
    cols = [c.strip() for c in columns.split(",")] if columns else None
    stop = None if limit is None else start + limit
    with DatasetReader.open(path, columns=cols) as reader:
        blocks = iter_dataset_blocks(reader, _CHUNK, start, stop)
        if not binary:
            with click.open_file(output or "-", "w", encoding="utf-8") as text:
                for block in blocks:
                    text.write("".join(row_to_json(row) + "\n" for row in block.iter_rows()))
            return
        fields = [reader.schema[name] for name in reader.column_names]
        if output is None:
            write_arrow(blocks, fields, fmt, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            _write_file_atomically(output, lambda fh: write_arrow(blocks, fields, fmt, fh))


def _write_file_atomically(output: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write through a ``.partial`` file renamed over ``output`` only when complete."""
    partial = Path(output + ".partial")
    try:
        with open(partial, "wb") as fh:
            write(fh)
        os.replace(partial, output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
