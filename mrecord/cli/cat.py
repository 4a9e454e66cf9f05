"""``mrecord cat PATH --format jsonl``: export rows as JSON lines."""

from __future__ import annotations

import click

from mrecord.cli._paths import DatasetArg
from mrecord.cli._render import row_to_json
from mrecord.cli.stats import iter_dataset_blocks

__all__ = ["cat"]


@click.command()
@click.argument("path", type=DatasetArg())
@click.option("--format", "fmt", type=click.Choice(["jsonl"]), default="jsonl", show_default=True)
@click.option("--columns", default=None, help="Comma-separated columns to export.")
@click.option("--start", type=click.IntRange(0), default=0, show_default=True, help="First row id.")
@click.option("-n", "--limit", type=click.IntRange(0), default=None, help="At most this many rows.")
def cat(path: str, fmt: str, columns: str | None, start: int, limit: int | None) -> None:
    """Write rows to stdout, one JSON object per line.

    Numbers stay numbers (NaN and infinities become null), arrays become nested
    lists, bytes become {"base64": "..."}.

    \b
    Example:
      mrecord cat train.mrecord --columns label,file_name -n 100 > rows.jsonl
    """
    from mrecord.reader.dataset_reader import DatasetReader

    cols = [c.strip() for c in columns.split(",")] if columns else None
    stop = None if limit is None else start + limit
    with DatasetReader.open(path, columns=cols) as reader:
        for block in iter_dataset_blocks(reader, 1024, start, stop):
            click.echo("".join(row_to_json(row) + "\n" for row in block.iter_rows()), nl=False)
