"""``mrecord bench PATH``: a quick read benchmark on the user's own data."""

from __future__ import annotations

import click

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
    default=256,
    show_default=True,
    help="Rows per read_rows call.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the shuffled order.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def bench(path: str, max_rows: int, batch_size: int, seed: int, as_json: bool) -> None:
    """Measure read speed: rows/s and MiB/s, sequential and shuffled.

    \b
    Example:
      mrecord bench train.mrecord --max-rows 20000 --batch-size 256
    """
    from mrecord.cli._bench import device_limit, run_bench
    from mrecord.reader.dataset_reader import DatasetReader

    with DatasetReader.open(path) as reader:
        results = run_bench(reader, max_rows=max_rows, batch_size=batch_size, seed=seed)
        shuffled = results[-1]
        row_bytes = max(1, int(shuffled.bytes_per_second / max(shuffled.rows_per_second, 1e-9)))
        sizes = [shard.size for shard in reader.shards]
        local = all(shard.map_address() is not None for shard in reader.shards)
        limit = device_limit(reader.files, sizes, row_bytes) if local else None
    if as_json:
        emit_json(
            {
                "path": path,
                "batch_size": batch_size,
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
    if limit is not None:
        click.echo(
            f"device limit: {limit:,.0f} rows/s of {row_bytes:,} bytes at random offsets "
            "(32 threads of pread, measured now: the disk where the files are cold, memory "
            "where they are cached); the shuffled rate above is "
            f"{shuffled.rows_per_second / limit:.0%} of it"
        )
