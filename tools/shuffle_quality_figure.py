"""Draw ``docs/images/shuffle_quality.png`` and print its table (docs/SHUFFLE_AND_SAMPLERS.md).

A label-sorted dataset (16 shards of 5,000 rows, 10 classes of 8,000 rows in stored order,
the worst case for a shuffle that keeps neighbours together) is written to a temporary
directory, then ``mrecord shuffle-report`` measures each mode over 4 epochs::

    python tools/shuffle_quality_figure.py [OUT.png]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from mrecord import FileWriter
from mrecord.maintenance.shuffle_report import plot_shuffle_report, shuffle_report
from mrecord.sampling.quality import format_shuffle_report

SHARDS, PER_SHARD, CLASSES = 16, 5000, 10
OUT = Path(__file__).resolve().parents[1] / "docs" / "images" / "shuffle_quality.png"


def main(argv: list[str]) -> None:
    """Write the dataset, measure, print the table and draw the figure."""
    out = Path(argv[0]) if argv else OUT
    rows = SHARDS * PER_SHARD
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sorted.mrecord"
        with FileWriter(path, shard_num=SHARDS) as writer:
            writer.add_schema({"label": {"type": "int64"}})
            writer.write_raw_data({"label": np.repeat(np.arange(CLASSES), rows // CLASSES)})
        report = shuffle_report(
            path.with_name(path.name + "00"),
            modes=["global", "partial", "files", "infile", "none"],
            batch_size=64,
            label_column="label",
            epochs=4,
            partial_window=10_000,
        )
    print(format_shuffle_report(report))
    plot_shuffle_report(
        report,
        out,
        title=f"{rows:,} label-sorted rows, {SHARDS} files, {CLASSES} classes, batch 64, "
        "PARTIAL window 10,000 (dashed: uniform permutation)",
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
