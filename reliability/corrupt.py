"""Corruption harness: damage a committed dataset's files and check how mrecord reacts.

A :class:`Mutation` flips, zeroes, truncates or appends bytes in one file of a
dataset (a data file, in its pages, metadata, trailer or header, or a ``.db``).
:func:`check_mutation` applies it to a fresh copy of a template dataset and
holds mrecord to its promise:

- the reader (``verify="always"``) and ``verify_dataset`` raise nothing but
  :class:`~mrecord.errors.MrecordError` subclasses, and never hang (a timer
  interrupts a case after ``timeout`` seconds);
- when a read succeeds, every row is exactly what was written (damage is never
  served silently);
- when bytes inside a chunk payload or the metadata actually changed, the reader
  refuses the damaged data and ``verify_dataset`` reports a problem.

``python -m reliability.corrupt TEMPLATE SEED COUNT`` runs COUNT random
cases in a subprocess (so a crash is contained), printing one JSON line each.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from mrecord.errors import MrecordError

__all__ = [
    "KINDS",
    "REGIONS",
    "CaseResult",
    "Mutation",
    "build_template",
    "check_mutation",
    "random_mutation",
    "template_rows",
]

KINDS = ("flip", "zero", "truncate", "append", "overwrite")
REGIONS = ("payload", "metadata", "trailer", "header", "anywhere", "db")
NAME = "data"
SHARDS = 2
SCHEMA: dict[str, dict[str, Any]] = {
    "id": {"type": "int64"},
    "vec": {"type": "float32", "shape": [4]},
    "blob": {"type": "bytes", "compression": "zstd"},
    "text": {"type": "string"},
    "var": {"type": "int16", "shape": [-1, 2], "compression": "zstd"},
}


def template_rows(n: int = 80) -> list[dict[str, Any]]:
    """The rows of the template dataset."""
    return [
        {
            "id": i,
            "vec": np.arange(4, dtype=np.float32) * i,
            "blob": bytes([i % 251]) * (i * 7 % 90),
            "text": f"row {i} ✓ " * (i % 4),
            "var": np.full((i % 6, 2), i, dtype=np.int16),
        }
        for i in range(n)
    ]


def build_template(directory: Path) -> list[Path]:
    """Write the template dataset (2 shards, 1 KiB pages, an index) into ``directory``."""
    from mrecord.writer.file_writer import FileWriter

    writer = FileWriter(directory / NAME, shard_num=SHARDS)
    writer.add_schema(SCHEMA)
    writer.add_index(["id", "text"])
    writer.set_page_size(1024)
    rows = template_rows()
    writer.write_raw_data(rows[:50])
    writer.write_raw_data(rows[50:])
    writer.commit()
    return writer.files


@dataclass(frozen=True)
class Mutation:
    """One damage: ``kind`` at a position ``frac`` (0..1) of ``region`` in shard ``shard``."""

    shard: int
    region: str
    kind: str
    frac: float
    length: int
    mask: int

    def describe(self) -> str:
        """A short human-readable form."""
        return f"{self.kind} {self.length}B at {self.frac:.3f} of {self.region}, shard {self.shard}"


def random_mutation(rng: random.Random) -> Mutation:
    """A random :class:`Mutation` (the campaign's generator)."""
    return Mutation(
        shard=rng.randrange(SHARDS),
        region=rng.choice(REGIONS),
        kind=rng.choice(KINDS),
        frac=rng.random(),
        length=rng.choice([1, 1, 2, 4, 8, 17, 64, 300]),
        mask=rng.randrange(1, 256),
    )


def _regions(data_file: Path) -> dict[str, list[tuple[int, int]]]:
    from mrecord.format.layout import HEADER_SIZE, TRAILER_SIZE
    from mrecord.storage.shard import ShardFile

    with ShardFile(data_file, verify="never") as shard:
        size = shard.size
        chunks = shard.meta.chunks.reshape(-1)
        payload = [
            (int(c["offset"]), int(c["offset"] + c["length"])) for c in chunks if c["length"]
        ]
        meta_start = int(np.frombuffer(shard.mm[size - TRAILER_SIZE : size - 24], "<u8")[0])
    return {
        "payload": payload,
        "metadata": [(meta_start, size - TRAILER_SIZE)],
        "trailer": [(size - TRAILER_SIZE, size)],
        "header": [(0, HEADER_SIZE)],
        "anywhere": [(0, size)],
    }


def _target(mutation: Mutation, files: list[Path]) -> tuple[Path, int, int]:
    """(file, start, end) of the byte range the mutation aims at."""
    data_file = files[mutation.shard]
    if mutation.region == "db":
        path = data_file.with_name(data_file.name + ".db")
        return path, 0, path.stat().st_size
    ranges = _regions(data_file)[mutation.region]
    lo, hi = ranges[min(int(mutation.frac * len(ranges)), len(ranges) - 1)]
    return data_file, lo, hi


def apply_mutation(mutation: Mutation, files: list[Path]) -> tuple[Path, list[tuple[int, int]]]:
    """Damage the files; returns the file and the byte ranges whose content changed."""
    path, lo, hi = _target(mutation, files)
    data = bytearray(path.read_bytes())
    before = bytes(data)
    span = max(1, hi - lo)
    # For payloads frac picked the chunk; reuse its digits for the position inside it.
    inner = (mutation.frac * 7919) % 1.0 if mutation.region == "payload" else mutation.frac
    start = lo + min(int(inner * span), span - 1)
    end = min(start + mutation.length, len(data))
    if mutation.kind == "flip":
        for i in range(start, end):
            data[i] ^= mutation.mask
    elif mutation.kind == "zero":
        data[start:end] = bytes(end - start)
    elif mutation.kind == "overwrite":
        data[start:end] = random.Random(mutation.mask).randbytes(end - start)
    elif mutation.kind == "truncate":
        del data[start:]
    else:
        data += random.Random(mutation.mask).randbytes(mutation.length)
    path.write_bytes(bytes(data))
    if len(data) != len(before):
        return path, [(min(start, len(before)), max(len(data), len(before)))]
    diff = np.flatnonzero(np.frombuffer(before, np.uint8) != np.frombuffer(bytes(data), np.uint8))
    return path, [(i, i + 1) for i in diff.tolist()]


@dataclass
class CaseResult:
    """What happened to one damaged copy."""

    mutation: dict[str, Any]
    changed: bool
    must_detect: bool
    read: str  # "ok", "refused" (MrecordError) or "failure: ..."
    verify: str  # "ok", "problems" or "failure: ..."

    @property
    def passed(self) -> bool:
        """True when mrecord kept its promise on this case."""
        if self.read.startswith("failure") or self.verify.startswith("failure"):
            return False
        return not self.must_detect or (self.read == "refused" and self.verify == "problems")


class CaseTimeout(BaseException):
    """A case ran longer than its time limit (a hang)."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise CaseTimeout(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _rows_equal(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    from mrecord.testing.model import assert_rows_equal

    try:
        assert_rows_equal(SCHEMA, got, want)
    except AssertionError:
        return False
    return True


def _read_everything(first: Path) -> str:
    from mrecord.reader.dataset_reader import DatasetReader
    from mrecord.testing.model import expected_order

    rows = template_rows()
    want = [rows[i] for i in expected_order([50, len(rows) - 50], SHARDS)]
    try:
        with DatasetReader.open(first, verify="always") as reader:
            got = list(reader.iter_rows(chunk_size=16))
            got_random = reader.read_rows(np.arange(reader.num_rows)[::-1])
    except MrecordError:
        return "refused"
    if not _rows_equal(got, want) or not _rows_equal(list(got_random.iter_rows()), want[::-1]):
        return "failure: damaged rows served without an error"
    return "ok"


def _verify(first: Path) -> str:
    from mrecord.maintenance.verify import verify_dataset

    report = verify_dataset(first)
    return "ok" if report.ok else "problems"


def _guarded(fn: Any, first: Path, timeout: float) -> str:
    try:
        with _time_limit(timeout):
            return str(fn(first))
    except MrecordError:
        return "refused"
    except CaseTimeout as exc:
        return f"failure: hang ({exc})"
    except Exception as exc:
        return f"failure: {type(exc).__name__}: {exc}"


def check_mutation(template: Path, mutation: Mutation, timeout: float = 10.0) -> CaseResult:
    """Apply ``mutation`` to a copy of ``template`` and check reader and verify."""
    with tempfile.TemporaryDirectory(prefix="mrecord-corrupt-") as tmp:
        work = Path(tmp) / "ds"
        shutil.copytree(template, work)
        files = [work / (NAME + str(i)) for i in range(SHARDS)]
        path, changed = apply_mutation(mutation, files)
        in_payload = False
        if changed and not path.name.endswith(".db"):
            regions = _regions_of_original(template / path.name)
            ((t0, t1),) = regions["trailer"]
            # The trailer's 4 reserved bytes, like alignment padding, hold no data.
            protected = regions["payload"] + regions["metadata"] + [(t0, t1 - 12), (t1 - 8, t1)]
            in_payload = any(a < hi and lo < b for a, b in changed for lo, hi in protected)
            in_payload = in_payload or mutation.kind in ("truncate", "append")
        read = _guarded(_read_everything, files[0], timeout)
        verify = _guarded(_verify, files[0], timeout)
        return CaseResult(asdict(mutation), bool(changed), in_payload, read, verify)


_REGION_CACHE: dict[Path, dict[str, list[tuple[int, int]]]] = {}


def _regions_of_original(data_file: Path) -> dict[str, list[tuple[int, int]]]:
    if data_file not in _REGION_CACHE:
        _REGION_CACHE[data_file] = _regions(data_file)
    return _REGION_CACHE[data_file]


def main(argv: list[str]) -> None:
    """Worker: ``TEMPLATE SEED COUNT`` -> one JSON line per case on stdout."""
    template, seed, count = Path(argv[0]), int(argv[1]), int(argv[2])
    rng = random.Random(seed)
    for k in range(count):
        mutation = random_mutation(rng)
        sys.stdout.write(json.dumps({"case": k, "mutation": asdict(mutation)}) + "\n")
        sys.stdout.flush()
        result = check_mutation(template, mutation)
        sys.stdout.write(json.dumps({"case": k, **asdict(result), "passed": result.passed}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
