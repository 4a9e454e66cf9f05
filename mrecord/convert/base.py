"""What every conversion source provides: a schema and batches of columns.

A :class:`Source` reads one kind of input (CIFAR-10 binaries, MNIST idx files,
an image folder, a CSV, NumPy arrays, MindRecord files) and yields its rows in
columnar batches: ``{column: np.ndarray of shape (n, ...)}`` for fixed-shape
numbers, ``{column: list}`` for bytes, strings and variable-shape arrays. The
batches go straight into ``FileWriter.write_raw_data`` (its columnar fast path).
Nothing here writes files; :mod:`mrecord.convert.driver` does.
"""

from __future__ import annotations

import hashlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, ConversionError

if TYPE_CHECKING:
    from mrecord.convert.parallel import BatchPlan

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_BATCH_ROWS",
    "Batch",
    "Source",
    "check_field_name",
    "file_fingerprint",
    "stat_files",
]

Batch = dict[str, ColumnValues]
"""One batch of rows, column by column."""

DEFAULT_BATCH_ROWS = 4096
"""Rows per batch unless a caller asks otherwise (fewer where rows are large:
:data:`BATCH_BYTES`)."""

BATCH_BYTES = 8 << 20
"""A default batch holds at most this many bytes of rows where the source knows their
size (:meth:`Source.row_bytes`). Up to four batches are in memory at once (the one
written, those read ahead), and 4,096 rows of 100 KB images were 410 MB each:
converting 2.4 GB of them got the converter OOM-killed in a 600 MB memory group; with
batches of 32 MiB, 200 MB of them in a 160 MB group. A fixed size, not a share of the
memory budget: a batch is a ``write_raw_data`` call, which the writer cuts into one run
per shard, so the batch size is part of the dataset's layout, and the same command
writes the same dataset on every machine. 8 MiB batches converted the 2.4 GB in 0.97x
the time of 32 MiB ones (four alternating pairs)."""

_FIELD_NAME = re.compile(r"^[0-9A-Za-z_]+$")


def check_field_name(name: str, *, what: str) -> str:
    """Return ``name`` if it is a valid mrecord field name, else raise ConversionError."""
    if not _FIELD_NAME.match(name):
        raise ConversionError(
            f"{what} {name!r} is not a valid field name (letters, digits and _ only); "
            "rename it in the source"
        )
    return name


class Source(ABC):
    """A conversion source (see the module docstring).

    Attributes set by subclasses: ``schema`` (an mrecord schema dict),
    ``desc`` (the dataset description, often JSON), ``index_fields`` (suggested
    ``add_index`` fields), ``num_rows`` (``None`` when unknown up front) and
    ``problems`` (human-readable notes about input that was skipped, filled while
    iterating; never silently empty when something was left out) and
    ``write_defaults`` (write options the source suggests, used where the caller gives
    none: an mrecord source keeps its ``shard_num`` and ``page_size``; empty by default).
    """

    kind: ClassVar[str] = ""
    # Rows per batch when the caller gives none (``WriteOptions.batch_rows=None``).
    default_batch_rows: ClassVar[int] = DEFAULT_BATCH_ROWS

    def __init__(
        self,
        *,
        name: str,
        schema: dict[str, dict[str, Any]],
        desc: str | None = None,
        num_rows: int | None = None,
        index_fields: Sequence[str] = (),
    ):
        self.name = name
        self.schema = schema
        self.desc = desc
        self.num_rows = num_rows
        self.index_fields = list(index_fields)
        self.problems: list[str] = []
        self.write_defaults: dict[str, Any] = {}

    def row_bytes(self) -> int | None:
        """A row's bytes as read, on average, where the source knows it without reading
        its rows (its metadata); None where it does not (the default)."""
        return None

    def batch_rows_default(self) -> int:
        """Rows per batch when the caller gives none: ``default_batch_rows``, fewer where
        that many rows would hold more than :data:`BATCH_BYTES` (:meth:`row_bytes`)."""
        rows = self.default_batch_rows
        size = self.row_bytes()
        if size:
            rows = max(1, min(rows, BATCH_BYTES // size))
        return rows

    @abstractmethod
    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield every row once, in order, ``batch_rows`` at a time (the last may be short)."""

    def iter_batches_for(self, shard_num: int, batch_rows: int) -> Iterator[Batch]:
        """The batches to write into a dataset of ``shard_num`` shards (what the
        converter reads when the source has no :meth:`plan`). By default
        :meth:`iter_batches`; a source whose rows already sit in shards (mrecord) may
        cut its batches so that the writer puts each row back into its own shard."""
        return self.iter_batches(batch_rows)

    def plan(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> BatchPlan[Any, Any] | None:
        """The work of :meth:`iter_batches` cut into independent pieces that worker
        processes can run (see :mod:`mrecord.convert.parallel`), or None when this
        source reads its rows one after another (the default). The plan's batches
        must be exactly the ones :meth:`iter_batches` yields."""
        return None

    def check_destination(self, dst: str | os.PathLike[str], files: Sequence[Path]) -> None:
        """Raise a typed error when writing the dataset ``dst`` (data files ``files``)
        would harm this source, before anything is written (default: nothing to check;
        an mrecord source refuses its own dataset)."""
        return None

    def fingerprint(self) -> str:
        """A digest of the input files (names, sizes, modification times): a conversion
        is resumed only from a checkpoint of the same input. Sources whose options
        change the rows without changing the schema add them (see ImageFolderSource)."""
        return file_fingerprint(self.name)

    def resume_state(self, position: int) -> dict[str, Any]:
        """What this source has to remember for a conversion resumed at batch
        ``position`` (JSON-able): the state of the batches before it, which are written.
        The converter reads a few batches ahead of what it writes, so anything noted
        while reading must be kept apart by batch (see ImageFolderSource). By default
        the problems noted so far (a base source notes them before its first batch)."""
        return {"problems": list(self.problems)}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Take back what :meth:`resume_state` returned at the checkpoint resumed from
        (before the first batch is read again); raise
        :class:`~mrecord.errors.CheckpointError` when the input changed in a way that
        makes the rows already written differ from what a new run would write."""
        self.problems = [str(p) for p in state.get("problems", [])]

    def close(self) -> None:
        """Release files held open (default: nothing to do)."""
        return None

    def __enter__(self) -> Source:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def check_batch_rows(batch_rows: int) -> int:
    """Validate a ``batch_rows`` argument."""
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ArgumentError(f"batch_rows must be an int >= 1, got {batch_rows!r}")
    return batch_rows


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """A digest of the names, sizes and modification times of the file ``path`` or of
    every file under the folder ``path`` (a changed source is not resumed)."""
    root = Path(path)
    digest = hashlib.sha256()
    if root.is_file():
        st = root.stat()
        digest.update(f"{root.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()
    top = os.fspath(root)
    names: list[str] = []  # relative, "/"-separated, in walk order (folders sorted)
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        rel = os.path.relpath(folder, top).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        names.extend(prefix + name for name in sorted(files))
    stats = stat_files([os.path.join(top, n) for n in names])
    for rel_name, stat in zip(names, stats, strict=True):
        if stat is not None:
            digest.update(f"{rel_name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def stat_files(paths: Sequence[str]) -> list[os.stat_result | None]:
    """``os.stat`` of each path, in order; None for one that cannot be stated (gone).

    A million files' stats, cold, are a million small reads: a few threads, each
    stating its own share in a loop (one task per thread, not one per file)."""
    step = -(-len(paths) // _STAT_THREADS) or 1
    with ThreadPoolExecutor(_STAT_THREADS) as pool:
        shares = pool.map(_stats, [paths[i : i + step] for i in range(0, len(paths), step)])
        return [st for share in shares for st in share]


_STAT_THREADS = 8


def _stats(paths: Sequence[str]) -> list[os.stat_result | None]:
    """``os.stat`` of each path; None for a file gone since the listing (skipped)."""
    out: list[os.stat_result | None] = []
    for path in paths:
        try:
            out.append(os.stat(path))
        except OSError:
            out.append(None)
    return out
