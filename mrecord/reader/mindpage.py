"""``MindPage``: browse rows by the value of an indexed field, served from the ``.db`` files.

::

    page = MindPage("data.mrecord")
    page.get_category_fields()            # ['label', 'file_name']  (the add_index fields)
    page.set_category_field("label")
    page.read_category_info()             # JSON: every value with an id and a row count
    page.read_at_page_by_name(3, page=0, num_row=10)   # first 10 rows whose label is 3

Field names are checked against the dataset's index fields before they reach SQL,
and every value is passed as a query parameter.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError, CorruptFileError, RuntimeArgumentError, WrongTypeError
from mrecord.format.index_layout import ROWS_TABLE, index_column
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.index_db import query_index_db

__all__ = ["MindPage"]


class MindPage:
    """Page through the rows of one category (a value of an indexed field)."""

    def __init__(self, file_name: str | os.PathLike[str], num_consumer: int = 4):
        if isinstance(num_consumer, bool) or not isinstance(num_consumer, int) or num_consumer < 1:
            raise ArgumentError(f"num_consumer must be an int >= 1, got {num_consumer!r}")
        self._setup(DatasetReader.open(file_name), owns_reader=True)

    @classmethod
    def over(cls, reader: DatasetReader) -> MindPage:
        """A MindPage answering from ``reader``'s snapshot: the generation it opened, so its
        ids and the rows ``reader`` reads agree after later appends (``close`` leaves
        ``reader`` open)."""
        page = cls.__new__(cls)
        page._setup(reader, owns_reader=False)
        return page

    def _setup(self, reader: DatasetReader, *, owns_reader: bool) -> None:
        self._reader = reader
        self._owns_reader = owns_reader
        self._fields = list(self._reader.shards[0].meta.index_fields)
        self._category: str | None = None
        self._categories: list[tuple[Any, int]] | None = None
        self._counts: OrderedDict[tuple[str, Any], list[int]] = OrderedDict()

    def get_category_fields(self) -> list[str]:
        """The fields that can serve as categories (the dataset's ``add_index`` fields)."""
        return list(self._fields)

    def set_category_field(self, category_field: str) -> None:
        """Choose the field whose values are the categories."""
        if category_field not in self._fields:
            raise ArgumentError(
                f"category field {category_field!r} is not an indexed field; "
                f"choose one of {self._fields!r} (FileWriter.add_index decides them)"
            )
        self._category = category_field
        self._categories = None

    @property
    def candidate_fields(self) -> list[str]:
        """The fields a category can be chosen from (the ``add_index`` fields; MindSpore 2.x)."""
        return self.get_category_fields()

    @property
    def category_field(self) -> str | None:
        """The current category field (None until set); assigning it validates the field."""
        return self._category

    @category_field.setter
    def category_field(self, category_field: str) -> None:
        self.set_category_field(category_field)

    def read_category_info(self) -> str:
        """JSON text: ``{"category_field", "categories": [{"id", "name", "count"}]}``."""
        field = self._need_field()
        cats = self._load_categories()
        return json.dumps(
            {
                "category_field": field,
                "categories": [
                    {"id": i, "name": _jsonable(name), "count": count}
                    for i, (name, count) in enumerate(cats)
                ],
            }
        )

    def read_at_page_by_id(self, category_id: int, page: int, num_row: int) -> list[dict[str, Any]]:
        """Rows ``page*num_row ..`` of the category with this id (see read_category_info)."""
        cats = self._load_categories()
        if isinstance(category_id, bool) or not isinstance(category_id, int):
            raise WrongTypeError(f"category_id must be an int, got {category_id!r}")
        if not 0 <= category_id < len(cats):  # MindSpore: RuntimeError
            raise RuntimeArgumentError(
                f"category_id {category_id} is out of range: there are {len(cats)} categories"
            )
        return self.read_at_page_by_name(cats[category_id][0], page, num_row)

    def read_at_page_by_name(
        self, category_name: Any, page: int, num_row: int
    ) -> list[dict[str, Any]]:
        """Rows ``page*num_row ..`` whose category field equals ``category_name``."""
        block = self._reader.read_rows(self.read_ids_at_page_by_name(category_name, page, num_row))
        return list(block.iter_rows())

    def read_ids_at_page_by_name(self, category_name: Any, page: int, num_row: int) -> np.ndarray:
        """The global row ids of :meth:`read_at_page_by_name`'s rows (int64, ascending)."""
        field = self._need_field()
        for name, value in (("page", page), ("num_row", num_row)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise WrongTypeError(f"{name} must be an int, got {value!r}")
        if page < 0 or num_row < 1:
            raise ArgumentError(
                f"page must be >= 0 and num_row >= 1, got page={page}, num_row={num_row}"
            )
        return self._page_ids(field, _sql_value(category_name), page * num_row, num_row)

    def close(self) -> None:
        """Release the dataset's files (not those of a reader given to :meth:`over`)."""
        if self._owns_reader:
            self._reader.close()

    # -- internals ----------------------------------------------------------------------------

    def _need_field(self) -> str:
        if self._category is None:
            raise ArgumentError("call set_category_field first")
        return self._category

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[list[tuple[Any, ...]]]:
        """Run ``sql`` on every shard's ``.db``; one result list per shard, in shard order."""
        # The first parameter is the shard's row count in this reader's snapshot: an
        # append committed since it opened adds rows to the .db that the reader must not see.
        return [
            query_index_db(shard.path, sql, (shard.meta.num_rows, *params))
            for shard in self._reader.shards
        ]

    def _load_categories(self) -> list[tuple[Any, int]]:
        field = self._need_field()
        if self._categories is None:
            counts: dict[Any, int] = {}
            column = index_column(field)
            sql = f"SELECT {column}, COUNT(*) FROM {ROWS_TABLE} WHERE row_id < ? GROUP BY {column}"
            for rows in self._query(sql):
                for value, count in rows:
                    counts[value] = counts.get(value, 0) + int(count)
            try:
                self._categories = sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0]))
            except TypeError as exc:  # a damaged .db: e.g. a blob among the strings
                kinds = ", ".join(sorted({type(v).__name__ for v in counts}))
                first = str(self._reader.shards[0].path)
                raise CorruptFileError(
                    f"the .db index of field {field!r} holds values of mixed types ({kinds}); a "
                    f".db of {first!r} is damaged: rebuild it with `mrecord reindex {first}`",
                    path=first,
                ) from exc
        return self._categories

    def _page_ids(self, field: str, value: Any, first: int, count: int) -> np.ndarray:
        """Global ids of the rows ``first .. first + count - 1`` (in row order) whose
        ``field`` is ``value``: each shard's ``.db`` asked for its part of them alone
        (``LIMIT`` / ``OFFSET`` over the field's index), the shards before it for how many
        they hold (:meth:`_shard_counts`). Fetching the whole category for each page held
        every id of it as Python objects: a page of 256 rows of a 2M-row category took
        2.5 s and ~180 MB, and 20 pages got a reader in a 200 MB memory group killed."""
        column = index_column(field)
        sql = (
            f"SELECT row_id FROM {ROWS_TABLE} WHERE row_id < ? AND {column} = ? "
            "ORDER BY row_id LIMIT ? OFFSET ?"
        )
        shards = self._reader.shards
        counts = self._shard_counts(field, value) if len(shards) > 1 else [0]
        parts = []
        for start, shard, held in zip(
            self._reader.file_starts.tolist(), shards, counts, strict=False
        ):
            if count <= 0:
                break
            if shard is not shards[-1] and first >= held:
                first -= held  # every row of this shard's part comes before the page
                continue
            rows = query_index_db(shard.path, sql, (shard.meta.num_rows, value, count, first))
            parts.append(np.array([r[0] for r in rows], dtype=np.int64) + start)
            count -= len(rows)
            first = 0
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _shard_counts(self, field: str, value: Any) -> list[int]:
        """How many rows of each shard (in this reader's snapshot) have ``field`` equal to
        ``value``, counted over the field's index; the last ``_COUNTS_KEPT`` values' kept."""
        key = (field, value)
        kept = self._counts.get(key)
        if kept is None:
            sql = (
                f"SELECT COUNT(*) FROM {ROWS_TABLE} WHERE row_id < ? AND {index_column(field)} = ?"
            )
            kept = [int(rows[0][0]) for rows in self._query(sql, (value,))]
            self._counts[key] = kept
            while len(self._counts) > _COUNTS_KEPT:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(key)
        return kept


_COUNTS_KEPT = 256
"""Category values whose per-shard row counts a ``MindPage`` keeps (paging through one
category asks for them on every page)."""


def _sql_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _jsonable(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value
