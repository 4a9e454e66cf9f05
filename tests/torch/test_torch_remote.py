"""The torch datasets read s3:// datasets as MindDataset does, with ``storage_options``
(moto's S3 on 127.0.0.1 stands in for the store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.servers import s3_server, upload_folder
from mrecord import FileWriter

pytest.importorskip("fsspec")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    with s3_server("data") as options:
        yield options


def test_streaming_and_map_dataset_read_s3_with_storage_options(
    tmp_path: Path, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mrecord.torch import MapDataset, StreamingDataset

    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "local").mkdir()
    with FileWriter(tmp_path / "local" / "t.mrecord", shard_num=2) as writer:
        writer.add_schema({"x": {"type": "int64"}})
        writer.write_raw_data([{"x": i} for i in range(12)])
    upload_folder(tmp_path / "local", "s3://data/torch", s3)
    url = "s3://data/torch/t.mrecord0"
    stream = StreamingDataset(url, shuffle=False, rank=0, world_size=1, storage_options=s3)
    assert sorted(int(s["x"]) for s in stream) == list(range(12))
    mapped = MapDataset(url, storage_options=s3)
    assert len(mapped) == 12 and int(mapped[11]["x"]) == 11
