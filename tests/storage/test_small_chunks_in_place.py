"""A cold block's small chunks and its values' checks (issue 23, the first rows of a cold
epoch): the label chunk of each page is checked in the reading thread from the map, not
read again by the I/O threads; a value read off the disk is checked with the GIL let go."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import crc32c
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrecord.format.compression as compression
from mrecord import DatasetReader, FileWriter
from mrecord.errors import ChecksumError
from mrecord.format.compression import checksum, checksum_releasing
from mrecord.reader import dataset_reader
from mrecord.storage.shard import ShardFile
from mrecord.storage.verified import clear_verified

# Files as format 1.3 wrote them (no head index): their small chunks are read from the
# file, the path these tests are about (tests/storage/test_head_index.py: with one).
pytestmark = pytest.mark.usefixtures("without_head_index")

ROWS = 48


def _value(i: int) -> bytes:
    """Row i's value: 40-44 KB (a CRC of its own in the chunk's value table)."""
    return i.to_bytes(4, "little") * ((40_000 + 97 * i) // 4)


def _write(path: Path) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(256 << 10)  # ~6 rows a page
        writer.write_raw_data([{"id": i, "blob": _value(i)} for i in range(ROWS)])


@pytest.fixture
def beyond(monkeypatch: pytest.MonkeyPatch, cold: None) -> None:
    """Every block cold and the reader beyond memory, values read one by one (not the
    chunk buffers, which a dataset this small fits whole)."""
    monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)


def _arrivals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every chunk the I/O threads read and check (``verify_arriving`` with a ``pread``,
    not ``in_place`` from the map), as (page, col)."""
    seen: list[tuple[int, int]] = []
    real = ShardFile.verify_arriving

    def spy(self: ShardFile, page: int, col: int, in_place: bool = False) -> None:
        if not in_place:
            seen.append((page, col))
        real(self, page, col, in_place)

    monkeypatch.setattr(ShardFile, "verify_arriving", spy)
    return seen


def test_a_cold_blocks_label_chunks_are_checked_in_place(
    tmp_path: Path, beyond: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    arrivals = _arrivals(monkeypatch)
    order = np.random.default_rng(3).permutation(ROWS)
    with DatasetReader.open(path, verify="once") as reader:
        shard = reader.shards[0]
        label = shard.field_index("id")
        for start in range(0, ROWS, 12):
            ids = order[start : start + 12]
            block = reader.read_rows(ids)
            assert np.asarray(block.columns["id"]).tolist() == ids.tolist()
            assert [bytes(v) for v in block.columns["blob"]] == [_value(int(i)) for i in ids]
        pages = np.arange(shard.meta.chunks.shape[0])
        assert shard.verified_chunks(pages, label).all()
    assert [a for a in arrivals if a[1] == label] == []  # none went to the I/O threads


def test_a_damaged_label_chunk_read_cold_raises_and_is_never_handed_out(
    tmp_path: Path, beyond: None
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        offset, _, _ = shard.chunk_place(2, shard.field_index("id"))
        damaged = list(range(int(shard.page_starts[2]), int(shard.page_starts[3])))
    data = bytearray(path.read_bytes())
    data[offset + 3] ^= 0x10  # inside the first id of page 2
    path.write_bytes(bytes(data))
    clear_verified()
    with DatasetReader.open(path, verify="once") as reader:
        fine = [r for r in range(ROWS) if r not in damaged][:5]
        assert np.asarray(reader.read_rows(fine).columns["id"]).tolist() == fine
        for _ in range(2):  # and still on the next read
            with pytest.raises(ChecksumError, match=r"page 2, field 'id'"):
                reader.read_rows([fine[0], damaged[1]])


@given(st.binary(max_size=70_000), st.integers(0, 2**32 - 1))
def test_checksum_releasing_is_the_crc_of_checksum(data: bytes, crc: int) -> None:
    assert checksum_releasing(data) == checksum(data)
    assert checksum_releasing(data, crc) == compression.checksum_update(data, crc)


def _gil_modes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(bytes, gil_release_mode) of every CRC-32C the format module asks for."""
    modes: list[tuple[int, int]] = []

    def spy(data: Any, value: int = 0, gil_release_mode: int = -1) -> int:
        modes.append((memoryview(data).nbytes, gil_release_mode))
        return int(crc32c.crc32c(data, value, gil_release_mode))

    monkeypatch.setattr(compression, "crc32c", SimpleNamespace(crc32c=spy))
    return modes


def test_a_readers_checks_let_the_gil_go_from_32_kib_and_a_writers_keep_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modes = _gil_modes(monkeypatch)
    big, small = b"x" * (100 << 10), b"y" * (16 << 10)
    checksum_releasing(big)
    checksum_releasing(small)
    checksum(big)
    assert modes == [(len(big), 1), (len(small), 0), (len(big), 0)]


def test_values_read_cold_are_checked_with_the_gil_let_go(
    tmp_path: Path, beyond: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    order = np.random.default_rng(5).permutation(ROWS)[:10]
    with DatasetReader.open(path, verify="once") as reader:
        modes = _gil_modes(monkeypatch)
        block = reader.read_rows(order)
        assert [bytes(v) for v in block.columns["blob"]] == [_value(int(i)) for i in order]
    values = {len(_value(int(i))) for i in order}
    released = [n for n, mode in modes if mode == 1]
    assert values <= set(released), (values, modes)
