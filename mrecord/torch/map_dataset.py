"""``MapDataset``: an mrecord dataset as a map-style ``torch.utils.data.Dataset``.

``__getitems__`` makes DataLoader fetch a whole batch with one vectorized
``DatasetReader.read_rows``; any sampler works, ``DistributedSampler`` included::

    ds = MapDataset("train.mrecord")
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(ds, batch_size=64, sampler=sampler, num_workers=4)

With ``on_error="skip"`` a batched fetch (``__getitems__``) returns the batch without the
rows of damaged chunks (shorter, never empty: a batch whose every row is damaged gets the
next readable rows by id instead), and ``ds[i]`` of a damaged row gives the next readable
row after it; the number of batches never changes, so DDP ranks stay in lockstep
(:mod:`mrecord.torch.skips`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mrecord.errors import RowIndexError
from mrecord.torch._common import DatasetFiles, ReaderHandle, block_samples, in_worker, torch
from mrecord.torch.plan import sample_rng
from mrecord.torch.skips import SkipLog, scan_windows, substitutes
from mrecord.torch.streaming import Transform

__all__ = ["MapDataset"]


class MapDataset(torch.utils.data.Dataset[Any]):
    """Random access by global row id.

    Args:
        dataset_files: one shard file (its siblings are read too) or a list of files.
        columns: columns to read (default all).
        transform: ``transform(sample, rng) -> sample``, ``rng`` seeded from
            (seed, epoch, row id); call :meth:`set_epoch` to vary it per epoch.
        seed: seed of the transform randomness.
        verify: checksum policy, as for ``DatasetReader.open``.
        storage_options: for a URL (``s3://...``): passed to fsspec (docs/REMOTE.md).
        on_error: a read that meets a damaged chunk: ``"raise"`` (default) raises the
            error naming file, page and bytes; ``"skip"`` leaves that chunk's rows out
            (``"warn"`` also warns once per chunk): see the module docstring;
            :attr:`skipped_rows` and :meth:`skip_report` count them, DataLoader
            workers included.
    """

    def __init__(
        self,
        dataset_files: DatasetFiles,
        columns: Sequence[str] | None = None,
        transform: Transform | None = None,
        *,
        seed: int = 0,
        verify: str = "once",
        storage_options: Mapping[str, Any] | None = None,
        on_error: str = "raise",
    ) -> None:
        super().__init__()
        self._skips = SkipLog(on_error)
        self._handle = ReaderHandle(dataset_files, columns, verify, storage_options)
        self._num_rows = self._handle.reader.num_rows
        self.transform = transform
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the transform randomness is drawn for."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self._num_rows

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The samples at ``indices`` from one vectorized read."""
        ids = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = self._num_rows
        if len(ids) and (ids.min() < -n or ids.max() >= n):
            bad = ids[(ids < -n) | (ids >= n)][0]
            raise RowIndexError(f"index {int(bad)} is out of range for {n} rows")
        ids = np.where(ids < 0, ids + n, ids)
        in_worker()  # freezes inherited objects once per worker (see _common.in_worker)
        reader = self._handle.reader
        block, lost, _ = self._skips.read(reader.read_rows, ids)
        if lost.all() and len(ids):
            # Nothing of the batch is readable: the next readable rows by id keep it whole.
            found = substitutes(
                reader.read_rows,
                scan_windows(n, (int(ids[-1]) + 1) % n, lambda k: k),
                len(ids),
                "the dataset",
            )
            block = reader.read_rows(found)
            ids = found
        else:
            ids = ids[~lost]
        samples = block_samples(block)
        if self.transform is None:
            return samples
        return [
            self.transform(s, sample_rng(self.seed, self.epoch, int(i)))
            for s, i in zip(samples, ids.tolist(), strict=True)
        ]

    @property
    def skipped_rows(self) -> list[int]:
        """Row ids skipped as damaged so far (``on_error``), DataLoader workers included."""
        return self._skips.skipped_rows

    def skip_report(self) -> str:
        """How many rows ``on_error`` skipped, naming the damaged files and pages."""
        return self._skips.report()

    def __repr__(self) -> str:
        return f"MapDataset({self._num_rows} rows)"
