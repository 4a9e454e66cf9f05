"""``mrecord info | head | verify | reindex``: thin commands over the reader and writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mrecord.cli._errors import EXIT_BAD_INPUT, EXIT_DAMAGED, CommandError
from mrecord.cli._format import format_size, format_table
from mrecord.cli._options import emit_json, progress_bar, progress_options
from mrecord.cli._paths import DatasetArg
from mrecord.cli._render import row_to_json

__all__ = ["head", "info", "reindex", "verify"]

_DATASET = DatasetArg()


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
        f"{format_size(data['bytes'])} (page size {format_size(data['page_size'])})"
    )
    click.echo(f"indexed   {', '.join(data['index_fields']) or '-'}")
    click.echo("")
    fields = [
        [
            f["name"],
            f["type"],
            "-" if "shape" not in f else str(f["shape"]).replace(" ", ""),
            f["compression"],
            format_size(f["stored_bytes"]),
            format_size(f["raw_bytes"]),
        ]
        for f in data["schema"]
    ]
    headers = ["field", "type", "shape", "compression", "stored", "raw"]
    for line in format_table(headers, fields, right=["stored", "raw"]):
        click.echo(line)
    click.echo("")
    files = [
        [
            f["file"],
            f"{f['rows']:,}",
            f"{f['pages']:,}",
            format_size(f["bytes"]),
            format_size(f["db_bytes"]),
        ]
        for f in data["files"]
    ]
    headers = ["file", "rows", "pages", "bytes", ".db"]
    for line in format_table(headers, files, right=headers[1:]):
        click.echo(line)


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
    problems, leftovers = _problems(path)
    if as_json:
        emit_json({**data, "problems": problems, "leftovers": [str(p) for p in leftovers]})
    else:
        _echo_info(data)
        if leftovers:
            from mrecord.storage.locate import leftover_note

            click.echo(f"\nnote: {leftover_note(leftovers)}")
    if problems:
        # MindDataset and the other readers refuse such a dataset: say so, and fail.
        raise CommandError("; ".join(problems), EXIT_BAD_INPUT)


def _problems(path: str) -> tuple[list[str], list[Path]]:
    """(why readers would refuse the dataset: each ``.db`` checked, partial files left).

    ``dataset_info`` reads only the data files' metadata, so that a damaged dataset can
    still be looked at; this is the rest of what opening it for reading checks.
    """
    from mrecord.errors import MrecordError
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.remote.urls import is_url
    from mrecord.storage.index_db import check_index_db
    from mrecord.storage.locate import partial_leftovers

    if is_url(path):
        return [], []  # fetched and checked by the remote cache
    problems = []
    with DatasetReader.open(path, check_index=False, verify="never") as reader:
        first = reader.shards[0]
        for shard in reader.shards:
            try:
                check_index_db(shard.path, shard.meta)
            except MrecordError as exc:
                problems.append(str(exc))
        leftovers = partial_leftovers(first.path.parent, first.meta.dataset_name)
    return problems, leftovers


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

    from mrecord.format.features import class_names
    from mrecord.reader.dataset_reader import DatasetReader

    cols = [c.strip() for c in columns.split(",")] if columns else None
    with DatasetReader.open(path, columns=cols) as reader:
        count = min(n, reader.num_rows)
        block = reader.read_rows(np.arange(count, dtype=np.int64))
        names = {} if as_json else class_names(reader.shards[0].meta.desc)
        for row in block.iter_rows():
            click.echo(row_to_json(_with_class_names(row, names), full=as_json))


def _with_class_names(row: dict[str, Any], names: dict[str, list[str]]) -> dict[str, Any]:
    """Class-label values shown with their names: ``3 (cat)`` (docs/FORMAT.md features)."""
    out = dict(row)
    for column, labels in names.items():
        if column in out:
            value = int(out[column])
            if 0 <= value < len(labels):
                out[column] = f"{value} ({labels[value]})"
    return out


@click.command()
@click.argument("path", type=DatasetArg(fetch=True))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@progress_options
def verify(path: str, as_json: bool, progress: bool, quiet: bool) -> None:
    """Check every page checksum and the .db indexes; exit 1 if anything is damaged.

    Exit 3 (not 1) when PATH does not exist or is not an mrecord file at all.

    \b
    Example:
      mrecord verify train.mrecord0 && echo intact
    """
    from mrecord.maintenance.verify import verify_dataset

    with progress_bar(None, "verify", quiet, force=progress, unit=" pages") as bar:
        report = verify_dataset(path, progress=bar.update, start=lambda n: bar.reset(total=n))
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
@click.argument("path", type=DatasetArg(remote=False))
@progress_options
def reindex(path: str, progress: bool, quiet: bool) -> None:
    """Rebuild the .db index of every shard from the data files.

    \b
    Example:
      mrecord reindex train.mrecord
    """
    from mrecord.maintenance.reindex import reindex as rebuild

    with progress_bar(None, "reindex", quiet, force=progress) as bar:
        written = rebuild(path, progress=bar.update, start=lambda n: bar.reset(total=n))
    click.echo(f"rebuilt the .db index of {len(written)} shard(s) of {path!r}")
