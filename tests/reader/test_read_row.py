"""``DatasetReader.read_row``: the same values as ``read_rows``, owned copies, and the
checksum policy applied on the fast per-column path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.errors import ChecksumError
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import ShardFile

SCHEMA = {
    "i": {"type": "int64"},
    "v": {"type": "float32", "shape": [3]},
    "z": {"type": "int32", "shape": [2], "compression": "zstd"},
    "b": {"type": "bool"},
    "raw": {"type": "bytes"},
    "s": {"type": "string"},
    "pts": {"type": "float32", "shape": [-1, 2]},
}
ROWS = 120


def _rows() -> list[dict[str, object]]:
    rng = np.random.default_rng(5)
    return [
        {
            "i": i,
            "v": rng.random(3, dtype=np.float32),
            "z": np.array([i, -i], np.int32),
            "b": bool(i % 3),
            "raw": bytes([i % 256]) * (i % 7),
            "s": f"row {i} é",
            "pts": rng.random((i % 4 + 1, 2), dtype=np.float32),
        }
        for i in range(ROWS)
    ]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("read_row") / "d"
    with FileWriter(path, shard_num=3) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(1024)
        writer.write_raw_data(_rows())
    return path.with_name("d0")


def _same(a: object, b: object) -> None:
    if isinstance(b, np.ndarray) or isinstance(a, np.generic):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
    else:
        assert a == b and type(a) is type(b)


@settings(max_examples=30)
@given(st.lists(st.integers(0, ROWS - 1), min_size=1, max_size=20))
def test_read_row_matches_read_rows_and_the_written_rows(dataset: Path, ids: list[int]) -> None:
    want = _rows()
    with DatasetReader.open(dataset) as reader:
        block = reader.read_rows(ids)
        for k, i in enumerate(ids):
            row = reader.read_row(np.int64(i) if k % 2 else i)  # type: ignore[arg-type]
            assert list(row) == list(SCHEMA)
            for name in SCHEMA:
                _same(row[name], block.columns[name][k])
                _same(np.asarray(row[name]), np.asarray(want[i][name]))
            assert isinstance(row["i"], np.int64) and isinstance(row["b"], np.bool_)


def test_read_row_arrays_are_writable_copies(dataset: Path) -> None:
    with DatasetReader.open(dataset) as reader:
        first = reader.read_row(7)
        for name in ("v", "z", "pts"):
            first[name][...] = 0
        again = reader.read_row(7)
    assert again["v"].any() and again["z"][0] == 7 and again["pts"].any()


def test_read_row_checks_a_damaged_chunk_once_per_policy(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with FileWriter(path) as writer:
        writer.add_schema({"i": {"type": "int64"}, "v": {"type": "float32", "shape": [4]}})
        writer.set_page_size(1024)
        writer.write_raw_data({"i": np.arange(400), "v": np.ones((400, 4), np.float32)})
    with ShardFile(path) as shard:
        rec = shard.meta.chunks[2, 1].copy()
        damaged_row = int(shard.page_starts[2])
    data = bytearray(path.read_bytes())
    data[int(rec["offset"]) + 5] ^= 0x10
    path.write_bytes(bytes(data))
    for verify in ("once", "always"):
        with DatasetReader.open(path, verify=verify) as reader:
            assert reader.read_row(0)["i"] == 0  # page 0 is intact
            for _ in range(2):  # a failed check is not remembered as passed
                with pytest.raises(ChecksumError) as info:
                    reader.read_row(damaged_row)
                assert info.value.page == 2
    with DatasetReader.open(path, verify="never") as reader:
        assert reader.read_row(damaged_row)["i"] == damaged_row


@settings(max_examples=20)
@given(st.lists(st.integers(0, 299), min_size=0, max_size=60))
def test_read_rows_gathers_wide_fixed_columns_in_the_order_asked(ids: list[int]) -> None:
    """One shard (the gather is the result) and wide rows (more than 64 values each)."""
    data: dict[str, np.ndarray] = {
        "img": np.arange(300 * 100, dtype=np.uint8).reshape(300, 10, 10),
        "w": np.arange(300 * 3, dtype=np.float64).reshape(300, 3),
        "k": np.arange(300, dtype=np.int16),
    }
    with _wide_dataset(data) as reader:
        block = reader.read_rows(ids)
    for name, values in data.items():
        got = block.columns[name]
        assert isinstance(got, np.ndarray) and got.flags.writeable  # a copy, not the map
        np.testing.assert_array_equal(got, values[ids].reshape(got.shape))
        assert got.shape == (len(ids), *values.shape[1:])


_WIDE: dict[str, Path] = {}


def _wide_dataset(data: dict[str, np.ndarray]) -> DatasetReader:
    import tempfile

    if "path" not in _WIDE:
        path = Path(tempfile.mkdtemp(prefix="wide")) / "w"
        with FileWriter(path) as writer:
            writer.add_schema(
                {
                    "img": {"type": "uint8", "shape": [10, 10]},
                    "w": {"type": "float64", "shape": [3]},
                    "k": {"type": "int16"},
                }
            )
            writer.set_page_size(4096)
            writer.write_raw_data(data)
        _WIDE["path"] = path
    return DatasetReader.open(_WIDE["path"])


def test_read_rows_of_no_ids_and_of_an_empty_dataset(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    with FileWriter(path) as writer:
        writer.add_schema({"s": {"type": "string"}, "v": {"type": "float32", "shape": [2]}})
        writer.write_raw_data([])
    with DatasetReader.open(path) as reader:
        block = reader.read_rows([])
    assert len(block) == 0 and block.columns["s"] == []
    v = block.columns["v"]
    assert isinstance(v, np.ndarray) and v.shape == (0, 2)


def test_verify_always_checks_each_chunk_once_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a"
    with FileWriter(path) as writer:
        writer.add_schema({"i": {"type": "int64"}})
        writer.set_page_size(1024)
        writer.write_raw_data({"i": np.arange(1000)})
    checks: list[tuple[int, int]] = []
    original = ShardFile.check_chunk

    def counting(self: ShardFile, page: int, col: int) -> None:
        checks.append((page, col))
        original(self, page, col)

    monkeypatch.setattr(ShardFile, "check_chunk", counting)
    with DatasetReader.open(path, verify="always") as reader:
        pages = reader.shards[0].page_starts
        ids = np.repeat(np.arange(int(pages[2])), 3)  # pages 0 and 1, every row 3 times
        for _ in range(2):
            checks.clear()
            got = reader.read_rows(ids).columns["i"]
            assert isinstance(got, np.ndarray) and got.tolist() == ids.tolist()
            assert sorted(checks) == [(0, 0), (1, 0)]


def _count_checksums(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the shard's checksum functions (``checksum`` for mapped bytes,
    ``checksum_releasing`` for what its ``pread``s bring); the list grows by one per chunk
    checksummed (these chunks are small: one call each)."""
    import mrecord.storage.shard as shard_module

    calls: list[int] = []
    for name in ("checksum", "checksum_releasing"):
        original = getattr(shard_module, name)  # patched where it is used

        def counting(data: object, *crc: int, original: Any = original) -> int:
            calls.append(1)
            return int(original(data, *crc))

        monkeypatch.setattr(shard_module, name, counting)
    return calls


def _write_ints(path: Path, n: int = 1000) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"i": {"type": "int64"}, "raw": {"type": "bytes"}})
        writer.set_page_size(1024)
        writer.write_raw_data({"i": np.arange(n), "raw": [bytes([k % 256]) * 7 for k in range(n)]})


def test_verify_once_is_once_per_process_not_per_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second reader of the same committed file (a new MindDataset per epoch, a second
    DatasetReader) trusts the chunks the first one checked: no second checksum pass."""
    path = tmp_path / "a"
    _write_ints(path)
    calls = _count_checksums(monkeypatch)
    with DatasetReader.open(path) as first:
        calls.clear()  # opening checksums the metadata; count chunk checks only
        everything = np.arange(first.num_rows)
        first.read_rows(everything)
        chunks = first.shards[0].meta.chunks.size
    assert len(calls) == chunks  # every chunk of both columns, once
    with DatasetReader.open(path) as second:
        calls.clear()
        block = second.read_rows(everything[::-1])
        assert second.read_row(5)["raw"] == bytes([5]) * 7
    assert calls == []
    got = block.columns["i"]
    assert isinstance(got, np.ndarray) and got.tolist() == everything[::-1].tolist()
    with DatasetReader.open(path, verify="always") as always:
        calls.clear()
        always.read_row(0)
    assert len(calls) == 2  # "always" still checks, whatever was checked before


def test_a_changed_file_is_checked_again(tmp_path: Path) -> None:
    """Verified chunks are trusted only for the same bytes: a file damaged in place after
    a reader checked it fails in the next reader, and an appended file is checked anew."""
    import time

    path = tmp_path / "a"
    _write_ints(path)
    with DatasetReader.open(path) as reader:
        reader.read_rows(np.arange(reader.num_rows))
        offset = int(reader.shards[0].meta.chunks[0, 1]["offset"])
    time.sleep(0.05)  # a later modification time than the commit's (coarse clocks)
    with open(path, "r+b") as f:
        f.seek(offset + 1)
        byte = f.read(1)
        f.seek(offset + 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ChecksumError), DatasetReader.open(path) as reader:
        reader.read_row(0)


def test_clear_verified_forgets_what_was_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mrecord.storage.verified import clear_verified

    path = tmp_path / "a"
    _write_ints(path, 100)
    calls = _count_checksums(monkeypatch)
    with DatasetReader.open(path) as reader:
        calls.clear()
        reader.read_row(0)
        assert len(calls) == 2
    clear_verified()
    with DatasetReader.open(path) as reader:
        calls.clear()
        reader.read_row(0)
    assert len(calls) == 2


def test_reading_a_row_reads_only_its_own_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: "reading a row reads only its page's chunks, never the whole file". With
    ``verify="always"`` every chunk read is checksummed first, so the chunks checked are
    the chunks read: one page's, one chunk per column, for a row in the middle of a
    dataset of many pages."""
    path = tmp_path / "paged"
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(4096)
        writer.write_raw_data(_rows() * 10)
    checked: list[tuple[int, int]] = []
    original = ShardFile._chunk_intact

    def counting(self: ShardFile, page: int, col: int) -> bool:
        checked.append((page, col))
        return original(self, page, col)

    with DatasetReader.open(path, verify="always") as reader:
        pages = len(reader.shards[0].meta.chunks)
        assert pages > 20  # the file has many pages; one row must not read them
        monkeypatch.setattr(ShardFile, "_chunk_intact", counting)
        reader.read_row(ROWS * 5 + 7)
    assert len({page for page, _ in checked}) == 1
    assert sorted(col for _, col in checked) == list(range(len(SCHEMA)))
