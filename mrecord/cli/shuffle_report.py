"""``mrecord shuffle-report DATASET``: how well each shuffle mode mixes the rows."""

from __future__ import annotations

import click

from mrecord.cli._options import emit_json

__all__ = ["shuffle_report"]

_MODES = ("global", "block", "partial", "files", "infile", "adaptive", "none")


@click.command("shuffle-report")
@click.argument("dataset", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(_MODES, case_sensitive=False),
    help="Shuffle mode to measure (repeatable; default: global, block, partial, files, infile).",
)
@click.option("--num-shards", default=1, show_default=True, type=click.IntRange(min=1),
              help="Measure rank 0 of this many ranks.")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--label-column", default=None, metavar="C",
              help="Scalar column holding the class label (enables the label metrics).")
@click.option("--epochs", default=3, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=5489, show_default=True, type=click.IntRange(min=0))
@click.option("--partial-window", default=1_000_000, show_default=True,
              type=click.IntRange(min=1), help="Window of the PARTIAL shuffle, in rows.")
@click.option("--block-rows", default=None, type=click.IntRange(min=1),
              help="BLOCK's rows per block (default: chosen as MindDataset would here).")
@click.option("--window-blocks", default=None, type=click.IntRange(min=1),
              help="BLOCK's blocks per window (default: chosen as MindDataset would here).")
@click.option("--plot", "plot_path", default=None, metavar="FILE.png",
              type=click.Path(dir_okay=False, path_type=str),
              help="Also draw one panel per metric (needs mrecord[plot]).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def shuffle_report(
    dataset: str,
    modes: tuple[str, ...],
    num_shards: int,
    batch_size: int,
    label_column: str | None,
    epochs: int,
    seed: int,
    partial_window: int,
    block_rows: int | None,
    window_blocks: int | None,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Mixing metrics of each shuffle mode next to a uniform permutation's.

    Mean displacement, adjacent gap, Kendall tau against the stored order, distinct
    files per batch, batch label entropy, lag-1 label autocorrelation and
    epoch-to-epoch correlation, averaged over --epochs epochs. BLOCK cuts on the
    dataset's pages; its sizes are printed above the table.

    \b
    Example:
      mrecord shuffle-report train.mrecord --label-column label --plot mixing.png
    """
    from mrecord.maintenance.shuffle_report import plot_shuffle_report
    from mrecord.maintenance.shuffle_report import shuffle_report as measure
    from mrecord.sampling.quality import format_shuffle_report

    report = measure(
        dataset,
        modes=[m.lower() for m in modes] or None,
        num_shards=num_shards,
        batch_size=batch_size,
        label_column=label_column,
        epochs=epochs,
        seed=seed,
        partial_window=partial_window,
        block_rows=block_rows,
        window_blocks=window_blocks,
    )
    if plot_path is not None:
        plot_shuffle_report(report, plot_path)
    if as_json:
        emit_json({"path": dataset, **report.to_dict()})
        return
    click.echo(f"{dataset!r}: " + format_shuffle_report(report))
    if plot_path is not None:
        click.echo(f"plot written to {plot_path!r}")
