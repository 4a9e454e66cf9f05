"""The datasets a server owns: named on the command line, opened once, read-only.

A request names a dataset by its short name only; paths never come from a request.
``NAME=PATH`` names a dataset explicitly; a bare ``PATH`` is named after its file
(``train.mrecord0`` -> ``train``). Expensive answers (info with verify status, stats,
category lists) are computed once, on first request, and kept.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, MrecordError
from mrecord.format.schema import Field, FieldKind
from mrecord.maintenance.inspect import dataset_info
from mrecord.maintenance.stats import compute_stats
from mrecord.maintenance.verify import verify_dataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.layout import dataset_layout, measured_numbers, memory_budget
from mrecord.reader.mindpage import MindPage
from mrecord.serve.protocol.layout import LayoutAnswer, storage_to_json

__all__ = ["NAME_PATTERN", "ServedDataset", "open_datasets", "parse_dataset_args"]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""What a dataset name may look like (it is a URL path segment)."""

_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")
_MAX_CATEGORIES = 1000


def parse_dataset_args(args: Sequence[str]) -> dict[str, Path]:
    """``["NAME=PATH" | "PATH", ...]`` -> {name: path}; ArgumentError on a bad or repeated name."""
    out: dict[str, Path] = {}
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep:
            path, name = arg, _default_name(Path(arg))
        if not NAME_PATTERN.match(name):
            raise ArgumentError(
                f"dataset name {name!r} (from {arg!r}) must match {NAME_PATTERN.pattern}; "
                "name it explicitly with NAME=PATH"
            )
        if name in out:
            raise ArgumentError(f"two datasets are named {name!r}; name one with NAME=PATH")
        out[name] = Path(path)
    if not out:
        raise ArgumentError("name at least one dataset to serve")
    return out


def _default_name(path: Path) -> str:
    name = path.name.rstrip("0123456789")
    for suffix in (".mrecord", ".mindrecord"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


@dataclass
class ServedDataset:
    """One named dataset: its reader and the answers computed from it."""

    name: str
    path: Path
    reader: DatasetReader
    _info_lock: threading.Lock = field(default_factory=threading.Lock)
    _stats_lock: threading.Lock = field(default_factory=threading.Lock)
    _page_lock: threading.Lock = field(default_factory=threading.Lock)
    _layout_lock: threading.Lock = field(default_factory=threading.Lock)
    _info: dict[str, Any] | None = None
    _stats: dict[str, Any] | None = None
    _page: MindPage | None = None
    _layout: LayoutAnswer | None = None
    _categories: dict[str, dict[str, Any]] = field(default_factory=dict)
    _row_bytes: dict[str, float] = field(default_factory=dict)
    _verify_state: dict[str, Any] = field(default_factory=lambda: {"state": "not started"})

    @classmethod
    def open(cls, name: str, path: Path) -> ServedDataset:
        """Open the dataset at ``path`` (every shard, checksums checked once per page)."""
        return cls(name, path, DatasetReader.open(path, verify="once"))

    def value_bytes_per_row(self, column: str) -> float:
        """The average bytes of one row's value of ``column``, decompressed, from the
        shards' page directories (nothing read): what a block of it will hold."""
        cached = self._row_bytes.get(column)
        if cached is None:
            rows = max(1, self.reader.num_rows)
            total = 0
            for shard in self.reader.shards:
                total += shard.meta.raw_bytes(shard.field_index(column), values_only=True)
            cached = self._row_bytes[column] = total / rows
        return cached

    def close(self) -> None:
        """Release the files."""
        self.reader.close()
        if self._page is not None:
            self._page.close()

    # -- summaries -----------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """What ``GET /api/datasets`` lists for this dataset (metadata only, cheap)."""
        return {
            "name": self.name,
            "rows": self.reader.num_rows,
            "shards": len(self.reader.shards),
            "bytes": sum(s.size for s in self.reader.shards),
            "schema": [{"name": f.name, **f.to_dict()} for f in self.reader.schema.fields],
        }

    def info(self, start_verify: bool = False) -> dict[str, Any]:
        """``mrecord info``'s content plus verify status, image columns and row sizes.

        ``verify`` is ``{"state": "not started"}`` until a call with ``start_verify`` (the
        web page's) starts a background ``verify_dataset``, which reads every page; then
        ``{"state": "running"}`` until it finishes, then ``{"state": "done", "ok",
        "pages_checked", "problems"}``. Programs asking for the info (``RemoteDataset``
        does, to learn the schema) start nothing: a server whose data is larger than its
        memory, verifying it all on the first client's arrival, read its whole dataset
        through a page cache that could not keep it, beside the reads its clients waited
        on (a server in a 300 MB group then served 22-24 rows/s instead of thousands).
        """
        with self._info_lock:
            if self._info is None:
                info = dataset_info(self.path)
                for entry in info["files"]:
                    entry["file"] = Path(entry["file"]).name  # never disclose server paths
                info["name"] = self.name
                info["image_columns"] = self._image_columns()
                rows = max(1, self.reader.num_rows)
                info["row_bytes"] = {f["name"]: f["raw_bytes"] / rows for f in info["schema"]}
                self._info = info
            if start_verify and self._verify_state["state"] == "not started":
                self._verify_state = {"state": "running"}
                threading.Thread(
                    target=self._verify, name=f"mrecord-verify-{self.name}", daemon=True
                ).start()
            return {**self._info, "verify": dict(self._verify_state)}

    def _verify(self) -> None:
        try:
            report = verify_dataset(self.path)
            state: dict[str, Any] = {
                "state": "done",
                "ok": bool(report.ok),
                "pages_checked": int(report.pages_checked),
                "problems": [_strip_paths(str(p), self.reader) for p in report.problems],
            }
        except Exception as exc:  # report it in the answer; the server keeps serving
            state = {
                "state": "done",
                "ok": False,
                "pages_checked": 0,
                "problems": [_strip_paths(f"{type(exc).__name__}: {exc}", self.reader)],
            }
        self._verify_state = state

    def layout(self) -> dict[str, Any]:
        """The ``layout`` answer (:mod:`~mrecord.serve.protocol.layout`): page boundaries,
        bytes and this process's memory budget, taken once (metadata only, no data read)."""
        with self._layout_lock:
            if self._layout is None:
                facts = dataset_layout(self.reader)
                self._layout = LayoutAnswer(
                    facts.num_rows, facts.data_bytes, facts.page_starts, memory_budget()
                )
            return self._layout.to_json()

    def storage(self) -> dict[str, float | None]:
        """The ``storage`` answer: the device under the files, measured once per device
        (``mrecord.storage.probe``; about half a second of direct I/O the first time)."""
        return storage_to_json(measured_numbers(self.reader))

    def sweep_window(self, columns: list[str], rows: int, budget: int) -> int:
        """Rows per window of a reader's sweep (``GET .../sweep``): the reader's rule
        (``DatasetReader.sweep_rows``) for its ``budget`` bytes and ``rows`` rows, weighed
        against this server's files, memory and device (measured once, the first time)."""
        return self.reader.sweep_rows(columns, rows, budget=budget)

    def stats(self) -> dict[str, Any]:
        """``mrecord stats --json``'s content (every row read once, then kept)."""
        with self._stats_lock:
            if self._stats is None:
                fields = [(f.name, f.type, f.shape) for f in self.reader.schema.fields]
                labels = ("label", *self.index_fields)
                result = compute_stats(fields, self.reader.iter_blocks(4096), label_fields=labels)
                self._stats = {"name": self.name, "rows": self.reader.num_rows, "fields": result}
            return self._stats

    @property
    def index_fields(self) -> list[str]:
        """The fields MindPage can search by (the dataset's ``add_index`` fields)."""
        return list(self.reader.shards[0].meta.index_fields)

    # -- search ---------------------------------------------------------------------------------

    def categories(self, field_name: str) -> dict[str, Any]:
        """Every value of an index field with its row count (MindPage.read_category_info)."""
        with self._page_lock:
            if field_name not in self._categories:
                page = self._mindpage()
                page.set_category_field(field_name)
                info = json.loads(page.read_category_info())
                cats = info["categories"]
                info["truncated"] = len(cats) > _MAX_CATEGORIES
                info["categories"] = cats[:_MAX_CATEGORIES]
                info["total_categories"] = len(cats)
                self._categories[field_name] = info
            return self._categories[field_name]

    def search_ids(self, field_name: str, raw_value: str, page: int, num_row: int) -> np.ndarray:
        """Ids of rows whose index field equals ``raw_value`` (parsed by the field's type)."""
        value = parse_field_value(self.reader.schema[field_name], raw_value)
        with self._page_lock:
            mp = self._mindpage()
            mp.set_category_field(field_name)
            return mp.read_ids_at_page_by_name(value, page, num_row)

    def _mindpage(self) -> MindPage:
        if self._page is None:
            # Over the served reader, not the path: after an append the .db holds the new
            # generation's rows, and the ids must be those of the rows this reader reads.
            self._page = MindPage.over(self.reader)
        return self._page

    # -- images ---------------------------------------------------------------------------------

    def _image_columns(self) -> list[str]:
        out = []
        for fld in self.reader.schema.fields:
            if fld.kind is FieldKind.FIXED and is_image_shape(fld):
                out.append(fld.name)
            elif fld.kind is FieldKind.BYTES and self.reader.num_rows:
                try:
                    first = self.reader.read_rows([0], columns=[fld.name]).columns[fld.name][0]
                except MrecordError:
                    # A damaged first page: the column is not offered as images, and the
                    # rest of the answer (and every other page) stays readable; verify
                    # reports the damage.
                    continue
                if bytes(first[:8]).startswith(_IMAGE_MAGIC) or _is_webp(bytes(first[:12])):
                    out.append(fld.name)
        return out


def is_image_shape(fld: Field) -> bool:
    """True for uint8 arrays shaped like a picture: HW, HWC or CHW with C in 1, 3, 4."""
    shape = fld.row_shape
    if fld.dtype != np.uint8 or len(shape) not in (2, 3):
        return False
    if len(shape) == 2:
        return min(shape) >= 2
    return shape[2] in (1, 3, 4) or shape[0] in (1, 3, 4)


def _is_webp(head: bytes) -> bool:
    return head[:4] == b"RIFF" and head[8:12] == b"WEBP"


def parse_field_value(fld: Field, raw: str) -> Any:
    """A search value from its text, by the field's type; ArgumentError when it does not fit."""
    try:
        if fld.type.startswith(("int", "uint")):
            return int(raw)
        if fld.type.startswith("float"):
            return float(raw)
        if fld.type == "bytes":
            return bytes.fromhex(raw)
    except ValueError as exc:
        raise ArgumentError(
            f"value {raw!r} does not fit field {fld.name!r} of type {fld.type}"
        ) from exc
    return raw


def _strip_paths(text: str, reader: DatasetReader) -> str:
    for path in reader.files:
        text = text.replace(str(path.parent) + "/", "")
    return text


def open_datasets(paths: dict[str, Path]) -> dict[str, ServedDataset]:
    """Open every dataset (closing those already opened when one fails)."""
    opened: dict[str, ServedDataset] = {}
    try:
        for name, path in paths.items():
            opened[name] = ServedDataset.open(name, path)
    except BaseException:
        for ds in opened.values():
            ds.close()
        raise
    return opened
