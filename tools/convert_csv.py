#!/usr/bin/env python3
"""Convert a CSV file to mrecord (schema inferred or given).

Example::

    python tools/convert_csv.py table.csv table.mrecord --schema schema.json

The same as ``mrecord convert csv SRC DST [OPTIONS]``; ``--help`` lists the options.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# Keep tools/ off the import path (a script here must never shadow a module) and
# make the repository's mrecord importable when it is not installed.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from mrecord.cli.main import main  # noqa: E402

if __name__ == "__main__":
    main(["convert", "csv", *sys.argv[1:]])
