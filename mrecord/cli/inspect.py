"""``mrecord info | head | verify | reindex``: thin commands over the reader and writer."""

from __future__ import annotations

from typing import Any

import click

from mrecord.cli._errors import EXIT_DAMAGED
from mrecord.cli._options import emit_json
from mrecord.cli._render import row_to_json

__all__ = ["head", "info", "reindex", "verify"]

_DATASET = click.Path(dir_okay=False, path_type=str)


def _size(n: int | None) -> str:
    """Bytes for people: ``812 B``, ``30.4 MB``."""
    if n is None:
        return "-"
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1000
        if value < 1000 or unit == "TB":
            break
    return f"{value:,.1f} {unit}"


def _echo_info(data: dict[str, Any]) -> None:
    """A dataset's summary, schema table and shard table, for people (``--json`` for scripts)."""
    click.echo(
        f"dataset   {data['dataset_name']}  (id {data['dataset_id']}, generation "
        f"{data['generation']}, format {data['format_version']})"
    )
    if data.get("desc"):
        click.echo(f"desc      {data['desc']}")
    click.echo(
        f"rows      {data['rows']:,} in {data['shards']} shard(s), {data['pages']:,} pages, "
        f"{_size(data['bytes'])} (page size {_size(data['page_size'])})"
    )
    click.echo(f"indexed   {', '.join(data['index_fields']) or '-'}")
    click.echo("")
    header = f"{'field':20} {'type':10} {'shape':14} {'compression':11} {'stored':>11} {'raw':>11}"
    click.echo(header)
    click.echo("-" * len(header))
    for f in data["schema"]:
        shape = "-" if "shape" not in f else str(f["shape"]).replace(" ", "")
        click.echo(
            f"{f['name']:20} {f['type']:10} {shape:14} {f['compression']:11} "
            f"{_size(f['stored_bytes']):>11} {_size(f['raw_bytes']):>11}"
        )
    click.echo("")
    header = f"{'file':40} {'rows':>10} {'pages':>7} {'bytes':>11} {'.db':>11}"
    click.echo(header)
    click.echo("-" * len(header))
    for f in data["files"]:
        click.echo(
            f"{f['file']:40} {f['rows']:>10,} {f['pages']:>7,} {_size(f['bytes']):>11} "
            f"{_size(f['db_bytes']):>11}"
        )


@click.command()
@click.argument("path", type=_DATASET)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def info(path: str, as_json: bool) -> None:
    """Show a dataset's schema, shards, rows, pages, bytes and compression.

    \b
    Example:
      mrecord info train.mrecord
    """
    from mrecord.maintenance.inspect import dataset_info

    data = dataset_info(path)
    if as_json:
        emit_json(data)
    else:
        _echo_info(data)


@click.command()
@click.argument("path", type=_DATASET)
@click.option("-n", "--rows", "n", type=click.IntRange(0), default=5, show_default=True)
@click.option("--columns", default=None, help="Comma-separated columns to show.")
@click.option("--json", "as_json", is_flag=True, help="Full values as JSON lines (as `cat`).")
def head(path: str, n: int, columns: str | None, as_json: bool) -> None:
    """Print the first N rows (arrays and bytes summarized unless --json).

    \b
    Example:
      mrecord head train.mrecord -n 3 --columns label,file_name
    """
    import numpy as np

    from mrecord.reader.dataset_reader import DatasetReader

    cols = [c.strip() for c in columns.split(",")] if columns else None
    with DatasetReader.open(path, columns=cols) as reader:
        count = min(n, reader.num_rows)
        block = reader.read_rows(np.arange(count, dtype=np.int64))
        for row in block.iter_rows():
            click.echo(row_to_json(row, full=as_json))


@click.command()
@click.argument("path", type=_DATASET)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify(path: str, as_json: bool) -> None:
    """Check every page checksum and the .db indexes; exit 1 if anything is damaged.

    \b
    Example:
      mrecord verify train.mrecord0 && echo intact
    """
    from mrecord.maintenance.verify import verify_dataset

    report = verify_dataset(path)
    problems = list(report.problems)
    if as_json:
        emit_json(
            {
                "ok": bool(report.ok),
                "rows": int(report.rows),
                "pages_checked": int(report.pages_checked),
                "problems": problems,
            }
        )
    elif report.ok:
        click.echo(f"OK: {report.rows:,} rows, {report.pages_checked:,} pages checked in {path!r}")
    else:
        click.echo(f"DAMAGED: {len(problems)} problem(s) in {path!r}", err=True)
        for problem in problems:
            click.echo(f"  {problem}", err=True)
    if not report.ok:
        raise click.exceptions.Exit(EXIT_DAMAGED)


@click.command()
@click.argument("path", type=_DATASET)
def reindex(path: str) -> None:
    """Rebuild the .db index of every shard from the data files.

    \b
    Example:
      mrecord reindex train.mrecord
    """
    from mrecord.maintenance.reindex import reindex as rebuild

    rebuild(path)
    click.echo(f"rebuilt the .db index of {path!r}")
