"""Structure-aware mutation fuzzing of the readers of foreign files.

Three targets, each a template and a set of mutators that know its structure (a
byte flip rarely gets past a header check; a changed JSON field or a SQL view does):

- ``mindrecord``: MindSpore's files (``tests/fixtures/mindrecord``): a header JSON
  field replaced, removed or duplicated (the length prefix kept right), the header
  length, record lengths inside pages, bytes anywhere, truncation, and the ``.db``
  (below, on its ``INDEXES`` table). Read with ``MindRecordDataset`` and converted
  with ``convert_mindrecord``.
- ``mrecord``: a committed dataset (``reliability.corrupt.build_template``): a field of
  the metadata document replaced with every checksum made valid again
  (``reliability.hostile.rewrite_metadata``), a chunk replaced with valid CRC
  (``hostile.replace_chunk``), a forged commit journal. Read with
  ``DatasetReader.open`` (every row, in order and reversed) and ``verify_dataset``.
- ``db``: the mrecord dataset's ``.db``: tables dropped or renamed, replaced by views
  (benign, endless recursive, or producing huge values), triggers, huge rows, cells of
  the wrong type, missing columns, garbage metadata JSON. Opened, read with
  ``MindPage`` lookups, and verified.

A case passes when every call returns or raises an :class:`~mrecord.errors.MrecordError`;
where the mutation cannot change the rows (``.db``, journal), a read that succeeds must
return exactly the template's rows. Cases run in a worker subprocess limited to
:data:`MEMORY_LIMIT` bytes of address space (``RLIMIT_AS``), so a memory blow-up is a
``MemoryError`` (a failure), and the parent kills a worker that takes longer than its
timeout (a hang). Every case is reproducible from ``(target, seed, number)``:
:func:`make_case` rebuilds its files.

``python -m reliability.fuzz TARGET TEMPLATES SEED FIRST COUNT`` is the worker: one
JSON line per case.
"""

from __future__ import annotations

import contextlib
import json
import queue
import random
import resource
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

__all__ = [
    "MEMORY_LIMIT",
    "TARGETS",
    "FuzzResult",
    "build_templates",
    "check_case",
    "expected_rows",
    "make_case",
    "mutate_db",
    "mutate_tree",
    "run_fuzz",
    "worker",
]

TARGETS = ("mindrecord", "mrecord", "db")
MEMORY_LIMIT = 2 << 30  # bytes of address space per worker; importing mrecord takes ~0.7 GiB
MINDRECORD_SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mindrecord"
_MR_FILES = ("alltypes.mindrecord", "images.mindrecord", "sharded.mindrecord1")

INTERESTING: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    7,
    255,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    1e308,
    -0.5,
    float("nan"),
    "",
    "x",
    "../../etc/passwd",
    "a" * 10_000,
    None,
    True,
    [],
    [[]],
    [-1] * 40,
    {},
    {"type": "int64"},
)


# -- templates ---------------------------------------------------------------------------------


def build_templates(directory: Path) -> None:
    """Write the templates: ``mindrecord/`` (MindSpore's samples) and ``mrecord/``."""
    from reliability.corrupt import build_template

    (directory / "mindrecord").mkdir(parents=True)
    for f in MINDRECORD_SAMPLES.iterdir():
        if not f.name.endswith(".json"):
            shutil.copy(f, directory / "mindrecord" / f.name)
    (directory / "mrecord").mkdir()
    build_template(directory / "mrecord")


# -- generic structure mutation ------------------------------------------------------------------


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def mutate_tree(doc: Any, rng: random.Random, extra: tuple[Any, ...] = ()) -> str:
    """Change one node of a JSON/msgpack tree in place; returns what was done."""
    path = rng.choice(_paths(doc))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    action = rng.choice(["replace", "replace", "replace", "delete", "duplicate"])
    if action == "delete":
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        action = "replace"
        parent[key] = rng.choice(INTERESTING + extra)
        if isinstance(parent[key], (list, dict)):
            parent[key] = json.loads(json.dumps(parent[key]))  # a fresh copy
    return f"{action} {'/'.join(map(str, path))}"


def _interesting_int(rng: random.Random) -> int:
    return int(rng.choice([0, 1, 7, 255, 2**16, 2**31 - 1, 2**31, 2**32, 2**40, 2**62]))


# -- the .db mutators ----------------------------------------------------------------------------


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def mutate_db(db: Path, rng: random.Random, tables: list[str]) -> str:
    """Apply one structural change to the SQLite file ``db``; returns what was done."""
    table = rng.choice(tables)
    conn = sqlite3.connect(db)
    try:
        cols = _columns(conn, table)
        found = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if found and found[0] == "view":  # a first change made it a view: leave it
            return f"db {db.name}: nothing more (a view) on {table}"
        if not cols:  # an earlier mutation dropped it: put an unrelated table there
            conn.execute(f'CREATE TABLE "{table}" (junk)')
            conn.commit()
            return f"db {db.name}: unrelated table {table}"
        col = rng.choice(cols)
        rowid = conn.execute(f'SELECT rowid FROM "{table}" ORDER BY random() LIMIT 1').fetchone()
        rid = rowid[0] if rowid else 1
        kind = rng.choice(
            [
                "drop",
                "rename",
                "view",
                "endless view",
                "huge view",
                "trigger",
                "huge cell",
                "wrong type",
                "null",
                "delete rows",
                "drop column",
                "extra table",
                "interesting int",
            ]
        )
        quoted = ", ".join(f'"{c}"' for c in cols)
        if kind in ("wrong type", "null", "interesting int"):
            # CREATE TABLE AS drops the constraints that would refuse the value.
            conn.execute(f'CREATE TABLE "t_{table}" AS SELECT * FROM "{table}"')
            conn.execute(f'DROP TABLE "{table}"')
            conn.execute(f'ALTER TABLE "t_{table}" RENAME TO "{table}"')
        if kind == "drop":
            conn.execute(f'DROP TABLE "{table}"')
        elif kind == "rename":
            conn.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_old"')
        elif kind == "view":
            conn.execute(f'ALTER TABLE "{table}" RENAME TO "t_{table}"')
            conn.execute(f'CREATE VIEW "{table}" AS SELECT * FROM "t_{table}"')
        elif kind == "endless view":
            conn.execute(f'DROP TABLE "{table}"')
            values = ", ".join(f'x AS "{c}"' for c in cols)
            conn.execute(
                f'CREATE VIEW "{table}" AS WITH RECURSIVE s(x) AS '
                f"(SELECT 0 UNION ALL SELECT x + 1 FROM s) SELECT {values} FROM s"
            )
        elif kind == "huge view":
            conn.execute(f'ALTER TABLE "{table}" RENAME TO "t_{table}"')
            values = ", ".join(
                f'randomblob(400000000) AS "{c}"' if c == col else f'"{c}"' for c in cols
            )
            conn.execute(f'CREATE VIEW "{table}" AS SELECT {values} FROM "t_{table}"')
        elif kind == "trigger":
            conn.execute(
                f'CREATE TRIGGER t AFTER INSERT ON "{table}" BEGIN DELETE FROM "{table}"; END'
            )
        elif kind == "huge cell":
            conn.execute(
                f'UPDATE "{table}" SET "{col}" = zeroblob(?) WHERE rowid = ?',
                (rng.choice([1 << 20, 80 << 20]), rid),
            )
        elif kind == "wrong type":
            value = rng.choice(["text", b"\x00\x01", 1.5, "{", "[1, 2]"])
            conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, rid))
        elif kind == "null":
            conn.execute(f'UPDATE "{table}" SET "{col}" = NULL WHERE rowid = ?', (rid,))
        elif kind == "delete rows":
            conn.execute(f'DELETE FROM "{table}" WHERE rowid % 2 = ?', (rng.randint(0, 1),))
        elif kind == "drop column":
            conn.execute(f'CREATE TABLE "t_{table}" AS SELECT {quoted} FROM "{table}"')
            conn.execute(f'DROP TABLE "{table}"')
            kept = ", ".join(f'"{c}"' for c in cols if c != col) or '1 AS "nothing"'
            conn.execute(f'CREATE TABLE "{table}" AS SELECT {kept} FROM "t_{table}"')
            conn.execute(f'DROP TABLE "t_{table}"')
        elif kind == "extra table":
            conn.execute('CREATE TABLE "extra_stuff" (x)')
            conn.execute(f'CREATE INDEX "i_{col}" ON "{table}" ("{col}")')
        else:
            value = _interesting_int(rng) * rng.choice([1, -1])
            conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, rid))
        conn.commit()
    finally:
        conn.close()
    return f"db {db.name}: {kind} on {table}.{col}"


# -- per-target mutation -------------------------------------------------------------------------


def _mutate_mindrecord(folder: Path, rng: random.Random) -> tuple[Path, str, bool]:
    """Returns (file to open, description, whether the rows must stay the same)."""
    target = folder / rng.choice(_MR_FILES)
    data = bytearray(target.read_bytes())
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    kind = rng.choice(["header"] * 5 + ["length", "record", "bytes", "truncate", "db", "db"])
    if kind == "header":
        what = mutate_tree(header, rng)
        body = json.dumps(header, separators=(",", ":")).encode()
        room = _header_size(data, length)  # of the original header: where the pages start
        out = struct.pack("<Q", len(body)) + body
        out += bytes(max(0, room - len(out)))
        data = bytearray(out + data[room:])
    elif kind == "length":
        what = "header length"
        data[:8] = struct.pack("<Q", _interesting_int(rng))
    elif kind == "record":
        room = _header_size(data, length)
        pos = rng.randrange(room, max(room + 1, len(data) - 8))
        what = f"record length at {pos}"
        data[pos : pos + 8] = struct.pack(">Q", _interesting_int(rng))
    elif kind == "bytes":
        what = "bytes"
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == "truncate":
        cut = rng.randrange(len(data))
        what = f"truncate at {cut}"
        data = data[:cut]
    else:
        db = Path(str(target) + ".db")
        return folder / target.name, mutate_db(db, rng, ["INDEXES", "SHARD_NAME"]), True
    target.write_bytes(bytes(data))
    return target, f"{target.name}: {kind}: {what}", False


def _header_size(data: bytearray, length: int) -> int:
    try:
        size = int(json.loads(data[8 : 8 + length])["header_size"])
    except (ValueError, KeyError, TypeError):
        return 8 + length
    return size


def _mutate_mrecord(folder: Path, rng: random.Random) -> tuple[Path, str, bool]:
    from reliability.hostile import replace_chunk, rewrite_metadata

    shard = folder / rng.choice(["data0", "data1"])
    kind = rng.choice(["metadata"] * 4 + ["chunk table", "chunk", "journal"])
    if kind == "metadata":
        done: list[str] = []
        rewrite_metadata(shard, lambda doc: done.append(mutate_tree(doc, rng)))
        return folder / "data0", f"{shard.name}: metadata: {done[0]}", False
    if kind == "chunk table":
        from mrecord.format.metadata import CHUNK_DTYPE

        def change(doc: dict[str, Any]) -> None:
            chunks = np.frombuffer(doc["chunks"], dtype=CHUNK_DTYPE).copy()
            i = rng.randrange(len(chunks))
            ints = [n for n in CHUNK_DTYPE.names or () if CHUNK_DTYPE[n].kind in "iu"]
            name = rng.choice(ints)
            info = np.iinfo(chunks[name].dtype)
            chunks[name][i] = min(info.max, max(info.min, _interesting_int(rng)))
            doc["chunks"] = chunks.tobytes()

        rewrite_metadata(shard, change)
        return folder / "data0", f"{shard.name}: chunk table field", False
    if kind == "chunk":
        stored = rng.randbytes(rng.randint(0, 64))
        if rng.random() < 0.5:
            import zstandard

            stored = zstandard.ZstdCompressor().compress(rng.randbytes(rng.randint(0, 4096)))
        replace_chunk(
            shard, 0, rng.randrange(5), stored, _interesting_int(rng), rng.randint(0, 3)
        )
        return folder / "data0", f"{shard.name}: chunk replaced", False
    names: Any = rng.choice(
        [["data0", "data1", "data0.db"], ["../x"], ["data0"] * 1000, [1, 2], "data0", None]
    )
    doc = {"dataset_id": "x", "generation": rng.choice([1, 2, -1]), "files": names}
    payload = msgpack.packb(doc) if rng.random() < 0.8 else rng.randbytes(40)
    (folder / "data.mrecord-journal").write_bytes(payload)
    if rng.random() < 0.5:  # a partial for the journal to roll forward
        shutil.copy(folder / "data1", folder / "data0.mrecord-partial")
        return folder / "data0", f"journal {names!r} with a foreign partial", False
    return folder / "data0", f"journal {names!r}", True


def _mutate_db(folder: Path, rng: random.Random) -> tuple[Path, str, bool]:
    db = folder / rng.choice(["data0.db", "data1.db"])
    what = mutate_db(db, rng, ["rows", "metadata"])
    if rng.random() < 0.2:
        # The second change may not apply after the first (to a view, say).
        with contextlib.suppress(sqlite3.Error):
            what += "; " + mutate_db(db, rng, ["rows", "metadata"])
    return folder / "data0", what, True


_MUTATORS: dict[str, Callable[[Path, random.Random], tuple[Path, str, bool]]] = {
    "mindrecord": _mutate_mindrecord,
    "mrecord": _mutate_mrecord,
    "db": _mutate_db,
}


def make_case(
    target: str, templates: Path, seed: int, number: int, folder: Path
) -> tuple[Path, str, bool]:
    """Copy the template into ``folder`` and apply case ``number``'s mutation."""
    source = templates / ("mindrecord" if target == "mindrecord" else "mrecord")
    shutil.copytree(source, folder)
    rng = random.Random(f"{seed}-{target}-{number}")
    try:
        return _MUTATORS[target](folder, rng)
    except (sqlite3.Error, KeyError, IndexError, ValueError, TypeError) as exc:
        # A mutation that does not apply to this file (a column it lacks, say).
        return folder / "none", f"mutation not applicable ({type(exc).__name__}: {exc})", True


# -- checking ----------------------------------------------------------------------------------


def _read_mindrecord(first: Path, out: Path, convert: bool) -> list[Any]:
    from mrecord.convert.api import convert_mindrecord
    from mrecord.convert.mindrecord import MindRecordDataset

    with MindRecordDataset.open(first) as ds:
        rows = [_plain(r) for r in ds.iter_rows()]
    if convert:
        convert_mindrecord(first, out / "converted")
    return rows


def _read_mrecord(first: Path, out: Path, convert: bool) -> list[Any]:
    from mrecord import DatasetReader, MindPage, verify_dataset

    with DatasetReader.open(first, verify="always") as reader:
        rows = [_plain(r) for r in reader.iter_rows(chunk_size=16)]
        backwards = reader.read_rows(np.arange(reader.num_rows)[::-1])
        if [_plain(r) for r in backwards.iter_rows()] != rows[::-1]:
            raise AssertionError("rows read backwards differ from rows read in order")
    verify_dataset(first)
    if convert:
        page = MindPage(first)
        page.set_category_field("text")
        page.read_category_info()
        page.read_at_page_by_name("row 3 ✓ row 3 ✓ row 3 ✓ ", 0, 2)
        page.close()
    return rows


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()}


@dataclass
class FuzzResult:
    """One case: what was done and how it ended (``ok``, ``refused: Type`` or ``failure: ...``)."""

    target: str
    number: int
    mutation: str
    outcome: str

    @property
    def passed(self) -> bool:
        """True when mrecord answered with a correct read or an mrecord error."""
        return not self.outcome.startswith("failure")


def check_case(
    target: str, templates: Path, seed: int, number: int, expected: dict[str, list[Any]]
) -> FuzzResult:
    """Build case ``number`` in a temporary folder and run the target's reads on it."""
    from mrecord.errors import MrecordError

    read = _read_mindrecord if target == "mindrecord" else _read_mrecord
    with tempfile.TemporaryDirectory(prefix="mrecord-fuzz-") as tmp:
        first, what, same_rows = make_case(target, templates, seed, number, Path(tmp) / "case")
        if first.name == "none":
            return FuzzResult(target, number, what, "skipped")
        try:
            rows = read(first, Path(tmp), convert=number % 4 == 0)
        except MrecordError as exc:
            return FuzzResult(target, number, what, f"refused: {type(exc).__name__}")
        except MemoryError:
            return FuzzResult(target, number, what, "failure: MemoryError (memory beyond bound)")
        except Exception as exc:  # every other exception is the finding
            return FuzzResult(target, number, what, f"failure: {type(exc).__name__}: {exc}"[:400])
    if same_rows and rows != expected_rows(target, templates, first.name, expected):
        return FuzzResult(target, number, what, "failure: read different rows without an error")
    return FuzzResult(target, number, what, "ok")


def expected_rows(
    target: str, templates: Path, name: str, cache: dict[str, list[Any]]
) -> list[Any]:
    """The untouched template's rows as the target reads them from file ``name`` (the
    oracle for mutations that must not change the rows); cached in ``cache``."""
    if name not in cache:
        with tempfile.TemporaryDirectory() as tmp:
            source = templates / ("mindrecord" if target == "mindrecord" else "mrecord")
            copy = Path(shutil.copytree(source, Path(tmp) / "c"))
            read = _read_mindrecord if target == "mindrecord" else _read_mrecord
            cache[name] = read(copy / name, Path(tmp), False)
    return cache[name]


def worker(target: str, templates: Path, seed: int, first: int, count: int) -> None:
    """Run cases ``first..first+count-1`` under the memory limit, one JSON line each."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    expected: dict[str, list[Any]] = {}
    for number in range(first, first + count):
        print(json.dumps({"start": number}), flush=True)
        result = check_case(target, templates, seed, number, expected)
        print(json.dumps(result.__dict__), flush=True)


def run_fuzz(
    target: str,
    templates: Path,
    seed: int,
    count: int,
    batch: int = 200,
    timeout: float = 20.0,
) -> list[FuzzResult]:
    """Run ``count`` cases in worker subprocesses; a worker that dies, or that gives no
    answer on a case within ``timeout`` seconds (killed then), fails the case it was on,
    and the next worker goes on after it."""
    from reliability.crash import _lines

    root = str(Path(__file__).resolve().parents[1])
    results: list[FuzzResult] = []
    number = 0
    while number < count:
        n = min(batch, count - number)
        started = number
        args = [target, str(templates), str(seed), str(number), str(n)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "reliability.fuzz", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        lines = _lines(proc)
        failure = ""
        while True:
            try:
                line = lines.get(timeout=timeout + 30 * (started == number))  # + start-up
            except queue.Empty:
                proc.kill()
                failure = f"failure: hang: no answer within {timeout} s"
                break
            if line is None:
                break
            doc = json.loads(line)
            if "start" in doc:
                started = doc["start"]
            else:
                results.append(FuzzResult(**doc))
        code = proc.wait()
        assert proc.stderr is not None
        with proc.stderr:
            err = proc.stderr.read()
        if not failure and code == 0:
            number += n
            continue
        failure = failure or f"failure: worker exit {code}: {err[-300:]}"
        results.append(FuzzResult(target, started, "(rebuild with make_case)", failure))
        number = started + 1
    return results


def main(argv: list[str]) -> None:
    """Worker entry point: ``TARGET TEMPLATES SEED FIRST COUNT``."""
    worker(argv[0], Path(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]))


if __name__ == "__main__":
    main(sys.argv[1:])
