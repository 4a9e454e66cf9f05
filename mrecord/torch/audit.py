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
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mrecord.errors import ArgumentError, CorruptFileError

__all__ = ["AuditLog", "AuditReport", "EpochAudit", "audit"]

_META = "audit.json"
_NAME = re.compile(r"epoch(\d+)-rank(\d+)(?:-from(\d+)\.(\d+))?\.ids")
_NEVER = (1 << 62, 0)


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
        run = ""
        if self.resumed_from is not None and self.resumed_from != (0, 0):
            run = f"-from{self.resumed_from[0]:05d}.{self.resumed_from[1]:012d}"
        path = self.directory / f"epoch{epoch:05d}-rank{self.rank:05d}{run}.ids"
        with open(path, "ab") as f:
            f.write(pairs.tobytes())


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

    @property
    def ok(self) -> bool:
        """Every row delivered exactly once (padding aside)."""
        return not self.duplicates and not self.missing

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
        dup = dict(list(self.duplicates.items())[:10])
        return (
            line + f": {len(self.duplicates)} rows more than once (id: times) {dup!r}, "
            f"{len(self.missing)} rows missing {self.missing[:10]!r}"
        )


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


def _read_pairs(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if len(raw) % 16:
        raise CorruptFileError(
            f"{path}: {len(raw)} bytes is not a whole number of (position, id) records; "
            "the file was cut short"
        )
    return np.frombuffer(raw, dtype="<i8").reshape(-1, 2)


def audit(directory: str | os.PathLike[str], epochs: list[int] | None = None) -> AuditReport:
    """Check the records under ``directory`` (see the module docstring).

    ``epochs`` limits the check to those epochs (default: every epoch recorded).
    """
    root = Path(directory)
    meta_path = root / _META
    if not meta_path.is_file():
        raise ArgumentError(
            f"{root} holds no {_META}: pass the audit_dir given to StreamingDataset"
        )
    num_rows = int(json.loads(meta_path.read_text())["num_rows"])
    # {epoch: {run (the resume point it started from): [pairs, ...]}}
    by_epoch: dict[int, dict[tuple[int, int], list[np.ndarray]]] = {}
    for path in sorted(root.iterdir()):
        match = _NAME.fullmatch(path.name)
        if match:
            run = (int(match.group(3) or 0), int(match.group(4) or 0))
            by_epoch.setdefault(int(match.group(1)), {}).setdefault(run, []).append(
                _read_pairs(path)
            )
    runs = sorted({run for per_run in by_epoch.values() for run in per_run})
    ends = dict(zip(runs, [*runs[1:], _NEVER], strict=True))  # where the next run took over
    wanted = sorted(by_epoch) if epochs is None else list(epochs)
    results = []
    for epoch in wanted:
        kept, replayed = [np.zeros((0, 2), dtype=np.int64)], 0
        for run, parts in by_epoch.get(epoch, {}).items():
            pairs = np.concatenate(parts)
            end_epoch, end_position = ends[run]
            if epoch > end_epoch:
                committed = np.zeros(len(pairs), dtype=bool)
            elif epoch == end_epoch:
                committed = pairs[:, 0] < end_position
            else:
                committed = np.ones(len(pairs), dtype=bool)
            replayed += int((~committed).sum())
            kept.append(pairs[committed])
        pairs = np.concatenate(kept)
        real = pairs[pairs[:, 0] < num_rows, 1]
        counts = np.bincount(real, minlength=num_rows) if len(real) else np.zeros(num_rows, int)
        dups = np.flatnonzero(counts > 1)
        results.append(
            EpochAudit(
                epoch=epoch,
                num_rows=num_rows,
                delivered=len(real),
                padded=len(pairs) - len(real),
                duplicates={int(i): int(counts[i]) for i in dups},
                missing=np.flatnonzero(counts == 0).tolist(),
                replayed=replayed,
            )
        )
    return AuditReport(results)
