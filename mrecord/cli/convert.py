"""``mrecord convert KIND SRC DST``: the command over :mod:`mrecord.convert`."""

from __future__ import annotations

from typing import Any

import click

from mrecord.cli._errors import EXIT_USAGE, CommandError
from mrecord.cli._format import format_size
from mrecord.cli._options import SizeParam, emit_json, progress_bar, progress_options

__all__ = ["convert"]

_KINDS = ["cifar10", "mnist", "imagefolder", "csv", "npz", "npy", "mindrecord", "mrecord"]
_KINDS += ["parquet", "arrow", "hf"]

_HELP = """Convert SRC (of source KIND) into the mrecord dataset DST.

\b
KIND and SRC:
  cifar10      folder with the CIFAR-10 binary files (or one .bin file)
  mnist        folder with the idx files (plain or .gz)
  imagefolder  folder of class subfolders of images
  csv          a CSV file with a header line
  npz, npy     an .npz / .npy file, or a folder of .npy files
  mindrecord   any shard file of a MindRecord dataset written by MindSpore
  mrecord      any shard file of an mrecord dataset, rewritten in the current format
  parquet      a Parquet file, or a folder of them          (needs mrecord[arrow])
  arrow        an Arrow IPC file or stream, or a folder of them
  hf           a folder written by datasets' save_to_disk (never downloads)

\b
Examples:
  mrecord convert cifar10 cifar-10-batches-bin/ cifar.mrecord --split test --shards 2
  mrecord convert mnist mnist/ mnist.mrecord --compression zstd
  mrecord convert imagefolder photos/ photos.mrecord --resize 224x224 --reencode jpeg
  mrecord convert csv table.csv table.mrecord --schema '{"id": "int64", "name": "string"}'
  mrecord convert mindrecord train.mindrecord0 train.mrecord --json
  mrecord convert mrecord old.mrecord new.mrecord  # rewrite with the current format (1.4: a head index)
  mrecord convert parquet table.parquet table.mrecord --shards 4
  mrecord convert hf saved_dataset/ train.mrecord --split train

The output is written atomically: if the conversion fails, nothing is left at DST.
mrecord keeps SRC's schema, description, index fields, shard count and page size
unless options say otherwise; DST may not be SRC's dataset (to replace it, write the
same name in another folder, then move the new files over the old), and a damaged SRC
chunk stops the conversion (ChecksumError).
Image checking, --resize and --reencode (imagefolder) and PNG encoding (cifar10
--png) run in --workers threads or processes (default: one per core, as many as the
memory holds; 1 is serial); the dataset is the same, byte for byte, whatever the
number of workers. Every --checkpoint of
pages is made durable in DST.mrecord-resume: a conversion killed on the way and run
again with --resume goes on from there and ends with the dataset an uninterrupted
run writes.
Exit codes: 0 ok, 2 usage error, 3 bad input file, 4 other failure.
"""  # noqa: E501 (an example's comment, kept on its line)

_ONLY_FOR = {
    "split": ("cifar10", "mnist", "hf"),
    "png": ("cifar10",),
    "schema": ("csv",),
    "delimiter": ("csv",),
    "resize": ("imagefolder",),
    "reencode": ("imagefolder",),
    "skip_bad_images": ("imagefolder",),
    "check_images": ("imagefolder",),
    "no_check_index": ("mindrecord", "mrecord"),
}


def _parse_resize(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    try:
        size = [int(p) for p in parts]
    except ValueError:
        size = []
    if len(size) == 1:
        size = size * 2
    if len(size) != 2 or min(size) <= 0:
        raise click.BadParameter(
            f"{text!r} is not WIDTHxHEIGHT (e.g. 224x224) or N", param_hint="--resize"
        )
    return (size[0], size[1])


def _convert_with_ray(
    kind: str,
    src: str,
    dst: str,
    source_options: dict[str, Any],
    options: Any,
    shard_num: int | None,
) -> Any:
    """``--engine ray``: the same conversion run by :func:`mrecord.ray.convert`."""
    try:
        from mrecord.ray import convert as ray_convert
    except ImportError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    return ray_convert(
        kind,
        src,
        dst,
        source_options=source_options,
        shard_num=shard_num,
        index_fields=None if options.index_fields is None else list(options.index_fields),
        compression=options.compression,
        compress_fields=options.compress_fields,
        compression_level=options.compression_level,
        page_size=options.page_size,
        overwrite=options.overwrite,
        batch_rows=options.batch_rows or _default_batch_rows(kind),
    )


def _default_batch_rows(kind: str) -> int:
    """The rows per batch of source ``kind`` when ``--batch-rows`` is not given."""
    from mrecord.convert import SOURCES
    from mrecord.convert.base import DEFAULT_BATCH_ROWS

    return int(getattr(SOURCES[kind], "default_batch_rows", DEFAULT_BATCH_ROWS))


def _source_options(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    for option, kinds in _ONLY_FOR.items():
        value = given[option]
        if value not in (None, False) and kind not in kinds:
            flag = "--" + option.replace("_", "-")
            raise CommandError(
                f"{flag} applies to {' and '.join(kinds)} only, not {kind!r}", EXIT_USAGE
            )
    if kind in ("cifar10", "mnist"):
        opts: dict[str, Any] = {"split": given["split"] or "train"}
        if kind == "cifar10":
            opts["png"] = given["png"]
        return opts
    if kind == "csv":
        return {"schema": given["schema"], "delimiter": given["delimiter"] or ","}
    if kind == "imagefolder":
        return {
            "resize": _parse_resize(given["resize"]),
            "reencode": given["reencode"],
            "on_error": "skip" if given["skip_bad_images"] else "raise",
            "check": given["check_images"] or "structure",
        }
    if kind in ("mindrecord", "mrecord"):
        return {"check_index": not given["no_check_index"]}
    if kind == "hf":
        return {"split": given["split"]}
    return {}


def _field_names(given: tuple[str, ...]) -> list[str]:
    """Field names of a repeatable option, each also a comma-separated list
    (``--index file_name,label`` as ``--columns a,b`` elsewhere)."""
    return [name.strip() for value in given for name in value.split(",") if name.strip()]


@click.command(help=_HELP)
@click.argument("kind", type=click.Choice(_KINDS))
@click.argument("src", type=click.Path(path_type=str))
@click.argument("dst", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--shards",
    "shard_num",
    type=click.IntRange(1, 1000),
    default=None,
    help="Number of shard files (default 1, mrecord: SRC's; with --engine ray, one per "
    "256 MiB of data).",
)
@click.option(
    "--page-size",
    type=SizeParam(),
    default=None,
    help="Target page size (e.g. 1M, 64K; mrecord: default SRC's).",
)
@click.option(
    "--compression", type=click.Choice(["zstd"]), default=None, help="Compress with zstd."
)
@click.option(
    "--compress-field",
    "compress_fields",
    multiple=True,
    metavar="NAME",
    help="Compress only these fields (a,b or repeated; needs --compression).",
)
@click.option("--compression-level", type=click.IntRange(1, 22), default=3, show_default=True)
@click.option(
    "--index",
    "index_fields",
    multiple=True,
    metavar="FIELD",
    help="Index these scalar fields in the .db (a,b or repeated; default: label where there "
    "is one).",
)
@click.option("--no-index", is_flag=True, help="Index no field.")
@click.option(
    "--split",
    default=None,
    help="cifar10/mnist: train or test (default train); hf: the DatasetDict split.",
)
@click.option("--png", is_flag=True, help="cifar10: store PNG bytes instead of uint8 arrays.")
@click.option(
    "--schema",
    default=None,
    metavar="JSON|FILE",
    help="csv: column types as JSON text or a JSON file (default: inferred).",
)
@click.option("--delimiter", default=None, help="csv: field delimiter (default ',').")
@click.option(
    "--resize", default=None, metavar="WxH", help="imagefolder: resize every image (re-encodes)."
)
@click.option(
    "--reencode",
    type=click.Choice(["jpeg", "png", "webp"]),
    default=None,
    help="imagefolder: re-encode every image.",
)
@click.option(
    "--skip-bad-images",
    is_flag=True,
    help="imagefolder: skip unreadable images (listed in the summary) instead of failing.",
)
@click.option(
    "--check-images",
    type=click.Choice(["structure", "decode", "none"]),
    default=None,
    help="imagefolder: how each image is checked before it is stored: its header and a "
    "JPEG's end-of-image marker, a PNG's chunk CRCs (structure, the default), also a full "
    "JPEG decode (decode, ~8x the CPU), or not at all (none).",
)
@click.option(
    "--no-check-index",
    is_flag=True,
    help="mindrecord, mrecord: do not compare the .db files with the data.",
)
@click.option(
    "--batch-rows",
    type=click.IntRange(1),
    default=None,
    help="Rows per write [default: 4096; 256 for imagefolder, whose rows are whole files].",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset at DST.")
@click.option(
    "--workers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Pieces of per-row work done at once, in threads (--check-images decode) or "
    "processes (resizing, encoding); default: the number of cores, fewer where the "
    "memory budget holds fewer (64 MB each); 1: serial. "
    "The default structure check runs in one (more only contend; the files are read "
    "ahead either way).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Go on from the last checkpoint of a conversion to DST that was killed "
    "(same SRC and options; for imagefolder, the files already converted must be "
    "unchanged: the others may change); without it, an old checkpoint is removed.",
)
@click.option(
    "--checkpoint",
    "checkpoint_bytes",
    type=SizeParam(),
    default="1G",
    show_default=True,
    help="Pages written between two resume checkpoints (a checkpoint is also made "
    "each minute in which pages were written).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="ray: parse the source in Ray tasks (one per image subfolder / CIFAR file) and "
    "write through mrecord.ray's datasink; needs pip install 'mrecord[ray]'.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@progress_options
def convert(
    kind: str,
    src: str,
    dst: str,
    shard_num: int | None,
    page_size: int | None,
    compression: str | None,
    compress_fields: tuple[str, ...],
    compression_level: int,
    index_fields: tuple[str, ...],
    no_index: bool,
    batch_rows: int | None,
    overwrite: bool,
    workers: int | None,
    resume: bool,
    checkpoint_bytes: int,
    engine: str,
    as_json: bool,
    progress: bool,
    quiet: bool,
    **given: Any,
) -> None:
    """Convert SRC of KIND into the dataset DST (see ``--help``)."""

    from mrecord.convert import SOURCES, WriteOptions, write_source
    from mrecord.convert.api import with_source_defaults
    from mrecord.errors import DatasetExistsError

    if no_index and index_fields:
        raise CommandError("--index and --no-index exclude each other", EXIT_USAGE)
    source_options = _source_options(kind, given)
    options = WriteOptions(
        shard_num=shard_num or 1,
        page_size=page_size,
        compression=compression,
        compress_fields=_field_names(compress_fields) or None,
        compression_level=compression_level,
        index_fields=[] if no_index else (_field_names(index_fields) or None),
        overwrite=overwrite,
        batch_rows=batch_rows,
        workers=workers,  # None: one per core, as many as the memory holds
        resume=resume,
        checkpoint_bytes=checkpoint_bytes,
    )
    if engine == "ray" and resume:
        raise CommandError("--resume works with --engine local only", EXIT_USAGE)
    try:
        if engine == "ray":
            summary = _convert_with_ray(kind, src, dst, source_options, options, shard_num)
        else:
            with (
                SOURCES[kind](src, **source_options) as source,
                progress_bar(source.num_rows, kind, quiet, force=progress) as bar,
            ):
                given = {"shard_num": shard_num, "page_size": page_size}
                options = with_source_defaults(options, source, given=given)
                summary = write_source(source, dst, options, progress=bar.update)
    except DatasetExistsError as exc:
        raise CommandError(f"{exc} (mrecord convert: use --overwrite)", EXIT_USAGE) from None
    except (KeyboardInterrupt, OSError) as exc:
        for note in getattr(exc, "__notes__", []):  # e.g. that --resume can go on
            click.echo(f"note: {note}", err=True)
        raise
    if as_json:
        emit_json(summary.to_dict())
        return
    if summary.resumed_at_row:
        click.echo(f"resumed at row {summary.resumed_at_row:,}")
    click.echo(
        f"converted {summary.rows:,} rows of {kind} {src!r} into {dst!r}: "
        f"{summary.shards} shard(s), {format_size(summary.bytes)}, "
        f"{summary.seconds:.2f} s ({summary.rows_per_second:,.0f} rows/s)"
    )
    for problem in summary.problems:
        click.echo(f"note: {problem}", err=True)
