"""Opening a dataset of many shards holds memory in proportion to its shards, not to their
square: every shard's metadata lists every shard's name, and each reading process kept
all of those lists (1,000 shards: 1M name strings, 59 MB a process, 300 MB in a
DataLoader of four workers, whose workers were OOM-killed in a 600 MB group reading a
152 MB dataset)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader
from mrecord.format import metadata
from tests.many_shards import write_many_shards
from tests.tracing import traced_peak

SHARDS = 300


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(f"{write_many_shards(tmp_path_factory.mktemp('shards'), SHARDS)}000")


def test_a_reader_of_many_shards_holds_a_few_kb_a_shard(many_shards: Path) -> None:
    getattr(metadata, "_SHARD_NAMES", {}).clear()  # a fresh process: no list kept yet
    reader, peak = traced_peak(lambda: DatasetReader.open(many_shards))
    try:
        assert len(reader.shards) == SHARDS
        # each shard's own list of the 300 names: ~21 KB a shard on top
        assert peak < 16_000 * SHARDS, f"{peak / SHARDS:.0f} bytes a shard"
        names = {id(shard.meta.shard_names) for shard in reader.shards}
        assert len(names) == 1  # one list of the names, shared
        assert reader.shards[7].meta.shard_names[7] == reader.shards[7].path.name
        ids = np.arange(reader.num_rows)
        assert np.asarray(reader.read_rows(ids).columns["id"]).tolist() == ids.tolist()
    finally:
        reader.close()


def test_a_bad_shard_name_is_refused_though_the_list_was_seen_before(many_shards: Path) -> None:
    """The kept lists are only those that passed the name check: a list that differs is
    checked again."""
    from mrecord.errors import MetadataError

    good = ["d.mrecord000", "d.mrecord001"]
    assert metadata._shard_names(good) == tuple(good)
    assert metadata._shard_names(list(good)) is metadata._shard_names(good)
    with pytest.raises(MetadataError):
        metadata._shard_names(["d.mrecord000", "../escape"])
    with pytest.raises(MetadataError):
        metadata._shard_names(["d.mrecord000", 7])
