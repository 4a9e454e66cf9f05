"""MindRecord files written by MindSpore as a conversion source.

Fields keep their names, types and shapes (MindSpore's six types all exist in
mrecord); an array field with more than one ``-1`` in its shape is imported flat
with shape ``[-1]``, because MindRecord does not store the sizes of those
dimensions. The description and the index fields are carried over.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from mrecord.convert.base import DEFAULT_BATCH_ROWS, Batch, Source, check_batch_rows
from mrecord.convert.mindrecord import MindRecordDataset

__all__ = ["MindRecordSource"]


class MindRecordSource(Source):
    """All shards of a MindRecord dataset (give any shard file) → the same rows in mrecord."""

    kind = "mindrecord"

    def __init__(self, src: str | os.PathLike[str], *, check_index: bool = True):
        self.dataset = MindRecordDataset.open(src, check_index=check_index)
        schema: dict[str, dict[str, Any]] = {}
        for f in self.dataset.fields:
            entry = f.to_dict()
            if f.shape is not None and list(f.shape).count(-1) > 1:
                entry["shape"] = [-1]
            schema[f.name] = entry
        scalars = {f.name for f in self.dataset.fields if f.type != "bytes" and f.shape is None}
        super().__init__(
            name=str(src),
            schema=schema,
            desc=self.dataset.desc or None,
            num_rows=self.dataset.num_rows,
            index_fields=[n for n in self.dataset.index_fields if n in scalars],
        )

    def row_bytes(self) -> int | None:
        """A row's bytes on average, from the shard files' sizes (pages and headers
        included: a little more than the rows)."""
        rows = self.dataset.num_rows
        if not rows:
            return None
        return max(1, sum(path.stat().st_size for path in self.dataset.files) // rows)

    def iter_batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in MindSpore's order (shard by shard), ``batch_rows`` at a time."""
        check_batch_rows(batch_rows)
        yield from self.dataset.iter_batches(batch_rows)

    def close(self) -> None:
        """Unmap the shard files."""
        self.dataset.close()
