"""The one way every ``mrecord`` command shows sizes and tables to people.

Sizes use binary units (``812 B``, ``1.5 KiB``, ``30.4 MiB``, ``2.0 GiB``), as
``--page-size 1M`` means 1 MiB; rates are ``MiB/s``. Tables are left-aligned
text columns (numbers right-aligned), a header and a rule of dashes.
"""

from __future__ import annotations

from collections.abc import Sequence

from mrecord.errors import ArgumentError

__all__ = ["MIB", "format_rate", "format_size", "format_table"]

MIB = 1 << 20
_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(n: int | float | None) -> str:
    """Bytes for people: ``None`` → ``-``, ``812`` → ``812 B``, ``1536`` → ``1.5 KiB``."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{int(n)} B"
    value = float(n) / 1024
    power = 0
    while value >= 1024 and power < len(_UNITS) - 1:
        value /= 1024
        power += 1
    return f"{value:,.1f} {_UNITS[power]}"


def format_rate(bytes_per_second: float) -> str:
    """A transfer rate in ``MiB/s``."""
    return f"{bytes_per_second / MIB:,.1f} MiB/s"


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[str] = ()
) -> list[str]:
    """Lines of a text table; the columns named in ``right`` are right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ArgumentError(
                f"row {list(row)!r} has {len(row)} cells for {len(headers)} columns"
            )
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if h in right else cell.ljust(w)
            for h, cell, w in zip(headers, cells, widths, strict=True)
        ]
        return "  ".join(parts).rstrip()

    head = line(headers)
    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    return [head, rule, *(line(row) for row in rows)]
