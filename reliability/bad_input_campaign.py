"""Bad-input campaign: thousands of generated wrong schemas and rows, each must be refused.

    .venv/bin/python -m reliability.bad_input_campaign --examples 3000 --seed 1

Uses the strategies of :mod:`mrecord.testing.bad_inputs`. A schema with one bad
field must raise ``SchemaError`` naming that field; a call with one bad value
must raise ``RowValidationError`` with the right row and field, and leave the
files on disk byte for byte unchanged. Prints the counts; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from mrecord.errors import RowValidationError, SchemaError
from mrecord.testing import strategies as mst
from mrecord.testing.bad_inputs import bad_fields, bad_value_for
from mrecord.writer.file_writer import FileWriter

counts: Counter[str] = Counter()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def check_schema(good: dict[str, Any], bad: tuple[Any, Any], position: int) -> None:
    """One schema with a bad field is refused, naming it."""
    name, spec = bad
    items = [(k, v) for k, v in good.items() if k != name]
    items.insert(min(position, len(items)), (name, spec))
    with tempfile.TemporaryDirectory() as tmp:
        writer = FileWriter(Path(tmp) / "d")
        try:
            writer.add_schema(dict(items))
        except SchemaError as exc:
            assert repr(name) in str(exc), (name, str(exc))
            counts["schemas refused"] += 1
        else:
            raise AssertionError(f"schema accepted: {dict(items)!r}")
        finally:
            writer.abort()


def check_rows(schema: dict[str, Any], data: st.DataObject) -> None:
    """One call with a bad value is refused naming row and field; the files do not change."""
    rows = data.draw(mst.rows_for(schema, min_size=1, max_size=6))
    row = data.draw(st.integers(0, len(rows) - 1))
    field = data.draw(st.sampled_from(sorted(schema)))
    rows[row] = {**rows[row], field: data.draw(bad_value_for(schema[field]))}
    columnar = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as tmp:
        writer = FileWriter(Path(tmp) / "d", shard_num=2)
        try:
            writer.add_schema(schema)
            writer.write_raw_data(data.draw(mst.rows_for(schema, 0, 3)))
            before = _snapshot(Path(tmp))
            payload: Any = rows
            if columnar:
                payload = {name: [r[name] for r in rows] for name in schema}
            try:
                writer.write_raw_data(payload)
            except RowValidationError as exc:
                assert (exc.row, exc.field) == (row, field), (exc.row, exc.field, row, field)
                assert _snapshot(Path(tmp)) == before
                counts["rows refused (columnar)" if columnar else "rows refused (row dicts)"] += 1
            else:
                raise AssertionError(f"row {row} field {field!r} accepted: {rows[row][field]!r}")
        finally:
            writer.abort()


def main(argv: list[str] | None = None) -> int:
    """Run both properties with ``--examples`` each; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    config = settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    schemas = given(good=mst.schemas(max_fields=3), bad=bad_fields(), position=st.integers(0, 3))(
        check_schema
    )
    rows = given(schema=mst.schemas(max_fields=3), data=st.data())(check_rows)
    failed = False
    for name, test in (("schemas", schemas), ("rows", rows)):
        try:
            seed(args.seed)(config(test))()  # type: ignore[call-arg]
        except Exception as exc:  # a falsifying example: report and go on
            failed = True
            print(f"{name}: FAILED: {exc}")
    for key, n in sorted(counts.items()):
        print(f"{key:28} {n:6}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
