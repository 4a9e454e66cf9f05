"""A conversion into many shards, whose shards write short pages once they hold the
writer's ``PENDING_BYTES`` together, resumes to the bytes of an uninterrupted run.

The cut of those pages depends on the rows the shards hold alone, which a checkpoint
gives back: kills at 8 s and 17 s of a 2M-row conversion into 1,000 shards resumed to the
clean run's bytes. Here in-process, smaller: a failure raised from the progress callback
stops the run (its checkpoints stay), and ``resume`` goes on from the last of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.storage.shard import read_shard_metadata
from mrecord.writer import file_writer

DATASET_ID = "d1" * 16
SHARDS = 24
ROWS = 30_000


class _Stop(Exception):
    """Raised by the progress callback: the run stops as if killed there."""


def _csv(tmp_path: Path) -> Path:
    src = tmp_path / "names.csv"
    # The first shard's part of each batch has long names: it fills pages of its own,
    # so checkpoints come while the other shards hold rows.
    lines = [f"{i},{'x' * (2000 if i % 500 < 20 else 1)}{i:09d}.jpg,{i % 10}" for i in range(ROWS)]
    src.write_text("id,file_name,label\n" + "\n".join(lines) + "\n")
    return src


def _convert(src: Path, dst: Path, *, resume: bool = False, stop_at: int | None = None) -> int:
    options = WriteOptions(
        shard_num=SHARDS,
        index_fields=["file_name", "label"],
        page_size=1 << 16,
        batch_rows=500,
        resume=resume,
        checkpoint_bytes=1,  # a checkpoint after every batch that wrote a page
    )
    written = {"n": 0}

    def progress(n: int) -> None:
        written["n"] += n
        if stop_at is not None and written["n"] >= stop_at:
            raise _Stop

    schema = {"id": "int64", "file_name": "string", "label": "int32"}
    with SOURCES["csv"](src, schema=schema) as source:
        summary = write_source(source, dst, options, progress=progress, dataset_id=DATASET_ID)
    return summary.resumed_at_row


def _files(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dst.parent.glob(dst.name + "*"))}


@pytest.mark.parametrize("stop_at", [7_000, 19_500])
def test_a_stopped_conversion_into_many_shards_resumes_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_at: int
) -> None:
    monkeypatch.setattr(file_writer, "PENDING_BYTES", 128 << 10)
    src = _csv(tmp_path)
    clean = tmp_path / "clean" / "n.mrecord"
    clean.parent.mkdir()
    _convert(src, clean)
    pages = read_shard_metadata(Path(f"{clean}00")).page_rows.tolist()
    assert len(pages) > 2, "no short pages: nothing tested"
    resumed = tmp_path / "resumed" / "n.mrecord"
    resumed.parent.mkdir()
    with pytest.raises(_Stop):
        _convert(src, resumed, stop_at=stop_at)
    assert _convert(src, resumed, resume=True) > 0, "the resume started over"
    assert _files(resumed) == _files(clean)
