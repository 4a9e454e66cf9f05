"""``mrecord bench PATH``: a quick read benchmark on the user's own data."""

from __future__ import annotations

import click

from mrecord.cli._errors import EXIT_USAGE, CommandError
from mrecord.cli._format import format_rate, format_table
from mrecord.cli._options import emit_json
from mrecord.cli._paths import DatasetArg

__all__ = ["bench"]


@click.command()
@click.argument("path", type=DatasetArg())
@click.option(
    "--max-rows",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    help="Rows to read per pattern.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=None,
    help="Rows per read_rows call [default: 256, fewer where 256 rows would hold more "
    "than a 32nd of the memory budget, as MindDataset's blocks].",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the shuffled order.")
@click.option(
    "--cold",
    is_flag=True,
    help="Drop the files from the page cache before each pattern and the device limit "
    "(reads from the disk, as a dataset larger than memory is read).",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def bench(
    path: str, max_rows: int, batch_size: int | None, seed: int, cold: bool, as_json: bool
) -> None:
    """Measure read speed: rows/s and MiB/s, sequential and shuffled, beside the
    device's limit for random reads of a row's size. Batches are read as MindDataset
    reads its blocks: two at a time, and beyond memory with their chunk heads asked for
    a few batches ahead.

    The limit is measured first, on the files as they are (on the disk, in memory, or
    partly each: the share in memory is printed), and what it read is dropped from the
    page cache again, so the patterns start from the same state. With --cold every
    pattern and the limit start with the files dropped from the page cache.

    \b
    Example:
      mrecord bench train.mrecord --max-rows 20000 --batch-size 256
      mrecord bench train.mrecord --cold
    """
    from mrecord.cli._bench import (
        default_batch_size,
        device_limit,
        drop_from_cache,
        in_memory_fraction,
        run_bench,
        stored_row_bytes,
    )
    from mrecord.reader.dataset_reader import DatasetReader

    with DatasetReader.open(path) as reader:
        local = all(shard.map_address() is not None for shard in reader.shards)
        files = list(reader.files)
        if cold and not local:
            raise CommandError(
                f"--cold drops local files from the page cache; {path!r} is not read from "
                "local files (leave --cold out)",
                EXIT_USAGE,
            )
        drop = (lambda: drop_from_cache(files)) if cold else None
        if drop is not None:
            drop()
        in_memory = in_memory_fraction(reader.shards) if local else None
        if batch_size is None:
            batch_size = default_batch_size(reader)
        row_bytes = stored_row_bytes(reader.shards, reader.num_rows)
        sizes = [shard.size for shard in reader.shards]
        limit = device_limit(files, sizes, row_bytes, shards=list(reader.shards)) if local else None
        results = run_bench(
            reader, max_rows=max_rows, batch_size=batch_size, seed=seed, before_each=drop
        )
        shuffled = results[-1]
    if as_json:
        emit_json(
            {
                "path": path,
                "batch_size": batch_size,
                "cold": cold,
                "in_memory_at_start": in_memory,
                "results": [r.to_dict() for r in results],
                "device_limit_rows_per_second": limit,
                "device_limit_row_bytes": row_bytes,
            }
        )
        return
    click.echo(f"{path!r}, batches of {batch_size}:")
    rows = [
        [
            r.pattern,
            f"{r.rows:,}",
            f"{r.seconds:.3f}",
            f"{r.rows_per_second:,.0f}",
            format_rate(r.bytes_per_second),
        ]
        for r in results
    ]
    headers = ["pattern", "rows", "seconds", "rows/s", "decoded"]
    for line in format_table(headers, rows, right=headers[1:]):
        click.echo(line)
    if shuffled.window:
        click.echo(
            f"shuffled: swept in windows of {shuffled.window:,} rows, each in one pass over "
            "the files, as MindDataset reads a random order of small rows beyond memory"
        )
    if limit is not None:
        where = "" if in_memory is None else f": {in_memory:.0%} of their pages in memory"
        how = "dropped from the page cache first" if cold else "as they were"
        click.echo(
            f"device limit: {limit:,.0f} rows/s of {row_bytes:,} bytes at random offsets "
            f"(32 threads of pread, measured before the patterns on the files {how}{where}); "
            f"the shuffled rate above is {shuffled.rows_per_second / limit:.0%} of it"
        )
