"""``ShardMetadata.raw_bytes``: a column's decompressed bytes from the chunk directory alone,
exactly what the chunk layouts of ``mrecord.format.chunks`` say (serve's bytes-per-row, the
MindDataset block sizing, ``mrecord inspect`` and the Ray datasource all use it)."""

from __future__ import annotations

import numpy as np
import pytest

from mrecord import DatasetReader
from mrecord.maintenance.inspect import dataset_info
from tests.factory import MakeDataset

ROWS = 150


@pytest.mark.parametrize("compress", [False, True])
def test_raw_bytes_are_the_chunk_layouts_of_the_values(
    make_dataset: MakeDataset, compress: bool
) -> None:
    first = make_dataset(ROWS, shards=1, compress=compress)
    with DatasetReader.open(first) as reader:
        [shard] = reader.shards
        meta = shard.meta
        values = reader.read_rows(np.arange(ROWS)).columns
    pages = meta.num_pages
    assert pages > 1  # several chunks per column are summed
    names = meta.schema.names
    offsets = 8 * (ROWS + pages)  # a variable-size chunk: (rows + 1) u64 offsets per page
    blob = sum(len(bytes(v)) for v in values["blob"])
    text = sum(len(str(v).encode("utf-8")) for v in values["text"])
    points = [np.asarray(v) for v in values["points"]]
    want = {
        "id": 8 * ROWS,
        "label": 4 * ROWS,
        "vec": 4 * 4 * ROWS,
        "blob": offsets + blob,
        "text": offsets + text,
        "points": offsets + 8 * 2 * ROWS + sum(p.nbytes for p in points),  # + shapes
    }
    assert {n: meta.raw_bytes(names.index(n)) for n in names} == want
    # values_only: the 8 bytes of offset each row has are left out, nothing else
    fixed = {"id", "label", "vec"}
    assert {n: meta.raw_bytes(names.index(n), values_only=True) for n in names} == {
        n: w if n in fixed else w - 8 * ROWS for n, w in want.items()
    }


def test_inspect_reports_the_raw_bytes_of_every_shard(make_dataset: MakeDataset) -> None:
    first = make_dataset(ROWS, shards=3)
    report = dataset_info(first)
    with DatasetReader.open(first) as reader:
        names = reader.shards[0].meta.schema.names
        want = {n: sum(s.meta.raw_bytes(names.index(n)) for s in reader.shards) for n in names}
    assert {f["name"]: f["raw_bytes"] for f in report["schema"]} == want
    assert want["id"] == 8 * ROWS
