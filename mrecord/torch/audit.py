"""Visitation audit: which samples each rank delivered, and a proof that each came once.

Opt in with ``StreamingDataset(..., audit_dir=DIR)``. The loader's main process then
appends, for every delivered batch, the stream position and global row id of each
sample to ``DIR/epoch{E:05d}-rank{R:05d}.ids`` (little-endian int64 pairs).
``DIR/audit.json`` records the dataset's row count.

A run that resumed from a checkpoint (``load_state_dict``: epoch ``e``, ``samples_consumed``
``s``) writes to ``DIR/epoch{E:05d}-rank{R:05d}-from{e:05d}.{s:012d}.ids`` instead: every
rank of that run, whatever the world size, names the same resume point, so the records
of each run stay apart. A run killed after its last checkpoint delivered batches that the
next run delivers again (it resumes *from the checkpoint*); the *committed history* is
each run's deliveries up to the point the next run resumed from, and those replayed
records are counted apart (``replayed``), not as duplicates.

:func:`audit` reads those files and checks, epoch by epoch, that every row id in
``[0, N)`` was delivered exactly once over all ranks in the committed history, not
counting the padded samples of ``tail="pad"`` (positions ``>= N``, wrapped-around
repeats by design). Two runs started from the same point (twice from scratch, or twice
from one checkpoint) are one run to the audit, and their repeats are duplicates::

    report = mrecord.torch.audit("runs/audit")
    assert report.ok, report.summary()

or from the shell: ``mrecord audit runs/audit``. No torch needed.

**Rows skipped as damaged** (``on_error="skip"`` / ``"warn"``): the process that skipped
them (a DataLoader worker, or the main process) appends one JSON line per damaged batch to
``DIR/skipped-epoch{E:05d}-rank{R:05d}[-from...]-pid{P}.jsonl``: the stream positions and
row ids left out, the row ids delivered in their place (or null where the batch was
delivered shorter) and the damage (file, page, bytes). The audit counts a skip only where
the loader delivered that position in the committed history (a worker reads ahead of what
a killed run delivered), takes those rows out of the delivered ones and reports them as
"N rows skipped as damaged (...)", never as missing, and never as a clean epoch
(``ok`` is False: those rows were not delivered). Substituted rows are counted apart
(``substituted``), not as duplicates.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mrecord.errors import ArgumentError, CorruptFileError

__all__ = ["AuditLog", "AuditReport", "EpochAudit", "audit", "record_skips"]

_META = "audit.json"
_NAME = re.compile(r"epoch(\d+)-rank(\d+)(?:-from(\d+)\.(\d+))?\.ids")
_SKIPPED = re.compile(r"skipped-epoch(\d+)-rank(\d+)(?:-from(\d+)\.(\d+))?-pid\d+\.jsonl")
_NEVER = (1 << 62, 0)


def _run_suffix(resumed_from: tuple[int, int] | None) -> str:
    if resumed_from is None or resumed_from == (0, 0):
        return ""
    return f"-from{resumed_from[0]:05d}.{resumed_from[1]:012d}"


class AuditLog:
    """Appends delivered (position, row id) pairs for one rank (used by the loader)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        rank: int,
        num_rows: int,
        resumed_from: tuple[int, int] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.rank = rank
        self.resumed_from = resumed_from
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = self.directory / _META
        tmp = self.directory / f".{_META}.{os.getpid()}.partial"
        tmp.write_text(json.dumps({"version": 1, "num_rows": int(num_rows)}))
        tmp.replace(meta)

    def record(self, epoch: int, positions: np.ndarray, ids: np.ndarray) -> None:
        """Append one batch's stream positions and row ids."""
        pairs = np.stack([positions, ids], axis=1).astype("<i8")
        run = _run_suffix(self.resumed_from)
        path = self.directory / f"epoch{epoch:05d}-rank{self.rank:05d}{run}.ids"
        with open(path, "ab") as f:
            f.write(pairs.tobytes())


def record_skips(
    directory: str | os.PathLike[str],
    epoch: int,
    rank: int,
    resumed_from: tuple[int, int] | None,
    positions: np.ndarray,
    ids: np.ndarray,
    substituted: np.ndarray | None,
    errors: list[str],
) -> None:
    """Append one damaged batch's skipped rows (see the module docstring); called by the
    process that read the batch."""
    line = json.dumps(
        {
            "positions": [int(p) for p in positions],
            "ids": [int(i) for i in ids],
            "substituted": None if substituted is None else [int(i) for i in substituted],
            "errors": sorted(set(errors)),
        }
    )
    name = (
        f"skipped-epoch{epoch:05d}-rank{rank:05d}{_run_suffix(resumed_from)}-pid{os.getpid()}.jsonl"
    )
    Path(directory).mkdir(parents=True, exist_ok=True)
    with open(Path(directory) / name, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _read_skips(path: Path) -> list[dict[str, object]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill: that batch was never delivered
        if isinstance(record, dict):
            records.append(record)
    return records


@dataclass(frozen=True)
class EpochAudit:
    """The audit of one epoch over all ranks."""

    epoch: int
    num_rows: int
    delivered: int
    padded: int
    duplicates: dict[int, int] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    replayed: int = 0
    """Records of a run beyond the point the next run resumed from (delivered again)."""
    skipped: list[int] = field(default_factory=list)
    """Row ids skipped as damaged (``on_error``), not delivered."""
    substituted: int = 0
    """Good rows delivered in the place of skipped ones (to keep the counts)."""
    damage: list[str] = field(default_factory=list)
    """The damage met: one text per damaged chunk (file, page, bytes)."""

    @property
    def ok(self) -> bool:
        """Every row delivered exactly once (padding aside); False when rows were skipped."""
        return not self.duplicates and not self.missing and not self.skipped

    def summary(self) -> str:
        """One line: counts, and the first duplicates and misses."""
        line = (
            f"epoch {self.epoch}: {self.delivered} delivered of {self.num_rows} rows "
            f"(+{self.padded} padded"
            + (f", {self.replayed} replayed after a resume, not counted" if self.replayed else "")
            + ")"
        )
        if self.ok:
            return line + ": every row exactly once"
        parts = []
        if self.skipped:
            where = "; ".join(self.damage[:3]) + ("; ..." if len(self.damage) > 3 else "")
            parts.append(
                f"{len(self.skipped)} rows skipped as damaged {self.skipped[:10]!r} ({where})"
                + (
                    f", {self.substituted} good rows delivered in their place"
                    if self.substituted
                    else ""
                )
            )
        if self.duplicates or self.missing:
            dup = dict(list(self.duplicates.items())[:10])
            parts.append(
                f"{len(self.duplicates)} rows more than once (id: times) {dup!r}, "
                f"{len(self.missing)} rows missing {self.missing[:10]!r}"
            )
        return line + ": " + ", ".join(parts)


@dataclass(frozen=True)
class AuditReport:
    """The audit of every epoch found."""

    epochs: list[EpochAudit]

    @property
    def ok(self) -> bool:
        """True when every epoch is ok."""
        return all(e.ok for e in self.epochs)

    def summary(self) -> str:
        """One line per epoch."""
        return "\n".join(e.summary() for e in self.epochs) or "no audit records"


_RECORDS_PER_READ = 1 << 18
"""(position, row id) records read at a time. An audit holds one such piece of one file and
a count per row, whatever the epochs and ranks recorded: it read every epoch's files
before checking the first, and copied each epoch's records four times over (three epochs
of 6M rows on four ranks: 761 MB resident; a 90-epoch run of ImageNet's 1.28M rows would
have needed ~15 GB)."""


def _record_pieces(path: Path) -> Iterator[np.ndarray]:
    """The ``(position, id)`` records of ``path``, ``_RECORDS_PER_READ`` at a time."""
    size = path.stat().st_size
    if size % 16:
        raise CorruptFileError(
            f"{path}: {size} bytes is not a whole number of (position, id) records; "
            "the file was cut short"
        )
    step = _RECORDS_PER_READ * 16
    for offset in range(0, size, step):
        count = min(step, size - offset) // 8
        yield np.fromfile(path, dtype="<i8", count=count, offset=offset).reshape(-1, 2)


def audit(directory: str | os.PathLike[str], epochs: list[int] | None = None) -> AuditReport:
    """Check the records under ``directory`` (see the module docstring).

    ``epochs`` limits the check to those epochs (default: every epoch recorded). Epochs
    are checked one after another, their files a piece at a time (``_RECORDS_PER_READ``
    records): the memory is a 4-byte count per row beside one piece.
    """
    root = Path(directory)
    meta_path = root / _META
    if not meta_path.is_file():
        raise ArgumentError(
            f"{root} holds no {_META}: pass the audit_dir given to StreamingDataset"
        )
    num_rows = int(json.loads(meta_path.read_text())["num_rows"])
    # {epoch: {run (the resume point it started from): [file, ...]}}
    records: dict[int, dict[tuple[int, int], list[Path]]] = {}
    skips: dict[int, dict[tuple[int, int], list[Path]]] = {}
    for path in sorted(root.iterdir()):
        for pattern, found in ((_NAME, records), (_SKIPPED, skips)):
            match = pattern.fullmatch(path.name)
            if match:
                run = (int(match.group(3) or 0), int(match.group(4) or 0))
                found.setdefault(int(match.group(1)), {}).setdefault(run, []).append(path)
    runs = sorted({run for per_run in records.values() for run in per_run})
    ends = dict(zip(runs, [*runs[1:], _NEVER], strict=True))  # where the next run took over
    wanted = sorted(records) if epochs is None else list(epochs)
    return AuditReport(
        [
            _audit_epoch(epoch, num_rows, records.get(epoch, {}), skips.get(epoch, {}), ends)
            for epoch in wanted
        ]
    )


def _audit_epoch(
    epoch: int,
    num_rows: int,
    records: dict[tuple[int, int], list[Path]],
    skips: dict[tuple[int, int], list[Path]],
    ends: dict[tuple[int, int], tuple[int, int]],
) -> EpochAudit:
    """One epoch's audit from each run's record files (and its skip records)."""
    counts = np.zeros(num_rows, dtype=np.int32)
    delivered = padded = replayed = substituted = 0
    skipped: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    damage: dict[str, None] = {}
    for run, paths in records.items():
        marks = [record for path in skips.get(run, []) for record in _read_skips(path)]
        marked = _marked_positions(marks)
        lost: set[int] = set()  # marked positions this run delivered: skipped rows
        end_epoch, end_position = ends[run]
        for path in paths:
            for pairs in _record_pieces(path):
                # Records past the point the next run resumed from were delivered again.
                if epoch < end_epoch:
                    kept = pairs
                elif epoch == end_epoch:
                    kept = pairs[pairs[:, 0] < end_position]
                else:
                    kept = pairs[:0]
                replayed += len(pairs) - len(kept)
                if len(marked):
                    gone = np.isin(kept[:, 0], marked)
                    if gone.any():
                        lost.update(kept[gone, 0].tolist())
                        skipped.append(kept[gone & (kept[:, 0] < num_rows), 1])
                        kept = kept[~gone]
                real = kept[kept[:, 0] < num_rows, 1]
                delivered += len(real)
                padded += len(kept) - len(real)
                _count(counts, real, path)
        for record in marks:
            positions, subs = record.get("positions"), record.get("substituted")
            if not isinstance(positions, list):
                continue
            texts = record.get("errors")
            for k, position in enumerate(positions):
                if position in lost:
                    substituted += isinstance(subs, list) and k < len(subs)
                    if isinstance(texts, list):
                        damage.update(dict.fromkeys(str(t) for t in texts))
    lost_ids = np.unique(np.concatenate(skipped))
    dups = np.flatnonzero(counts > 1)
    return EpochAudit(
        epoch=epoch,
        num_rows=num_rows,
        delivered=delivered,
        padded=padded,
        duplicates={int(i): int(counts[i]) for i in dups},
        missing=np.setdiff1d(np.flatnonzero(counts == 0), lost_ids).tolist(),
        replayed=replayed,
        skipped=lost_ids.tolist(),
        substituted=substituted,
        damage=list(damage),
    )


def _marked_positions(records: list[dict[str, object]]) -> np.ndarray:
    """Every stream position the skip ``records`` name (sorted, once each)."""
    positions = [
        int(p)
        for record in records
        if isinstance(record.get("positions"), list)
        for p in record["positions"]  # type: ignore[attr-defined]
    ]
    return np.unique(np.asarray(positions, dtype=np.int64))


def _count(counts: np.ndarray, ids: np.ndarray, path: Path) -> None:
    """Add one to ``counts[i]`` for each row id ``i`` in ``ids`` (repeats counted)."""
    if not len(ids):
        return
    if int(ids.min()) < 0 or int(ids.max()) >= len(counts):
        bad = int(ids[(ids < 0) | (ids >= len(counts))][0])
        raise CorruptFileError(
            f"{path}: row id {bad} is outside the dataset's {len(counts)} rows; the record "
            "file is damaged or belongs to another dataset"
        )
    unique, times = np.unique(ids, return_counts=True)
    counts[unique] += times.astype(np.int32)
