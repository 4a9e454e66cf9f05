"""The resume checkpoint: a small JSON-serialisable dict, the same on every rank.

::

    {
      "version": 1,
      "epoch": 3,                       # epoch being read
      "seed": 0,
      "shuffle": "global",              # a Shuffle value, or null for file order
      "samples_consumed": 40960,        # stream positions delivered by all ranks together
      "global_batch": 512,              # batch_size * world_size of the run that wrote it
      "num_canonical_nodes": 1,
      "fingerprint": {"files": ["train.mrecord0", ...], "rows": [5000, ...]},
    }

Ranks move in lockstep under DDP, so ``samples_consumed`` is the same number on every
rank: any one rank's checkpoint resumes every rank of the next run, whatever its world
size or worker count (see :mod:`mrecord.torch.plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mrecord.errors import CheckpointError
from mrecord.sampling import Shuffle

__all__ = ["CHECKPOINT_VERSION", "Checkpoint", "fingerprint"]

CHECKPOINT_VERSION = 1

_KEYS = (
    "version",
    "epoch",
    "seed",
    "shuffle",
    "samples_consumed",
    "global_batch",
    "num_canonical_nodes",
    "fingerprint",
)


def fingerprint(file_names: list[str], row_counts: list[int]) -> dict[str, list[Any]]:
    """What identifies a dataset for resume: its shard basenames and row counts, in order."""
    return {"files": list(file_names), "rows": [int(n) for n in row_counts]}


def _int(state: Mapping[str, Any], key: str, minimum: int) -> int:
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckpointError(
            f"checkpoint field {key!r} must be an int >= {minimum}, got {value!r}"
        )
    return value


@dataclass(frozen=True)
class Checkpoint:
    """A parsed resume checkpoint (see the module docstring for the dict)."""

    epoch: int
    seed: int
    shuffle: Shuffle | None
    samples_consumed: int
    global_batch: int
    num_canonical_nodes: int
    fingerprint: dict[str, list[Any]]

    def to_dict(self) -> dict[str, Any]:
        """The plain dict (JSON-serialisable)."""
        return {
            "version": CHECKPOINT_VERSION,
            "epoch": self.epoch,
            "seed": self.seed,
            "shuffle": None if self.shuffle is None else self.shuffle.value,
            "samples_consumed": self.samples_consumed,
            "global_batch": self.global_batch,
            "num_canonical_nodes": self.num_canonical_nodes,
            "fingerprint": {k: list(v) for k, v in self.fingerprint.items()},
        }

    @classmethod
    def from_dict(cls, state: object) -> Checkpoint:
        """Parse and validate a checkpoint dict; CheckpointError says what is wrong."""
        if not isinstance(state, Mapping):
            raise CheckpointError(f"a checkpoint must be a dict, got {type(state).__name__}")
        missing = [k for k in _KEYS if k not in state]
        if missing:
            raise CheckpointError(
                f"checkpoint is missing {missing!r}; pass the dict state_dict() returned"
            )
        if state["version"] != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"checkpoint version {state['version']!r} is not supported "
                f"(this mrecord reads version {CHECKPOINT_VERSION})"
            )
        shuffle = state["shuffle"]
        try:
            mode = None if shuffle is None else Shuffle(shuffle)
        except ValueError:
            raise CheckpointError(
                f"checkpoint field 'shuffle' is not a shuffle mode: {shuffle!r}"
            ) from None
        fp = state["fingerprint"]
        if not (
            isinstance(fp, Mapping)
            and isinstance(fp.get("files"), list)
            and isinstance(fp.get("rows"), list)
            and len(fp["files"]) == len(fp["rows"])
        ):
            raise CheckpointError(f"checkpoint field 'fingerprint' is malformed: {fp!r}")
        return cls(
            epoch=_int(state, "epoch", 0),
            seed=_int(state, "seed", 0),
            shuffle=mode,
            samples_consumed=_int(state, "samples_consumed", 0),
            global_batch=_int(state, "global_batch", 1),
            num_canonical_nodes=_int(state, "num_canonical_nodes", 1),
            fingerprint={"files": list(fp["files"]), "rows": list(fp["rows"])},
        )

    def check_dataset(self, own: dict[str, list[Any]], seed: int, shuffle: Shuffle | None) -> None:
        """Raise CheckpointError unless this checkpoint was written for that dataset and order."""
        if own != self.fingerprint:
            raise CheckpointError(
                "the checkpoint was written for another dataset: it has files "
                f"{self.fingerprint['files']!r} with rows {self.fingerprint['rows']!r}, this "
                f"dataset has {own['files']!r} with rows {own['rows']!r}; resume with the "
                "same files"
            )
        if seed != self.seed or shuffle != self.shuffle:
            raise CheckpointError(
                f"the checkpoint's order is seed={self.seed!r}, shuffle={self.shuffle!r}; this "
                f"dataset has seed={seed!r}, shuffle={shuffle!r}: create it with the "
                "checkpoint's seed and shuffle to resume"
            )
