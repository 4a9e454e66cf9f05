"""``mrecord stats PATH``: per-field statistics (see :mod:`mrecord.maintenance.stats`)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from mrecord.block import Block
from mrecord.cli._options import emit_json, progress_bar, progress_options
from mrecord.cli._paths import DatasetArg

__all__ = ["stats"]


@click.command()
@click.argument("path", type=DatasetArg())
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="FIELD",
    help="Integer field to histogram (repeatable; default: label).",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@progress_options
def stats(path: str, labels: tuple[str, ...], as_json: bool, progress: bool, quiet: bool) -> None:
    """Per-field count, min/max/mean, length distribution and label histogram.

    \b
    Example:
      mrecord stats train.mrecord --label label --json
    """
    from mrecord.maintenance.stats import compute_stats
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.reader.passes import iter_dataset_blocks

    with DatasetReader.open(path) as reader:
        fields = [(f.name, f.type, f.shape) for f in reader.schema.fields]
        with progress_bar(reader.num_rows, "stats", quiet, force=progress) as bar:

            def blocks() -> Iterator[Block]:
                for block in iter_dataset_blocks(reader, 4096):
                    bar.update(len(block))
                    yield block

            result = compute_stats(fields, blocks(), label_fields=labels or ("label",))
    if as_json:
        emit_json({"path": path, "rows": reader.num_rows, "fields": result})
        return
    click.echo(f"{path!r}: {reader.num_rows:,} rows")
    for name, st in result.items():
        parts = [f"count={st['count']}"]
        for key in ("min", "max", "mean", "nan_count"):
            if key in st and st[key] is not None:
                value = st[key]
                parts.append(f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}")
        if "length" in st:
            ln = st["length"]
            parts.append(
                f"length min/mean/p50/p99/max={ln['min']}/{ln['mean']:.1f}/"
                f"{ln['p50']:g}/{ln['p99']:g}/{ln['max']}"
            )
        click.echo(f"  {name} ({st['type']}): " + " ".join(parts))
        if "histogram" in st:
            click.echo("    histogram: " + _histogram_line(st["histogram"]))


_HISTOGRAM_CLASSES = 20
"""Classes a text histogram lists; past them it is summarized (``--json`` has them all)."""


def _histogram_line(histogram: dict[str, int]) -> str:
    """The classes and their rows, or past :data:`_HISTOGRAM_CLASSES` how many classes
    there are and how their rows spread (1,000 classes were one 14 KB line)."""
    if len(histogram) <= _HISTOGRAM_CLASSES:
        return ", ".join(f"{k}: {v}" for k, v in histogram.items())
    fewest = min(histogram, key=lambda k: histogram[k])
    most = max(histogram, key=lambda k: histogram[k])
    return (
        f"{len(histogram):,} classes, {histogram[fewest]:,} to {histogram[most]:,} rows each "
        f"(fewest: {fewest}, most: {most}); --json lists them all"
    )
