"""Turning the parts written by Ray's write tasks into the shard files of one dataset.

Each write task leaves one *part*: a complete shard file (header, pages, metadata,
trailer) under a staging name, whose metadata is a placeholder. On the driver,
:func:`plan_shards` maps the parts' pages to the dataset's shards, and the storage layer
builds each shard's partial file (``<final>.mrecord-partial``) from those page runs
(:func:`mrecord.storage.shard_output.assemble_shard`, via :func:`page_runs`); the
commit transaction then publishes every shard and ``.db`` at once. This module is
arithmetic on page directories only: it reads and writes no file.

Pages are never re-encoded: their bytes (and checksums) move as they are.

- ``shard_num=None``: one shard per non-empty part. The part file is renamed onto the
  shard's partial name and only its metadata and trailer are rewritten (no data copied).
- ``shard_num=k``: the pages of all parts, in task order, are cut into ``k`` contiguous
  runs of about equal row counts (whole pages, so shards differ by at most a page's rows);
  each shard's page bytes are copied into it (``copy_file_range``: in the kernel, or a
  reflink on filesystems that have them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mrecord.format.metadata import ShardMetadata
from mrecord.storage.shard_output import PageRun

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "Piece",
    "page_runs",
    "plan_shards",
    "shard_count_for_size",
]

DEFAULT_SHARD_SIZE = 256 << 20
"""The target shard size (bytes of pages) that picks the shard count when none is given.

Big enough that a dataset of a few GB has a handful of files (each with its ``.db``),
small enough that a large one has many shards for file-level shuffles and for ranks
and Ray read tasks to divide.
"""


@dataclass(frozen=True)
class Piece:
    """Pages ``start:stop`` of part ``part``, placed in a shard."""

    part: int
    start: int
    stop: int


def plan_shards(page_rows: list[np.ndarray], shard_num: int | None) -> list[list[Piece]]:
    """The pieces of every shard, in shard order (see the module docstring).

    ``page_rows[i]`` holds the rows of each page of part ``i``. Every page lands in
    exactly one shard, in part-then-page order, so global row order is task order.
    """
    if shard_num is None:
        whole = [[Piece(i, 0, len(rows))] for i, rows in enumerate(page_rows) if int(rows.sum())]
        return whole or [[]]
    empty = np.zeros(0, dtype=np.int64)
    flat_part = np.concatenate(
        [empty, *(np.full(len(rows), i, dtype=np.int64) for i, rows in enumerate(page_rows))]
    )
    flat_page = np.concatenate(
        [empty, *(np.arange(len(rows), dtype=np.int64) for rows in page_rows)]
    )
    rows = np.concatenate([empty, *(r.astype(np.int64) for r in page_rows)])
    total = int(rows.sum())
    mids = np.cumsum(rows) - rows / 2.0
    shard_of = (
        np.minimum(shard_num - 1, (mids * shard_num // max(total, 1)).astype(np.int64))
        if total
        else np.zeros(len(rows), dtype=np.int64)
    )
    plan: list[list[Piece]] = [[] for _ in range(shard_num)]
    start = 0
    for i in range(1, len(rows) + 1):
        if (
            i == len(rows)
            or shard_of[i] != shard_of[start]
            or flat_part[i] != flat_part[start]
            or flat_page[i] != flat_page[i - 1] + 1
        ):
            part = int(flat_part[start])
            plan[int(shard_of[start])].append(
                Piece(part, int(flat_page[start]), int(flat_page[i - 1]) + 1)
            )
            start = i
    return plan


def shard_count_for_size(part_bytes: list[int], shard_size: int, most: int) -> int:
    """How many shards of about ``shard_size`` bytes hold parts of ``part_bytes`` bytes.

    ``ceil(total / shard_size)``, at least 1 and at most ``most``: 1000 small rows are one
    shard however many blocks Ray cut them into.
    """
    total = sum(part_bytes)
    return max(1, min(most, -(-total // shard_size)))


def page_runs(pieces: list[Piece], parts: list[Path], metas: list[ShardMetadata]) -> list[PageRun]:
    """A shard's ``pieces`` as the page runs :func:`~mrecord.storage.shard_output.assemble_shard`
    builds it from."""
    return [PageRun(parts[p.part], metas[p.part], p.start, p.stop) for p in pieces]
