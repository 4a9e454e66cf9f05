"""An mrecord dataset as a conversion source: rewrite it with the current writer.

``mrecord convert mrecord OLD NEW`` reads every row of ``OLD`` (any shard file; its
siblings are found from its metadata, as :meth:`DatasetReader.open` does) and writes
them, in order, with this mrecord's writer: a dataset written by an older format (1.2
and before: no value tables) comes out in the current one (docs/FORMAT.md, "Versions").
The schema (types, shapes, each field's compression), the description (column features:
class names, images) and the index fields carry over, and so do the shard count and the
page size unless the write options say otherwise (:attr:`MrecordSource.write_defaults`).

Rows are read a batch at a time with :meth:`DatasetReader.read_rows` (columns in,
columns out: no row dicts). When the shard count is kept, the batches are cut so that
the writer puts every row back into its own shard at its own global id
(:meth:`MrecordSource.iter_batches_for`). The reader checks what it reads
(``verify="once"``): a damaged chunk raises its :class:`~mrecord.errors.ChecksumError`,
naming the file, page and offset, and the conversion stops with nothing written at the
destination; damaged bytes are never copied into a new dataset.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.errors import ArgumentError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.naming import PathArg, db_path

__all__ = ["MrecordSource"]


class MrecordSource(Source):
    """Every row of an mrecord dataset (any shard file, or a list of shard files): in
    global row order, or cut so that each row keeps its shard (see the module
    docstring)."""

    kind = "mrecord"

    def __init__(self, src: PathArg, *, check_index: bool = True):
        self.reader = DatasetReader.open(src, check_index=check_index)
        try:
            first = self.reader.shards[0].meta
            # The batches read each file's chunks once, in file order: no read-ahead of
            # a random order is planned, and the reader's default checks apply.
            super().__init__(
                name=str(self.reader.files[0] if _is_list(src) else src),
                schema=self.reader.schema.to_dict(),
                desc=first.desc,
                num_rows=self.reader.num_rows,
                index_fields=list(first.index_fields),
            )
        except BaseException:
            self.reader.close()
            raise
        self.files = list(self.reader.files)
        self.dataset_name = first.dataset_name
        # Its layout is kept unless the write options say otherwise.
        self.write_defaults = {"shard_num": len(self.files), "page_size": first.page_size}

    def row_bytes(self) -> int | None:
        """A row's raw bytes on average, from the shards' chunk directories."""
        return self.reader.mean_row_bytes or None

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield every row in global row order, ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        n = self.reader.num_rows
        for start in range(0, n, batch_rows):
            ids = np.arange(start, min(start + batch_rows, n), dtype=np.int64)
            yield dict(self.reader.read_rows(ids).columns)

    def iter_batches_for(self, shard_num: int, batch_rows: int) -> Iterator[Batch]:
        """Batches that give each row its old shard and its old global id when the
        dataset keeps its shard count (see :func:`_shard_runs`); otherwise
        :meth:`iter_batches` (the writer then cuts each batch into one run per shard)."""
        check_batch_rows(batch_rows)
        counts = self.reader.file_row_counts
        if shard_num == 1 or shard_num != len(counts) or not _writer_balanced(counts):
            yield from self.iter_batches(batch_rows)
            return
        starts = self.reader.file_starts[:-1]
        for ids in _shard_runs(counts, starts, max(1, batch_rows // shard_num)):
            yield dict(self.reader.read_rows(ids).columns)

    def fingerprint(self) -> str:
        """A digest of every shard file and its ``.db`` (names, sizes, modification
        times): a resumed conversion must read the same dataset."""
        digest = hashlib.sha256()
        for data in self.files:
            for path in (data, db_path(data)):
                st = path.stat()
                digest.update(f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    def check_destination(self, dst: str | os.PathLike[str], files: Sequence[Path]) -> None:
        """Refuse to write the dataset onto itself: the writer would replace the files
        this source is reading (with ``overwrite``), or share their lock and journal."""
        sources = [p.resolve() for p in self.files]
        same = [f for f in files if any(_same_file(f, s) for s in sources)]
        target = Path(dst).resolve()
        same_name = any(
            target.parent == s.parent and target.name == self.dataset_name for s in sources
        )
        if same or same_name:
            raise ArgumentError(
                f"the destination {str(dst)!r} is the dataset being converted "
                f"({', '.join(repr(str(p)) for p in self.files)}): converting a dataset onto "
                "itself would destroy it. Write it elsewhere: under another name, or under "
                "the same name in another folder, whose files (data and .db) can then be "
                "moved over the old ones (a shard names its siblings, so renamed files "
                "would not find each other)"
            )

    def close(self) -> None:
        """Unmap the shard files."""
        self.reader.close()


def _writer_balanced(counts: Sequence[int]) -> bool:
    """Whether shards of ``counts`` rows are what ``FileWriter`` writes for a new
    dataset: balanced within one row, the larger shards first (each call's extra rows
    go to the shards after the last call's, starting at shard 0; FORMAT.md, "Rows,
    pages and shards"). The Ray sink may write others."""
    return list(counts) == sorted(counts, reverse=True) and counts[0] - counts[-1] <= 1


def _shard_runs(counts: Sequence[int], starts: np.ndarray, step: int) -> Iterator[np.ndarray]:
    """Global ids of each ``write_raw_data`` call that puts shard ``j``'s rows, in
    order, into shard ``j`` again: ``k`` runs of ``step`` rows (one from each shard, in
    shard order: the writer cuts a call of ``k * step`` rows into exactly these runs),
    then one row from each shard that has one more (a call of ``e < k`` rows goes to
    shards ``0 .. e-1``, as every earlier call left the writer's next shard at 0)."""
    low = min(counts)
    for done in range(0, low, step):
        size = min(step, low - done)
        yield np.concatenate(
            [np.arange(s + done, s + done + size, dtype=np.int64) for s in starts.tolist()]
        )
    extra = [int(starts[j]) + low for j, n in enumerate(counts) if n > low]
    if extra:
        yield np.asarray(extra, dtype=np.int64)


def _is_list(src: PathArg) -> bool:
    return not isinstance(src, (str, os.PathLike))


def _same_file(path: Path, source: Path) -> bool:
    """Whether ``path`` (to be written) is ``source`` (being read), also through links."""
    if path.resolve() == source:
        return True
    try:
        return os.path.samefile(path, source)
    except OSError:  # ``path`` does not exist yet
        return False
