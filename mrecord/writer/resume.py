"""Durable checkpoints of a new dataset's uncommitted writer state, so a killed write continues.

A long conversion writes shard pages into ``<shard>.mrecord-partial`` files for hours
before its commit. :class:`Checkpointer` makes that work survive a kill: at a
checkpoint it fsyncs the partial files and records, in a sidecar folder next to the
dataset, everything a new :class:`~mrecord.writer.file_writer.FileWriter` needs to
go on exactly where the old one was::

    NAME.mrecord-resume/
        state.msgpack     the last durable checkpoint (replaced atomically: tmp, fsync, rename)
        <shard>.data      a hard link to <shard>.mrecord-partial: the shard's bytes; the first
                          state["shards"][i]["length"] of them are durable
        <shard>.pages     the page table, appended: per page its row count (<u4) and one
                          CHUNK_DTYPE record per field (offset, length, raw length, crc32, codec)
        pending-<seq>     rows buffered in memory, not yet in a page, at checkpoint ``seq``
                          (msgpack: per shard [rows, [one uncompressed chunk per field]])

``state.msgpack`` holds the caller's ``key`` (what the data is: source listing,
options; a resume with another key is refused), the dataset id, the shard cursor
``next_shard``, the caller's ``position`` (e.g. source batches consumed) and
``extra`` (caller state such as the problems found so far), and per shard its
durable length, page count and rows.

Why the resumed dataset has exactly the bytes of an uninterrupted run: pages are cut
by :class:`ShardWriter` as a pure function of the row sequence of its shard and of the
writer's calls (where the shards together hold ``PENDING_BYTES``, each writes what it
holds after the call: a function of the rows held, which a checkpoint restores), the
rows buffered at the checkpoint are handed back to the shard in the same order, and
the dataset id and shard cursor are restored; the ``.db`` files are written at
commit from the index values, which are read back from the durable pages.

Why nothing half-done is visible: the dataset's own names are only ever written by
the commit. The hard links keep the partial bytes when ``FileWriter`` removes its
partial files (abort, or the clean-up of the next open); a run that does not resume
removes the folder. After the commit the links point at the committed files, so
:meth:`Checkpointer.resume` refuses to touch a ``.data`` that is a committed file.

This module reaches into ``FileWriter`` / ``ShardWriter`` private state on purpose:
it is the writer package's one place that knows how to save and restore it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from mrecord.errors import CheckpointError, CorruptFileError, FormatError
from mrecord.format.chunks import decode_fixed, decode_var, encode_chunk
from mrecord.format.columnize import Columns
from mrecord.format.compression import checksum, decompress
from mrecord.format.layout import HEADER_SIZE, encode_header
from mrecord.format.metadata import CHUNK_DTYPE
from mrecord.format.schema import Field, FieldKind, StoredSchema
from mrecord.writer.file_writer import FileWriter
from mrecord.writer.shard_writer import ShardWriter

__all__ = [
    "CHECKPOINT_STEPS",
    "RESUME_SUFFIX",
    "Checkpointer",
    "ResumePoint",
    "read_resume_state",
    "remove_resume_state",
    "resume_dir",
    "set_dataset_id",
]

RESUME_SUFFIX = ".mrecord-resume"
CHECKPOINT_STEPS = ("synced", "pages", "pending", "state")
STATE_VERSION = 1
_STATE = "state.msgpack"
_VERIFY_LAST_PAGES = 16  # pages at the durable end whose every chunk is checksummed on resume


def _no_crash(step: str) -> None:
    """The default :data:`crash_hook`: do nothing."""


crash_hook: Callable[[str], None] = _no_crash
"""Called at each step of a checkpoint; a no-op unless a harness replaces it.

Steps: ``synced`` (shard bytes durable, nothing recorded), ``pages`` (page tables
appended), ``pending`` (the buffered rows written), ``state`` (the new state is
durable; the old pending file not yet removed). ``reliability/convert_crash.py``
installs a hook that SIGKILLs the process at a chosen step; product code never sets it.
"""


def resume_dir(file_name: str | os.PathLike[str]) -> Path:
    """The sidecar folder of the dataset created as ``file_name``."""
    path = Path(file_name)
    return path.with_name(path.name + RESUME_SUFFIX)


def remove_resume_state(file_name: str | os.PathLike[str]) -> None:
    """Delete the sidecar of ``file_name`` (its links only; committed files keep their names)."""
    shutil.rmtree(resume_dir(file_name), ignore_errors=True)


def read_resume_state(file_name: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last checkpoint of ``file_name``'s sidecar, or None when there is none."""
    path = resume_dir(file_name) / _STATE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        state = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several types for bad bytes
        raise CheckpointError(
            f"{str(path)!r} is not a readable resume checkpoint ({exc}); rerun without "
            "--resume to start the conversion over"
        ) from exc
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise CheckpointError(
            f"{str(path)!r} is not a version-{STATE_VERSION} resume checkpoint; rerun without "
            "--resume to start the conversion over"
        )
    return state


def set_dataset_id(writer: FileWriter, dataset_id: str) -> None:
    """Give a new, unwritten dataset the id ``dataset_id`` (32 hex digits).

    A resumed write keeps its first run's id; tests use it to compare two runs byte
    for byte.
    """
    if len(dataset_id) != 32 or any(c not in "0123456789abcdef" for c in dataset_id):
        raise CheckpointError(f"dataset id must be 32 lowercase hex digits, got {dataset_id!r}")
    if writer._shards is not None or writer._committed:
        raise CheckpointError("the dataset id can only be set before any row is written")
    writer._dataset_id = dataset_id


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed write goes on: the caller's ``position`` and ``extra`` of the
    checkpoint, and the ``rows`` written up to it."""

    position: int
    rows: int
    extra: dict[str, Any]


def _page_dtype(n_fields: int) -> np.dtype[Any]:
    return np.dtype([("rows", "<u4"), ("chunks", CHUNK_DTYPE, (n_fields,))])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _merged_pending(shard: ShardWriter) -> tuple[int, Columns]:
    """The rows ``shard`` buffers outside a page, as one set of columns."""
    parts = shard._pending
    n = sum(len(sizes) for sizes in shard._pending_sizes)
    columns: Columns = {}
    for f in shard.schema.fields:
        values = [p[f.name] for p in parts]
        if not values:
            columns[f.name] = []
        elif isinstance(values[0], np.ndarray):
            columns[f.name] = np.concatenate(values)
        else:
            columns[f.name] = [v for part in values for v in part]
    return n, columns


def _decode_values(field: Field, raw: Any, n: int) -> np.ndarray | list[Any]:
    """The values of one uncompressed chunk of ``n`` rows."""
    if field.kind is FieldKind.FIXED:
        fixed: np.ndarray = decode_fixed(field, raw, n).copy()
        return fixed
    head = decode_var(field, raw, n)
    data = memoryview(raw)[head.data_start :]
    offsets = head.offsets
    if field.kind is FieldKind.BYTES:
        return [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(n)]
    if field.kind is FieldKind.STRING:
        return [bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8") for i in range(n)]
    shapes = head.shapes_list
    return [
        np.frombuffer(data[offsets[i] : offsets[i + 1]], dtype=field.dtype).reshape(shapes[i])
        for i in range(n)
    ]


class Checkpointer:
    """Saves (:meth:`checkpoint`) and restores (:meth:`resume`) a new dataset's writer state.

    Use it with a :class:`FileWriter` that creates a dataset (not ``open_for_append``):
    ``Checkpointer.start(writer, key)`` for a fresh write, ``Checkpointer.resume(writer,
    key)`` to go on after a kill, then ``checkpoint(position, extra)`` between
    ``write_raw_data`` calls and :meth:`discard` once the commit is done.
    """

    def __init__(
        self, writer: FileWriter, key: Mapping[str, Any] | Callable[[], Mapping[str, Any]]
    ):
        if writer._committed:
            raise CheckpointError("checkpoints are for new datasets, not open_for_append")
        self._writer = writer
        self._given_key = key
        self._packed_key: dict[str, Any] | None = None
        self.dir = resume_dir(writer._dir / writer._dataset_name)
        self._seq = 0
        self._pages = [0] * len(writer._files)
        self._linked = False
        self._pending_file: str | None = None

    # -- fresh start and resume ---------------------------------------------------------------

    @property
    def _key(self) -> dict[str, Any]:
        """The key as a checkpoint stores it (asked for when first needed, see :meth:`start`)."""
        if self._packed_key is None:
            key = self._given_key() if callable(self._given_key) else self._given_key
            self._packed_key = msgpack.unpackb(msgpack.packb(dict(key)), raw=False)
        return self._packed_key

    @classmethod
    def start(
        cls, writer: FileWriter, key: Mapping[str, Any] | Callable[[], Mapping[str, Any]]
    ) -> Checkpointer:
        """Begin checkpointing a fresh write: any older sidecar of this dataset is removed.

        ``key`` may be a function returning it, called at the first checkpoint: a
        conversion's key holds a digest of every source file's size and time (0.3 s for
        20,000 files, cold), which is then worked out while the first rows are written."""
        self = cls(writer, key)
        remove_resume_state(writer._dir / writer._dataset_name)
        return self

    @classmethod
    def resume(cls, writer: FileWriter, key: Mapping[str, Any]) -> tuple[Checkpointer, ResumePoint]:
        """Restore ``writer`` to the last checkpoint of its sidecar.

        Raises :class:`CheckpointError` naming the file when there is no checkpoint,
        it was written for another ``key`` or dataset layout, or its durable bytes
        are missing or damaged.
        """
        self = cls(writer, key)
        state = read_resume_state(writer._dir / writer._dataset_name)
        state_file = self.dir / _STATE
        if state is None:
            raise CheckpointError(
                f"no checkpoint to resume from: {str(state_file)!r} does not exist; "
                "run without --resume to convert from the start"
            )
        self._check_key(state, state_file)
        names = [f.name for f in writer._files]
        shard_states = state["shards"]
        if [s["name"] for s in shard_states] != names:
            raise CheckpointError(
                f"{str(state_file)!r} is for the shard files "
                f"{[s['name'] for s in shard_states]!r}, this run writes {names!r}; "
                "rerun without --resume to start over"
            )
        writer._dataset_id = state["dataset_id"]
        writer._next_shard = int(state["next_shard"])
        shards = writer._start()
        pending = self._read_pending(state)
        for i, (shard, final, sstate) in enumerate(
            zip(shards, writer._files, shard_states, strict=True)
        ):
            self._restore_shard(shard, final, sstate, pending[i])
            self._pages[i] = int(sstate["pages"])
        self._linked = True
        self._seq = int(state["seq"])
        self._pending_file = state["pending"]
        return self, ResumePoint(int(state["position"]), int(state["rows"]), dict(state["extra"]))

    def _check_key(self, state: dict[str, Any], state_file: Path) -> None:
        old = state.get("key")
        if not isinstance(old, dict):
            raise CheckpointError(f"{str(state_file)!r} has no source key; rerun without --resume")
        for name in sorted(set(old) | set(self._key)):
            if old.get(name) != self._key.get(name):
                raise CheckpointError(
                    f"cannot resume: {str(state_file)!r} was written for {name} = "
                    f"{old.get(name)!r}, this run has {self._key.get(name)!r}; resume with the "
                    "same source and options, or rerun without --resume to start over"
                )

    def _read_pending(self, state: dict[str, Any]) -> list[tuple[int, list[bytes]]]:
        path = self.dir / str(state["pending"])
        try:
            doc = msgpack.unpackb(path.read_bytes(), raw=False)
        except FileNotFoundError as exc:
            raise CheckpointError(
                f"{str(path)!r} is missing (its checkpoint needs it); rerun without --resume"
            ) from exc
        except Exception as exc:  # msgpack raises several types for bad bytes
            raise CheckpointError(
                f"{str(path)!r} is damaged ({exc}); rerun without --resume"
            ) from exc
        return [(int(n), list(chunks)) for n, chunks in doc]

    def _restore_shard(
        self,
        shard: ShardWriter,
        final: Path,
        sstate: dict[str, Any],
        pending: tuple[int, list[bytes]],
    ) -> None:
        schema = shard.schema
        data = self.dir / (final.name + ".data")
        length, pages, rows = int(sstate["length"]), int(sstate["pages"]), int(sstate["rows"])
        if not data.is_file():
            raise CheckpointError(f"{str(data)!r} is missing; rerun without --resume")
        if final.exists() and os.path.samefile(data, final):
            raise CheckpointError(
                f"{str(data)!r} is the committed file {str(final)!r}: this conversion "
                "finished; nothing to resume"
            )
        if data.stat().st_size < length:
            raise CheckpointError(
                f"{str(data)!r} has {data.stat().st_size} bytes, fewer than the {length} its "
                "checkpoint made durable; rerun without --resume"
            )
        table = self._read_pages(final, len(schema.fields), pages)
        if int(table["rows"].sum()) != rows:
            raise CheckpointError(
                f"{str(self.dir / (final.name + '.pages'))!r} holds {int(table['rows'].sum())} "
                f"rows, its checkpoint says {rows}; rerun without --resume"
            )
        # Swap the empty partial the new writer made for the checkpointed bytes.
        shard.restore(
            data,
            length,
            [int(r) for r in table["rows"]],
            [np.array(table["chunks"][p]) for p in range(pages)],
            rows,
        )
        self._verify(shard, data, table, length)
        index_fields = self._writer._index_fields
        shard.restore_index_values(
            {name: self._read_index(shard, data, schema[name], table) for name in index_fields}
        )
        n, chunks = pending
        if n:
            columns: Columns = {
                f.name: _decode_values(f, raw, n)
                for f, raw in zip(schema.fields, chunks, strict=True)
            }
            shard.add(columns, n, index_fields)

    def _read_pages(self, final: Path, n_fields: int, pages: int) -> np.ndarray:
        path = self.dir / (final.name + ".pages")
        dtype = _page_dtype(n_fields)
        try:
            raw = path.read_bytes()[: pages * dtype.itemsize]
        except FileNotFoundError:
            raw = b""
        if len(raw) != pages * dtype.itemsize:
            raise CheckpointError(
                f"{str(path)!r} holds fewer than the {pages} pages its checkpoint made "
                "durable; rerun without --resume"
            )
        return np.frombuffer(raw, dtype=dtype)

    def _verify(self, shard: ShardWriter, data: Path, table: np.ndarray, length: int) -> None:
        """Check the header and the last pages' checksums of the durable prefix."""
        with open(data, "rb") as f:
            head = f.read(HEADER_SIZE)
        if head != encode_header():
            raise CheckpointError(f"{str(data)!r} does not start with an mrecord header")
        for p in range(max(0, len(table) - _VERIFY_LAST_PAGES), len(table)):
            for rec in table["chunks"][p]:
                self._read_chunk(shard, data, rec, length)

    @staticmethod
    def _read_chunk(shard: ShardWriter, data: Path, rec: Any, length: int) -> bytes:
        offset, size = int(rec["offset"]), int(rec["length"])
        if offset + size > length:
            raise CheckpointError(
                f"{str(data)!r}: a checkpointed chunk ends at byte {offset + size}, past the "
                f"{length} durable bytes; rerun without --resume"
            )
        with open(data, "rb") as f:  # the shard's partial: the same file, hard-linked
            f.seek(offset)
            stored = f.read(size)
        if checksum(stored) != int(rec["crc32"]):
            raise CheckpointError(
                f"{str(data)!r}: the chunk at byte {offset} fails its checksum; the partial "
                "file was damaged; rerun without --resume"
            )
        return stored

    def _read_index(self, shard: ShardWriter, data: Path, field: Field, table: np.ndarray) -> Any:
        """The values of ``field`` in every durable page of ``shard``, read back from it."""
        position = [f.name for f in shard.schema.fields].index(field.name)
        length = data.stat().st_size
        parts: list[Any] = []
        for p in range(len(table)):
            rec = table["chunks"][p][position]
            stored = self._read_chunk(shard, data, rec, length)
            try:
                raw = decompress(stored, int(rec["codec"]), int(rec["raw_length"]), 1 << 31)
            except FormatError as exc:
                raise CorruptFileError(
                    f"{str(data)!r}: chunk at byte {int(rec['offset'])}: {exc}"
                ) from exc
            parts.append(_decode_values(field, raw, int(table["rows"][p])))
        if not parts:
            return np.zeros(0, dtype=field.dtype) if field.kind is FieldKind.FIXED else []
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts)
        return [v for part in parts for v in part]

    # -- checkpoints ----------------------------------------------------------------------------

    @property
    def written_bytes(self) -> int:
        """Bytes in the shards' partial files so far (pages written)."""
        return sum(s.written for s in self._writer._shards or [])

    def checkpoint(self, position: int, extra: Mapping[str, Any] | None = None) -> None:
        """Make everything written so far durable and record it with ``position``.

        Call between ``write_raw_data`` calls. Once this returns, a kill at any
        instant can be resumed from here.
        """
        writer = self._writer
        shards = writer._shards
        if not shards:
            return
        if not self._linked:
            self.dir.mkdir(exist_ok=True)
            _fsync_dir(self.dir.parent)  # the sidecar folder's own name is durable
            for shard, final in zip(shards, writer._files, strict=True):
                link = self.dir / (final.name + ".data")
                link.unlink(missing_ok=True)
                os.link(shard.partial, link)
            self._linked = True
        seq = self._seq + 1
        shard_states = []
        pending_doc = []
        schema: StoredSchema = shards[0].schema
        dtype = _page_dtype(len(schema.fields))
        lengths = [shard.sync() for shard in shards]
        crash_hook("synced")
        for i, (shard, final) in enumerate(zip(shards, writer._files, strict=True)):
            pages = len(shard._page_rows)
            new = np.zeros(pages - self._pages[i], dtype=dtype)
            for j, p in enumerate(range(self._pages[i], pages)):
                new[j]["rows"] = shard._page_rows[p]
                new[j]["chunks"] = shard._chunks[p]
            log = self.dir / (final.name + ".pages")
            with open(log, "ab" if log.exists() else "wb") as f:
                f.truncate(self._pages[i] * dtype.itemsize)
                f.seek(self._pages[i] * dtype.itemsize)
                f.write(new.tobytes())
                f.flush()
                os.fdatasync(f.fileno())
            self._pages[i] = pages
            crash_hook("pages")
            n, columns = _merged_pending(shard)
            pending_doc.append([n, [encode_chunk(f, columns[f.name]) for f in schema.fields]])
            shard_states.append(
                {
                    "name": final.name,
                    "length": lengths[i],
                    "pages": pages,
                    "rows": shard.num_rows - n,
                }
            )
        pending_name = f"pending-{seq}"
        _write_durable(self.dir / pending_name, msgpack.packb(pending_doc, use_bin_type=True))
        crash_hook("pending")
        state = {
            "version": STATE_VERSION,
            "key": self._key,
            "dataset_id": writer._dataset_id,
            "next_shard": writer._next_shard,
            "position": int(position),
            "rows": sum(s.num_rows for s in shards),
            "extra": dict(extra or {}),
            "seq": seq,
            "pending": pending_name,
            "shards": shard_states,
        }
        tmp = self.dir / (_STATE + ".tmp")
        _write_durable(tmp, msgpack.packb(state, use_bin_type=True))
        _fsync_dir(self.dir)
        os.replace(tmp, self.dir / _STATE)
        _fsync_dir(self.dir)
        crash_hook("state")
        if self._pending_file is not None:
            with contextlib.suppress(OSError):
                (self.dir / self._pending_file).unlink()
        self._pending_file = pending_name
        self._seq = seq

    def discard(self) -> None:
        """Remove the sidecar (after the commit, or when the write is abandoned)."""
        crash_hook("discard")  # tests: killed after the publish, the sidecar still there
        remove_resume_state(self._writer._dir / self._writer._dataset_name)
