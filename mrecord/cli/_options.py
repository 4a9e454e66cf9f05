"""Shared option parsing for the ``mrecord`` commands."""

from __future__ import annotations

import re
import sys
from typing import Any

import click

__all__ = ["SizeParam", "emit_json", "progress_bar", "progress_options"]

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgG]i?[bB]?|[bB])?\s*$")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class SizeParam(click.ParamType):  # type: ignore[type-arg]
    """A byte count: ``1048576``, ``64K``, ``1M``, ``1MiB``."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Parse ``value`` into a number of bytes."""
        if isinstance(value, int):
            return value
        match = _SIZE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a size (examples: 65536, 64K, 1M)", param, ctx)
        unit = (match.group(2) or "")[:1].lower()
        return int(match.group(1)) * _UNITS[unit]


def progress_bar(
    total: int | None, desc: str, quiet: bool, *, force: bool = False, unit: str = " rows"
) -> Any:
    """A tqdm bar on stderr with a rate.

    Shown when stderr is a terminal, or always with ``force`` (``--progress``);
    never with ``quiet``. Rows are counted with SI suffixes (``1.2M rows``),
    other units (pages) exactly. A bar not shown is a stand-in that does nothing:
    importing tqdm (its version lookup reads package metadata) took ~35 ms of a cold
    ``mrecord convert`` run from a script.
    """
    if quiet or not (force or sys.stderr.isatty()):
        return _NoBar()
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == " rows",
        file=sys.stderr,
        dynamic_ncols=True,
    )


class _NoBar:
    """What :func:`progress_bar` returns when no bar is shown: the calls the commands
    make on a tqdm bar, doing nothing."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        """Nothing to count."""

    def reset(self, total: float | None = None) -> None:
        """Nothing to reset."""

    def close(self) -> None:
        """Nothing to close."""


def progress_options(command: Any) -> Any:
    """Add ``--progress`` and ``-q/--quiet`` to a command."""
    command = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(command)
    return click.option(
        "--progress",
        is_flag=True,
        help="Show the progress bar even when stderr is not a terminal.",
    )(command)


def emit_json(data: Any) -> None:
    """Print ``data`` as one JSON document on stdout."""
    import json

    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
