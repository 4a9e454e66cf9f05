"""Damaged files: only MrecordError, never damaged rows served, every payload change detected.

The quick version of ``reliability/corruption_campaign.py`` (docs/RELIABILITY.md).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mrecord.errors import ChecksumError, CorruptFileError, MrecordError
from mrecord.maintenance.verify import verify_dataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import ShardFile
from reliability import corrupt

mutations = st.builds(
    corrupt.Mutation,
    shard=st.integers(0, corrupt.SHARDS - 1),
    region=st.sampled_from(corrupt.REGIONS),
    kind=st.sampled_from(corrupt.KINDS),
    frac=st.floats(0, 1, exclude_max=True),
    length=st.sampled_from([1, 2, 4, 8, 64, 300]),
    mask=st.integers(1, 255),
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dataset every case damages a copy of."""
    directory = tmp_path_factory.mktemp("template")
    corrupt.build_template(directory)
    return directory


@given(mutation=mutations)
# a byte of the .db's schema table made not UTF-8: sqlite's text came back as a raw
# UnicodeDecodeError instead of CorruptFileError (found by hypothesis, 2026-11-25)
@example(mutation=corrupt.Mutation(0, "db", "overwrite", 0.15625, 1, 2))
def test_damage_is_refused_or_harmless(template: Path, mutation: corrupt.Mutation) -> None:
    """Any damage: reader and verify raise only MrecordError, within a time limit; a read that
    succeeds returns exactly the written rows; damage to a payload or metadata is detected."""
    result = corrupt.check_mutation(template, mutation, timeout=10.0)
    assert result.passed, (mutation.describe(), result)


def _copy(template: Path, tmp_path: Path) -> list[Path]:
    shutil.copytree(template, tmp_path / "ds")
    return [tmp_path / "ds" / f"{corrupt.NAME}{i}" for i in range(corrupt.SHARDS)]


def test_every_chunk_checksum_catches_a_flipped_byte(template: Path, tmp_path: Path) -> None:
    """Flip one byte in every chunk of a shard, one at a time: each read of that chunk fails."""
    files = _copy(template, tmp_path)
    original = files[0].read_bytes()
    with ShardFile(files[0]) as shard:
        chunks = shard.meta.chunks.copy()
    rng = random.Random(7)
    for page in range(chunks.shape[0]):
        for col in range(chunks.shape[1]):
            rec = chunks[page, col]
            if not rec["length"]:
                continue
            at = int(rec["offset"]) + rng.randrange(int(rec["length"]))
            damaged = bytearray(original)
            damaged[at] ^= 1 << rng.randrange(8)
            files[0].write_bytes(bytes(damaged))
            with (
                ShardFile(files[0], verify="always") as shard,
                pytest.raises(ChecksumError) as info,
            ):
                shard.raw_chunk(page, col)
            assert (info.value.page, info.value.offset) == (page, int(rec["offset"]))
    files[0].write_bytes(original)


def test_verify_reports_every_damaged_page(template: Path, tmp_path: Path) -> None:
    """Three damaged pages in two shards: verify lists all three, not just the first."""
    files = _copy(template, tmp_path)
    damaged = [(0, 0), (0, 2), (1, 1)]
    for shard_index, page in damaged:
        with ShardFile(files[shard_index]) as shard:
            at = int(shard.meta.chunks[page, 2]["offset"]) + 1
        data = bytearray(files[shard_index].read_bytes())
        data[at] ^= 0xFF
        files[shard_index].write_bytes(bytes(data))
    report = verify_dataset(files[0])
    assert not report.ok
    for shard_index, page in damaged:
        assert any(
            str(files[shard_index]) in p and f"page {page}," in p for p in report.problems
        ), (shard_index, page, report.problems)
    with pytest.raises(ChecksumError), DatasetReader.open(files[0], verify="always") as reader:
        reader.read_rows(np.arange(reader.num_rows))


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + bytes(200), b"\xff" * 4096])
def test_garbage_db_is_a_corrupt_file(template: Path, tmp_path: Path, content: bytes) -> None:
    """A .db replaced by garbage: CorruptFileError naming the .db and the rebuild command."""
    files = _copy(template, tmp_path)
    db = files[1].with_name(files[1].name + ".db")
    db.write_bytes(content)
    with pytest.raises(MrecordError) as info:
        DatasetReader.open(files[0])
    assert isinstance(info.value, CorruptFileError) and str(db) in str(info.value)
    assert "mrecord reindex" in str(info.value)
    assert not verify_dataset(files[0]).ok


def test_verify_reports_a_db_cell_of_the_wrong_type(template: Path, tmp_path: Path) -> None:
    """A .db whose row table holds text where a page number belongs: verify reports it."""
    files = _copy(template, tmp_path)
    conn = sqlite3.connect(files[0].with_name(files[0].name + ".db"))
    try:
        conn.execute("UPDATE rows SET page = 'abc' WHERE row_id = 3")
        conn.commit()
    finally:
        conn.close()
    report = verify_dataset(files[0])
    assert not report.ok and any("row 3" in p for p in report.problems)
